"""The `--out` directory's lock and the machine errors met while writing it.

`iofleet local` and `iofleet import` both write `OUT/raw/` and rebuild
`OUT/warehouse.duckdb`; each holds `OUT/.iofleet.lock` while it does, so a second
writer exits 4 (OutputBusy) instead of sharing the warehouse with the first.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from iofleet.errors import EnvironmentProblem, OutputBusy, UsageError

LOCK_NAME = ".iofleet.lock"
# errors of the machine, not of the input: exit 3 (EnvironmentProblem)
ENVIRONMENT_ERRNOS = {
    errno.ENOSPC,
    errno.EDQUOT,
    errno.EROFS,
    errno.EACCES,
    errno.EPERM,
    errno.EIO,
}


@contextmanager
def output_lock(out_dir: Path, command: str = "iofleet local") -> Iterator[int]:
    """Hold an exclusive flock on `OUT/.iofleet.lock` for the run (yields its fd).

    A kernel lock: it goes when its last holder exits, however it exits, so a dead
    runner never leaves a stale lock. The agents inherit the fd, so a runner killed
    while they unwind keeps --out busy until they are gone. Raises OutputBusy.
    """
    lock_path = out_dir / LOCK_NAME
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        raise environment_problem(exc, lock_path) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid, _, holder = os.pread(fd, 128, 0).decode("ascii", "replace").strip().partition(" ")
            raise OutputBusy(
                f"--out {out_dir}: in use by another run"
                + (f" ({holder or 'iofleet local'} pid {pid})" if pid.isdigit() else "")
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {command}\n".encode(), 0)
        yield fd
    finally:
        os.close(fd)


def environment_problem(exc: OSError, path: Path | str | None = None) -> Exception:
    """An OSError of the machine (disk full, read-only, permission) as EnvironmentProblem."""
    where = path if path is not None else (exc.filename or "--out")
    if exc.errno in ENVIRONMENT_ERRNOS:
        return EnvironmentProblem(f"{where}: {exc.strerror or exc}")
    return exc


def make_out_dir(out_dir: Path) -> None:
    """Create `--out` (and its parents) if missing. UsageError (exit 2) when the path
    cannot be a directory (a file in the way, a place no directory can be made);
    EnvironmentProblem (exit 3) when the machine refuses (permission, read-only, full)."""
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"--out {out_dir}: exists and is not a directory")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        problem = environment_problem(exc, f"--out {out_dir}")
        if problem is exc:  # not the machine's: the path itself cannot be a directory
            raise UsageError(
                f"--out {out_dir}: cannot create: {not_a_directory(out_dir) or exc.strerror}"
            ) from None
        raise problem from None


def not_a_directory(path: Path) -> str | None:
    """Why `path` can never be a directory here (a non-directory at it or at one of its
    parents), without creating anything; None when it is one or could be made."""
    for at in (path, *path.parents):
        try:
            mode = os.stat(at).st_mode
        except FileNotFoundError:
            if os.path.lexists(at):
                return f"{at} is a symbolic link to nothing"
            continue
        except NotADirectoryError:
            continue  # a parent is not a directory: found further up
        except OSError:
            return None  # cannot tell (permission): creating it will say
        if stat.S_ISDIR(mode):
            return None
        return f"{at} exists and is not a directory"
    return None
