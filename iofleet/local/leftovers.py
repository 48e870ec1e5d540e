"""What a dead `iofleet local` left on a target, found and removed by the next run.

A runner that is SIGKILLed (the OOM killer, `kill -9`) or loses its machine (a power
cut) runs no cleanup: its slots' and its populate step's directories stay on the
target (`<target>/iofleet-<run_id>/...`, iofleet.agent.target). Its agents die with
it (PR_SET_PDEATHSIG), their workloads with them (the guardian's life pipe); local
targets are directories, so no mount or loop device is left; the agents' temp files
are unlinked at creation. What is left is files: under that directory, and in the
run's temp directory in TMPDIR (an app's temp directory: iofleet.local.runtemp),
which the mark names and which goes with the run's files.

So each run marks every target it uses, before anything of it is written there:
`<target>/.iofleet-run-<run_id>.json` with its runner's pid, the process's start time
(/proc/PID/stat, in clock ticks since boot), the kernel's boot id and the host name.
The mark goes when the run has removed its directory from the target. The next run
on that target (any --out) reads every mark first, before its room check (a dead run's
files are no room the new run lacks: iofleet/local/space.py) and before its own
--out's dead runs are recovered: one whose runner is gone (another boot id, or no
process with that pid and start time: a pid reused by another process does not
count) has its `iofleet-<run_id>` directory and then the mark removed, and the run
says so in one line. A runner that is alive, or on another host (a shared NFS or
EFS path: its processes cannot be seen from here), or a mark that cannot be read, is
left alone; so is everything on the target that no mark names.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from pathlib import Path
from typing import Any

from iofleet.agent.guard import stat_fields
from iofleet.results.outdir import read_own_json

PREFIX = ".iofleet-run-"
SUFFIX = ".json"
RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$")
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def mark_path(target: Path, run_id: str) -> Path:
    return target / f"{PREFIX}{run_id}{SUFFIX}"


def boot_id() -> str:
    """The kernel's boot id; "" where it cannot be read (then only pid and start time
    tell a runner's life)."""
    try:
        return BOOT_ID.read_text(encoding="ascii").strip()
    except OSError:
        return ""


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22)."""
    fields = stat_fields(pid)
    if fields is None or fields[0] in (b"Z", b"X"):  # exited, not yet reaped: gone
        return None
    return int(fields[19])


def host_name() -> str:
    """The machine's name: the kernel's nodename, what `socket.gethostname()` returns
    and what the agent's manifest records (iofleet.agent.manifest.system_info)."""
    return os.uname().nodename


def owner(pid: int | None = None) -> dict[str, Any]:
    pid = os.getpid() if pid is None else pid
    return {
        "pid": pid,
        "start_time": start_time(pid),
        "boot_id": boot_id(),
        "host": host_name(),
    }


def runner_alive(doc: dict[str, Any]) -> bool:
    """Whether the runner a mark names may still run (True when that cannot be told)."""
    if doc.get("host") != host_name():
        return True  # another machine's process: not ours to judge
    if doc.get("boot_id") != boot_id():
        return False  # the machine restarted since
    pid = doc.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool):
        return True
    return start_time(pid) == doc.get("start_time")


def mark(target: Path, run_id: str, temp_dir: Path | None = None) -> None:
    """Mark `target` as used by this run (this process), naming the run's temp directory
    (iofleet.local.runtemp), which goes with the run's files. One small write: a SIGKILL
    cannot split it; a power cut may leave it empty, and an unreadable mark is left
    alone."""
    doc: dict[str, Any] = {"run_id": run_id, **owner()}
    if temp_dir is not None:
        doc["temp_dir"] = str(temp_dir)
    text = json.dumps(doc) + "\n"
    try:
        fd = os.open(mark_path(target, run_id), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    except OSError:  # a target we cannot write: its slots say so (nothing will be left)
        return
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def unmark(target: Path, run_id: str) -> None:
    """Remove this run's mark once nothing of the run is left on the target."""
    from iofleet.agent.target import run_dir_name

    if not os.path.lexists(target / run_dir_name(run_id)):
        with contextlib.suppress(OSError):  # then the next run finds it and tidies up
            mark_path(target, run_id).unlink(missing_ok=True)


def remove_dead(target: Path) -> list[str]:
    """Remove what runs whose runner is gone left on `target`; one line per run."""
    return list(remove_dead_runs(target).values())


def remove_dead_runs(target: Path) -> dict[str, str]:
    """`remove_dead`, the lines by run id (the runner says nothing more of a run whose
    --out it recovers: one line per run)."""
    lines: dict[str, str] = {}
    try:
        names = sorted(os.listdir(target))
    except OSError:
        return lines
    for name in names:
        if not (name.startswith(PREFIX) and name.endswith(SUFFIX)):
            continue
        run_id = name[len(PREFIX) : -len(SUFFIX)]
        path = target / name
        # unreadable, a link, a fifo (never waited on) or not our JSON: cannot tell whose
        doc = read_own_json(path)
        if doc is None or doc.get("run_id") != run_id or not RUN_ID.match(run_id):
            continue
        if runner_alive(doc):
            continue
        from iofleet.agent.target import remove_run_dir, run_dir_name  # only now: startup
        from iofleet.local.runtemp import remove_recorded

        remove_recorded(doc.get("temp_dir"))  # its agents' TMPDIR, if it is still there

        if not os.path.lexists(target / run_dir_name(run_id)):
            path.unlink(missing_ok=True)  # its files went already
            continue
        problem = remove_run_dir(target, run_id)
        if problem:
            lines[run_id] = f"{target}: run {run_id} died and left files; {problem}"
            continue
        path.unlink(missing_ok=True)
        lines[run_id] = (
            f"{target}: removed what run {run_id} left there "
            f"(its runner, pid {doc.get('pid')}, died without cleaning up)"
        )
    return lines
