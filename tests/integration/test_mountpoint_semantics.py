"""The plan's Mountpoint rules (iofleet/plan/mountpoint.py) against what fio really does.

There is no mount-s3 on this machine, so each library job runs with real fio on a local
directory under strace, and the trace is checked for the calls Mountpoint for Amazon S3
refuses (its doc/SEMANTICS.md): ftruncate / fallocate, O_TMPFILE, rename and links, a
write open of a file that already exists without O_TRUNC, a write that is not at the
file's current end. The plan must accept a job exactly when its trace has none of them.
What only AWS can show: that Mountpoint refuses precisely these calls, and its speed.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from iofleet.plan.fiojobs import job_names, render_command
from iofleet.plan.mountpoint import fio_workload_problems

pytestmark = pytest.mark.skipif(
    shutil.which("strace") is None or shutil.which("fio") is None, reason="needs strace and fio"
)

# small, fast values for each parameter a job may declare (O_DIRECT off: not the point here)
SMALL = {
    "SIZE": "4m",
    "RUNTIME": "2",
    "NUM_JOBS": "2",
    "IO_DEPTH": "4",
    "DIRECT": "0",
    "BURST_START": "1",
    "BURST_RUNTIME": "1",
    "READ_RATE": "4m",
    "WRITE_RATE": "4m",
}
_CALL = re.compile(r"^(?P<pid>\d+)\s+(?P<name>\w+)\((?P<args>.*)\)\s+=\s+(?P<ret>-?\d+)")
_FD = re.compile(r"^(\d+)<(?P<path>[^>]*)>")


_UNFINISHED = re.compile(r"^(?P<pid>\d+)\s+(?P<head>.*) <unfinished \.\.\.>$")
_RESUMED = re.compile(r"^(?P<pid>\d+)\s+<\.\.\. \w+ resumed>(?P<tail>.*)$")


def _joined(trace: str) -> list[str]:
    """strace -f lines with each call interrupted by another thread put back together."""
    pending: dict[str, str] = {}
    out: list[str] = []
    for line in trace.splitlines():
        if m := _UNFINISHED.match(line):
            pending[m["pid"]] = f"{m['pid']} {m['head']}"
        elif (m := _RESUMED.match(line)) and m["pid"] in pending:
            out.append(pending.pop(m["pid"]) + m["tail"])
        else:
            out.append(line)
    return out


def mountpoint_violations(trace: str, target: Path) -> list[str]:
    """Calls on files under `target` that Mountpoint refuses, one line each."""
    root = str(target)
    created: set[str] = set()
    end: dict[str, int] = {}  # path -> bytes written so far through the open for write
    found: list[str] = []
    for line in _joined(trace):
        m = _CALL.match(line)
        if not m or root not in line or int(m["ret"]) < 0:
            continue
        name, args = m["name"], m["args"]
        if name in ("ftruncate", "fallocate"):
            found.append(f"{name} on {args.split(',')[0]}")
        elif name in ("rename", "renameat", "renameat2", "link", "linkat", "symlink", "symlinkat"):
            found.append(f"{name}")
        elif name == "openat":
            path = re.search(r'"([^"]*)"', args)
            flags = args.split(", ")[2] if args.count(", ") >= 2 else ""
            if "O_TMPFILE" in flags:
                found.append("O_TMPFILE")
                continue
            if not path or ("O_WRONLY" not in flags and "O_RDWR" not in flags):
                continue
            p = path.group(1)
            if p in created and "O_TRUNC" not in flags:
                found.append(f"reopen for writing without O_TRUNC: {p}")
            created.add(p)
            end[p] = 0
        elif name in ("pwrite64", "write", "pwritev", "writev"):
            fd = _FD.match(args)
            if not fd or not fd["path"].startswith(root):
                continue
            p = fd["path"]
            size = int(m["ret"])
            if name.startswith("pwrite"):
                offset = int(args.rsplit(", ", 1)[1])
                if offset != end.get(p, 0):
                    found.append(f"write at {offset}, file end {end.get(p, 0)}: {p}")
                    continue
            end[p] = end.get(p, 0) + size
    return found


def _trace(job: str, workdir: Path, tmp: Path) -> str:
    from iofleet.plan.fiojobs import get_job

    params = {k: v for k, v in SMALL.items() if k in get_job(job).params}
    argv, text = render_command(job, params, str(workdir))
    out = tmp / "trace"
    calls = "openat,ftruncate,fallocate,pwrite64,pwritev,write,writev,rename,renameat,renameat2,link,linkat,symlink,symlinkat"
    subprocess.run(
        [
            "strace",
            "-f",
            "-y",
            "-qq",
            "-e",
            f"trace={calls}",
            "-e",
            "signal=none",
            "-o",
            str(out),
            *argv,
        ],
        input=text.encode(),
        cwd=workdir,
        capture_output=True,
        timeout=120,
        check=True,
    )
    return out.read_text()


@pytest.mark.parametrize("job", job_names())
def test_plan_accepts_a_library_job_exactly_when_fio_makes_no_call_mountpoint_refuses(
    job: str, tmp_path: Path
) -> None:
    workdir = tmp_path / "target"
    workdir.mkdir()
    params = {k: v for k, v in SMALL.items()}
    from iofleet.plan.fiojobs import get_job

    params = {k: v for k, v in params.items() if k in get_job(job).params}
    refused = fio_workload_problems(job, params)
    violations = mountpoint_violations(_trace(job, workdir, tmp_path), workdir)
    assert bool(refused) == bool(violations), (refused, violations[:5])


def test_ioping_makes_an_o_tmpfile_and_reads_it_back(tmp_path: Path) -> None:
    if shutil.which("ioping") is None:
        pytest.skip("needs ioping")
    out = tmp_path / "trace"
    subprocess.run(
        [
            "strace",
            "-f",
            "-y",
            "-qq",
            "-e",
            "trace=openat",
            "-o",
            str(out),
            "ioping",
            "-c",
            "2",
            "-i",
            "0",
            str(tmp_path),
        ],
        capture_output=True,
        timeout=60,
        check=True,
    )
    assert "O_TMPFILE" in mountpoint_violations(out.read_text(), tmp_path)
