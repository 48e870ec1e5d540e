"""Run one child process in its own process group, with a deadline.

Output goes to temporary files outside the storage under test (so logging
does not add I/O to the measurement, and a chatty build cannot fill memory).
At the deadline the whole group gets SIGTERM, then SIGKILL after a grace.

Stdlib only.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

TAIL_CHARS = 4000
KILL_GRACE_S = 5.0


@dataclass(frozen=True)
class ChildResult:
    returncode: int  # negative: killed by that signal
    stdout: str  # full stdout when keep_stdout, else its tail
    stderr_tail: str
    timed_out: bool
    seconds: float  # monotonic wall time
    error: str | None = None  # could not start (missing binary, bad cwd)


def tail(text: str, chars: int = TAIL_CHARS) -> str:
    return text[-chars:]


def _read(handle: IO[bytes], keep_all: bool) -> str:
    handle.seek(0)
    if keep_all:
        data: bytes = handle.read()
    else:
        handle.seek(0, os.SEEK_END)
        size = handle.tell()
        handle.seek(max(0, size - TAIL_CHARS * 4))
        data = handle.read()
    text = data.decode("utf-8", errors="replace")
    return text if keep_all else tail(text)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=KILL_GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def run_child(
    argv: list[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    deadline: float,
    keep_stdout: bool = True,
) -> ChildResult:
    """Run argv until it exits or time.monotonic() reaches deadline."""
    started = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
        except OSError as exc:
            return ChildResult(
                127,
                "",
                "",
                False,
                time.monotonic() - started,
                error=f"cannot run {argv[0]}: {exc.strerror or exc}",
            )
        timed_out = False
        try:
            proc.wait(timeout=max(deadline - time.monotonic(), 0.0))
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
        except BaseException:
            _kill_group(proc)
            raise
        else:
            # stragglers left in the group (background jobs of a build script) go too
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        seconds = time.monotonic() - started
        return ChildResult(
            proc.returncode,
            _read(out, keep_stdout),
            _read(err, False),
            timed_out,
            seconds,
        )
