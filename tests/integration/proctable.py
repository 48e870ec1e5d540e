"""Helpers for tests that prove processes gone from the process table (/proc)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

P = TypeVar("P", bound="subprocess.Popen[Any]")


def stat_fields(pid: int) -> tuple[int, str, int] | None:
    """(ppid, state, starttime) of a process, None when it is not in /proc."""
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    rest = data[data.rindex(b")") + 2 :].split()
    return int(rest[1]), rest[0].decode(), int(rest[19])


def stopped(pid: int) -> bool:
    """Whether the process is stopped (state T): at an IOFLEET_TEST_PAUSE_AT point."""
    return (stat_fields(pid) or (0, ""))[1] == "T"


def tree(root: int) -> dict[int, int]:
    """{pid: starttime} of root and every live process below it."""
    children: dict[int, list[int]] = {}
    starts: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        info = stat_fields(int(name))
        if info is None or info[1] in ("Z", "X"):
            continue
        children.setdefault(info[0], []).append(int(name))
        starts[int(name)] = info[2]
    found: dict[int, int] = {}
    todo = [root]
    while todo:
        pid = todo.pop()
        if pid in starts:
            found[pid] = starts[pid]
        todo.extend(children.get(pid, []))
    return found


def alive(pids: dict[int, int]) -> list[int]:
    """Those of `pids` ({pid: starttime}) still running (zombies count as gone)."""
    left = []
    for pid, start in pids.items():
        info = stat_fields(pid)
        if info is not None and info[2] == start and info[1] not in ("Z", "X"):
            left.append(pid)
    return left


def comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def runs_workload(pid: int, tool: str) -> bool:
    """Whether `pid` is `tool` (fio, ioping) running a workload, or one of fio's job
    processes (forked, same command line), and not the agent's version probe (`fio
    --version`, `ioping -v`, started with the agent): a workload's command line names
    its output format (fio's `--output-format=`, ioping's `-J`)."""
    if comm(pid) != tool:
        return False
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    flag = b"-J" if tool == "ioping" else b"--output-format="
    return any(arg.startswith(flag) for arg in argv)


def pids_with_cmdline(text: str) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            if text.encode() in Path(f"/proc/{name}/cmdline").read_bytes():
                found.append(int(name))
        except OSError:
            continue
    return found


def wait_for(condition: Callable[[], object], timeout_s: float, what: str) -> object:
    """Poll `condition` until it is truthy (bounded); fail with `what` otherwise."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout_s:g} s waiting for {what}"
        time.sleep(0.05)


def files_under(path: Path) -> list[str]:
    """Every file or symlink below path (directories left empty do not count)."""
    return sorted(
        str(p.relative_to(path)) for p in path.rglob("*") if p.is_symlink() or not p.is_dir()
    )


def signal_pending(pid: int, signum: int) -> bool:
    """Whether `signum` waits, undelivered, for the process (a stopped one keeps it)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    masks = [
        int(line.split()[1], 16) for line in status.splitlines() if line[:6] in ("SigPnd", "ShdPnd")
    ]
    return any(mask >> (signum - 1) & 1 for mask in masks)


@contextlib.contextmanager
def reaped(proc: P) -> Iterator[P]:
    """`proc` for the block; killed and waited for after it if still running (a test
    that failed before the process ended leaves nothing behind)."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
