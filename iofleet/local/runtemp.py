"""The run's own temp directory: every agent's TMPDIR, and the populate step's.

An agent runs no cleanup when it is SIGKILLed (a second Ctrl-C, or an agent still
running when its 10 s to stop ran out: iofleet.local.slots), so the temp directory its
app workload had (`iofleet-app-*`, with what a compiler or a test suite left in it)
stayed in the user's TMPDIR, where nothing would ever remove it. So the runner makes
one directory in TMPDIR for the run (`iofleet-local-XXXXXXXX`), one below it for each
slot (the agent's TMPDIR: the app's temp directory is made there), and removes each
slot's when its cell has ended, whatever ended it, and the run's when the run has
ended. The populate step, which runs in the runner's own process, makes its app's
temp directory there too (`temp_root`).

A runner that is SIGKILLed itself leaves the run's directory. Its `run.json` and its
marks on the targets (iofleet.local.leftovers) name it (`temp_dir`), and the next run
on one of those targets, or into the same --out, removes it with the dead run's other
files (`remove_recorded`), after checking that the recorded path is what this module
makes: an absolute path named `iofleet-local-` and 8 characters, a directory and not a
link, owned by this user. Anything else recorded there is left alone.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from iofleet.results.outdir import MKSTEMP

PREFIX = "iofleet-local-"
_NAME = re.compile(re.escape(PREFIX) + MKSTEMP)  # what mkdtemp makes with that prefix


def make_run_temp() -> Path:
    """The run's temp directory, in the user's TMPDIR (raises OSError)."""
    return Path(tempfile.mkdtemp(prefix=PREFIX))


def slot_temp(run_temp: Path, cell_index: int, slot_index: int) -> Path:
    """A new, empty directory for one slot's agent (raises OSError)."""
    path = run_temp / f"cell-{cell_index:04d}-slot-{slot_index:04d}"
    path.mkdir(mode=0o700)
    return path


def remove_tree(path: Path) -> str | None:
    """Remove `path` whole without following a link in it; returns a problem, if any."""
    try:
        shutil.rmtree(path)  # fd-based on Linux: a link inside is unlinked, not followed
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"could not remove {path}: {exc.strerror or exc}"
    return None


def remove_recorded(recorded: object) -> str | None:
    """Remove the run temp directory a dead run's `run.json` names, if it is one."""
    if not isinstance(recorded, str) or not os.path.isabs(recorded):
        return None
    path = Path(recorded)
    if not _NAME.fullmatch(path.name):
        return None
    try:
        st = os.lstat(path)
    except OSError:
        return None  # gone (a reboot's tmpfs), or not ours to look at
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        return None
    return remove_tree(path)


@contextlib.contextmanager
def temp_root(path: Path) -> Iterator[None]:
    """Make `path` this process's temp directory for the block (the populate step,
    which runs in the runner's own process and makes its app's temp directory there)."""
    before = tempfile.tempdir
    tempfile.tempdir = str(path)
    try:
        yield
    finally:
        tempfile.tempdir = before
