"""The `--out` directory's lock, the temp files a dead writer left there, and the
machine errors met while writing it.

`iofleet local` and `iofleet import` both write `OUT/raw/` and rebuild
`OUT/warehouse.duckdb`; each holds `OUT/.iofleet.lock` while it does, so a second
writer exits 4 (OutputBusy) instead of sharing the warehouse with the first.

Every file they write there is written whole: a temp file, renamed into place. A
writer killed between the two (SIGKILL, the OOM killer, a power cut) leaves the temp
file; the next writer, once it holds the lock, removes those (`remove_dead_temps`):
no other writer of this --out lives then (the lock goes with its last holder, the
agents included), and each is found by its exact name and place:

- `raw/RUN/run.json.tmp`, `payloads/RUN/CELL/slot-NNNN.json.tmp` (the runner's JSON)
  and `raw/RUN/CELL/slot-NNNN/slot.json.tmp` (a dead agent's record);
- `raw/RUN/CELL/slot-NNNN/.NAME.XXXXXXXX` (an agent's artifact: iofleet.agent.store);
- `.iofleet-load-XXXXXXXX/` (the rows of an ingest: iofleet.results.warehouse);
- `.import-RUN/` (an import not yet renamed into raw/, or taken back out of raw/ to be
  removed: iofleet.results.importer);
- `.report.html.XXXXXXXX.tmp` (the HTML report: iofleet.report.cli), unless its
  writer still holds the flock it takes on it: `iofleet report --html` needs no lock
  of --out, and may write there while a run starts.

Anything else in --out (the user's files, a name that only looks like one of these
elsewhere) is left alone.

Only the runs not finished are looked into (`raw/RUN/` and `payloads/RUN/`), so that
the sweep at each start costs what the dead runs hold, not every run the --out keeps.
A run is finished when its `raw/RUN/run.json` says so (`FINISHED`). That is the last
thing written in those two folders: the runner writes it after every agent of the run
has exited (and `recover_interrupted` after a dead one's), through a temp file of its
own (a kill before its rename leaves the RUNNING one); an import's run folder is
renamed into raw/ whole. A run killed before its first run.json, or whose run.json
cannot be read, is looked into. What is written after it (the ingest's rows, the
report) is at the top of --out, looked at every time.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import json
import os
import re
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from iofleet.agent.store import PARTIAL
from iofleet.errors import EnvironmentProblem, OutputBusy, UsageError
from iofleet.quote import clip
from iofleet.testhook import pause

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


# how often a claim of --out starts over because a writer that gave it up removed the
# lock file (or the --out) it had opened: each time needs another writer to give up
CLAIM_TRIES = 8


class LockGone(OutputBusy):
    """The lock file `output_lock` opened was removed before it got the lock (a writer
    that gave --out up removed it, and perhaps the --out too): `claim_out_dir` starts
    over; to any other caller, --out is busy (exit 4)."""


@contextmanager
def output_lock(
    out_dir: Path, command: str = "iofleet local", made: list[Path] | None = None
) -> Iterator[int]:
    """Hold an exclusive flock on `OUT/.iofleet.lock` for the run (yields its fd).

    A kernel lock: it goes when its last holder exits, however it exits, so a dead
    runner never leaves a stale lock. The agents inherit the fd, so a runner killed
    while they unwind keeps --out busy until they are gone. Raises OutputBusy, LockGone
    when the lock file (or --out) went before the lock was had. When this call creates
    the lock file, it is appended to `made` (claim_out_dir).
    """
    lock_path = out_dir / LOCK_NAME
    flags = os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW
    try:
        while True:
            try:
                fd = os.open(lock_path, flags | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                try:
                    fd = os.open(lock_path, flags)
                except FileNotFoundError:
                    continue  # removed between the two opens: create it
                break
            if made is not None:
                made.append(lock_path)
            break
    except FileNotFoundError:  # --out itself went: a writer gave up the --out it made
        raise LockGone(f"--out {out_dir}: in use by another run") from None
    except OSError as exc:
        raise environment_problem(exc, lock_path) from None
    try:
        pause("lock-opened")  # a test removes the lock file here (iofleet.testhook)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid, _, holder = os.pread(fd, 128, 0).decode("ascii", "replace").strip().partition(" ")
            raise OutputBusy(
                f"--out {out_dir}: in use by another run"
                + (f" ({holder or 'iofleet local'} pid {pid})" if pid.isdigit() else "")
            ) from None
        if not _same_file(fd, lock_path):  # a refused writer removed what it made
            raise LockGone(f"--out {out_dir}: in use by another run")
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {command}\n".encode(), 0)
        yield fd
    finally:
        os.close(fd)


def _same_file(fd: int, path: Path) -> bool:
    """Whether `path` still names the file open at `fd` (a lock on a file unlinked since
    it was opened locks nothing anyone else will open)."""
    try:
        named = os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    held = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


@dataclasses.dataclass
class OutClaim:
    """An --out held by this command (`claim_out_dir`): the lock's fd, what the claim
    made, and whether to keep it (the writer sets `kept` once what it writes is there)."""

    fd: int
    made: list[Path]
    kept: bool = False


@contextmanager
def claim_out_dir(out_dir: Path, command: str = "iofleet local") -> Iterator[OutClaim]:
    """Make --out (and its parents) if missing (`make_out_dir`) and hold its lock
    (`output_lock`) for the block.

    A writer that gave --out up may remove the lock file this one opened, and the --out
    (below): the claim then starts over, making again what is missing, and locks the
    file the path names. Unless the block set `kept` (its run began, or its import
    landed), leaving it undoes the claim for a writer that wrote nothing there: the lock
    file, when this claim created it, is removed while still held (a writer that opened
    it meanwhile finds it gone once it gets the lock, and starts over), then the
    directories made, deepest first, where empty. The same when the lock itself is
    refused (no room for the lock file). What was there before is left as it was."""
    claim = OutClaim(-1, [])
    with contextlib.ExitStack() as stack:

        @stack.callback
        def _undo_dirs() -> None:  # last: once the lock is let go
            if not claim.kept:
                remove_made([path for path in claim.made if path.name != LOCK_NAME])

        for tries_left in reversed(range(CLAIM_TRIES)):
            claim.made += make_out_dir(out_dir)
            try:
                claim.fd = stack.enter_context(output_lock(out_dir, command, claim.made))
                break
            except LockGone:
                if not tries_left:
                    raise OutputBusy(f"--out {out_dir}: in use by another run") from None

        @stack.callback
        def _undo_lock() -> None:  # first: while the lock is still held
            if not claim.kept and out_dir / LOCK_NAME in claim.made:
                with contextlib.suppress(OSError):
                    (out_dir / LOCK_NAME).unlink()

        yield claim


def environment_problem(exc: OSError, path: Path | str | None = None) -> Exception:
    """An OSError of the machine (disk full, read-only, permission) as EnvironmentProblem."""
    where = path if path is not None else (exc.filename or "--out")
    if exc.errno in ENVIRONMENT_ERRNOS:
        return EnvironmentProblem(f"{where}: {exc.strerror or exc}")
    return exc


def make_out_dir(out_dir: Path) -> list[Path]:
    """Create `--out` (and its parents) if missing; returns the directories made, parents
    first. UsageError (exit 2) when the path cannot be a directory (a file in the way, a
    place no directory can be made); EnvironmentProblem (exit 3) when the machine refuses
    (permission, read-only, full). Either way, what was made is removed again."""
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"--out {out_dir}: exists and is not a directory")
    try:
        return make_dirs(out_dir)
    except OSError as exc:
        problem = environment_problem(exc, f"--out {out_dir}")
        if problem is exc:  # not the machine's: the path itself cannot be a directory
            raise UsageError(
                f"--out {out_dir}: cannot create: {not_a_directory(out_dir) or exc.strerror}"
            ) from None
        raise problem from None


def make_dirs(path: Path) -> list[Path]:
    """`mkdir -p` that says what it made: the directories this call created, parents
    first (one made meanwhile by someone else is not counted). Raises OSError, after
    removing again what it made."""
    made: list[Path] = []
    try:
        for at in reversed([p for p in (path, *path.parents) if not os.path.lexists(p)]):
            try:
                at.mkdir()
            except FileExistsError:
                if at.is_dir():
                    continue  # made meanwhile by someone else: not ours to remove
                raise
            made.append(at)
        if not path.is_dir():  # a link to nothing, or a file, was there from the start
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(path))
    except BaseException:
        remove_made(made)
        raise
    return made


def remove_made(made: list[Path]) -> None:
    """Remove the directories `make_dirs` made, deepest first, where still empty."""
    for path in reversed(made):
        try:
            path.rmdir()
        except OSError:
            pass


def not_a_directory(path: Path) -> str | None:
    """Why `path` can never be a directory here (a non-directory at it or at one of its
    parents), without creating anything; None when it is one or could be made."""
    for at in (path, *path.parents):
        try:
            mode = os.stat(at).st_mode
        except FileNotFoundError:
            if os.path.lexists(at):
                return f"{clip(str(at))} is a symbolic link to nothing"
            continue
        except NotADirectoryError:
            continue  # a parent is not a directory: found further up
        except OSError:
            return None  # cannot tell (permission): creating it will say
        if stat.S_ISDIR(mode):
            return None
        if stat.S_ISBLK(mode):  # someone meant to measure the device itself
            return (
                f"{clip(str(at))} is a block device, not a directory: a local run measures a "
                "directory (on the file system mounted there); a raw device is measured by "
                "an AWS run (storage type ebs, filesystem raw)"
            )
        return f"{clip(str(at))} exists and is not a directory"
    return None


MKSTEMP = r"[a-z0-9_]{8}"  # the 8 characters tempfile.mkstemp and mkdtemp add
_FIXED_JSON = {"run.json.tmp"}  # raw/RUN/
_SLOT_JSON = re.compile(r"^slot-\d{4}\.json\.tmp$")  # payloads/RUN/CELL/
_ARTIFACT = PARTIAL  # raw/RUN/CELL/slot-NNNN/: an agent's (iofleet.agent.store)
_IMPORT = r"\.import-[A-Za-z0-9][A-Za-z0-9._-]*-\d{8}t\d{6}z-[0-9a-f]{6}"  # importer's run id
_TOP_DIRS = re.compile(rf"^(\.iofleet-load-{MKSTEMP}|{_IMPORT})$")
_HTML = re.compile(rf"^\.report\.html\.{MKSTEMP}\.tmp$")
# run.json's status once the run has ended (iofleet.results.schema: RUNNING before)
FINISHED = frozenset({"SUCCEEDED", "PARTIAL", "FAILED", "ABORTED"})


def _entries(path: Path, dirs: bool) -> list[os.DirEntry[str]]:
    """The directories (or the regular files) in `path`, links not followed."""
    try:
        with os.scandir(path) as it:
            return [
                e
                for e in it
                if (e.is_dir(follow_symlinks=False) if dirs else e.is_file(follow_symlinks=False))
            ]
    except OSError:
        return []


def _unlocked(path: str) -> bool:
    """Whether no process holds a flock on the file (its writer is gone)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def read_own_json(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """A JSON object iofleet wrote in --out (run.json, a slot payload), or None when the
    file is missing, unreadable, not a regular file (a link is not followed; a fifo is
    not waited on for a writer) or not a JSON object. Never blocks."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK  # not a fifo's writer
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    with open(fd, "rb") as f:
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            doc = json.loads(f.read())
        except (OSError, ValueError):
            return None
    return doc if isinstance(doc, dict) else None


def finished(run_dir: str) -> bool:
    """Whether `raw/RUN/run.json` says the run has ended: nothing more is written in its
    folders (see above). False when it is missing, unreadable or not our JSON."""
    doc = read_own_json(os.path.join(run_dir, "run.json"))
    return doc is not None and doc.get("status") in FINISHED


def dead_temps(out_dir: Path) -> list[Path]:
    """The temp files (and temp directories) dead writers left in --out (see above).
    Only for the holder of the --out lock."""
    found: list[Path] = []
    done: set[str] = set()  # the finished runs: not looked into
    for entry in _entries(out_dir, dirs=True):
        if _TOP_DIRS.match(entry.name):
            found.append(Path(entry.path))
    for entry in _entries(out_dir, dirs=False):
        if _HTML.match(entry.name) and _unlocked(entry.path):
            found.append(Path(entry.path))
    for run in _entries(out_dir / "raw", dirs=True):
        if finished(run.path):
            done.add(run.name)
            continue
        found += [Path(f.path) for f in _entries(Path(run.path), False) if f.name in _FIXED_JSON]
        for cell in _entries(Path(run.path), dirs=True):
            for slot in _entries(Path(cell.path), dirs=True):
                if not re.fullmatch(r"slot-\d{4}", slot.name):
                    continue
                for f in _entries(Path(slot.path), dirs=False):
                    if f.name == "slot.json.tmp" or _ARTIFACT.match(f.name):
                        found.append(Path(f.path))
    for run in _entries(out_dir / "payloads", dirs=True):
        if run.name in done:
            continue
        for cell in _entries(Path(run.path), dirs=True):
            found += [
                Path(f.path) for f in _entries(Path(cell.path), False) if _SLOT_JSON.match(f.name)
            ]
    return sorted(found)


def remove_dead_temps(out_dir: Path) -> list[Path]:
    """Remove what `dead_temps` finds; returns what was removed. Only for the holder of
    the --out lock, before it writes anything."""
    removed = []
    for path in dead_temps(out_dir):
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
        except FileNotFoundError:
            continue
        except OSError:
            continue  # left for a later run; this one's writes say what is wrong
        removed.append(path)
    return removed
