"""`iofleet import` shows its progress on a terminal, and only there.

stderr is a pty here, as in a user's shell; what lands on it is read from the master
side. Off a terminal (a pipe, a file) stderr holds only the refused files' lines: the
exact-line assertions of tests/unit/test_import.py hold that.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

REPO = Path(__file__).resolve().parents[2]
FIO = REPO / "tests" / "fixtures" / "fio" / "jsonplus-two-jobs.json"
CLEAR = "\r\033[K"


def _import_on_a_terminal(tmp_path: Path, *extra: str) -> tuple[int, str, str]:
    """Run `iofleet import` of 40 good files and one missing one with stderr on a pty:
    (exit status, what the terminal got, stdout)."""
    files = []
    for i in range(40):
        files.append(tmp_path / f"f{i:02d}.json")
        shutil.copy(FIO, files[-1])
    missing = tmp_path / "missing.json"
    master, slave = os.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "iofleet.cli", "import", *map(str, files), str(missing)]
            + ["--out", str(tmp_path / "out"), "--label", "tty", *extra],
            stdout=subprocess.PIPE,
            stderr=slave,
            text=True,
            cwd=REPO,
        )
    finally:
        os.close(slave)
    seen = bytearray()
    try:
        while True:  # until the child closes its side (EIO on Linux)
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(master)
    stdout, _ = proc.communicate(timeout=120)
    return proc.returncode, seen.decode().replace("\r\n", "\n"), stdout


def _slots(out: Path) -> int:
    with duckdb.connect(str(out / "warehouse.duckdb"), read_only=True) as con:
        row = con.execute("SELECT count(*) FROM slots").fetchone()
    return row[0] if row else 0


def test_the_terminal_shows_each_step_and_is_left_clear(tmp_path: Path) -> None:
    # when
    code, terminal, stdout = _import_on_a_terminal(tmp_path)
    # then the terminal saw the files counted, the write and the load
    assert "import: reading file 41 of 41" in terminal
    assert "import: writing run tty-" in terminal
    assert f"import: loading it into {tmp_path / 'out' / 'warehouse.duckdb'}" in terminal
    # and the refused file's line stands on a line of its own, the status line cleared
    assert f"{CLEAR}{tmp_path / 'missing.json'}: cannot read: No such file" in terminal
    # and nothing of the status line is left at the end
    assert terminal.endswith(CLEAR), terminal[-200:]
    assert code == 1 and stdout.startswith("imported 40 of 41 files as run tty-")
    assert _slots(tmp_path / "out") == 40


def test_quiet_shows_only_the_refused_file(tmp_path: Path) -> None:
    code, terminal, _ = _import_on_a_terminal(tmp_path, "--quiet")
    assert terminal == f"{tmp_path / 'missing.json'}: cannot read: No such file or directory\n"
    assert code == 1 and _slots(tmp_path / "out") == 40


@pytest.mark.parametrize("where", ["pipe", "file"])
def test_off_a_terminal_stderr_holds_only_the_refusal(tmp_path: Path, where: str) -> None:
    shutil.copy(FIO, tmp_path / "good.json")
    argv = [sys.executable, "-m", "iofleet.cli", "import", str(tmp_path / "good.json")]
    argv += [str(tmp_path / "missing.json"), "--out", str(tmp_path / "out"), "--label", "x"]
    with open(tmp_path / "stderr.txt", "w+") as err_file:
        proc = subprocess.run(
            argv,
            capture_output=where == "pipe",
            stderr=None if where == "pipe" else err_file,
            stdout=None if where == "pipe" else subprocess.DEVNULL,
            text=True,
            cwd=REPO,
            timeout=120,
        )
        err_file.seek(0)
        err = proc.stderr if where == "pipe" else err_file.read()
    assert err == f"{tmp_path / 'missing.json'}: cannot read: No such file or directory\n"
