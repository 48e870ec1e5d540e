"""Which files in --out `remove_dead_temps` takes for a dead writer's temp files: each
kind at its place, and nothing else (the user's look-alikes, links, a live writer's)."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from iofleet.results.outdir import dead_temps, remove_dead_temps

RUN = "sig-20261126t170000z-0a1b2c3d"
SLOT = f"raw/{RUN}/c000-disk-x1-r1/slot-0000"

DEAD = [
    f"raw/{RUN}/run.json.tmp",
    f"payloads/{RUN}/c000-disk-x1-r1/slot-0003.json.tmp",
    f"{SLOT}/slot.json.tmp",
    f"{SLOT}/.manifest.json.k2_x9qz0",
    ".iofleet-load-ab12cd_3/runs.csv",
    ".import-first-20261126t170000z-0a1b2c/raw/x.json",
    ".report.html.q1w2e3r4.tmp",
]
KEPT = [
    "notes.tmp",
    "raw/notes.json.tmp",
    f"raw/{RUN}/notes.tmp",
    f"{SLOT}/manifest.json",
    f"{SLOT}/w00-ioping.json",
    f"{SLOT}/.manifest.json.short",
    f"raw/{RUN}/c000-disk-x1-r1/mine/slot.json.tmp",
    f"payloads/{RUN}/c000-disk-x1-r1/slot-0003.json",
    ".import-notes/f",
    ".iofleet-load-mine/f",
    ".report.html.mine.tmp",
    ".other.html.q1w2e3r4.tmp",
]


def _tree(out: Path, names: list[str]) -> None:
    for name in names:
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text("x\n")


def test_each_kind_of_dead_temp_file_is_removed_and_nothing_else(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _tree(out, DEAD + KEPT)
    removed = remove_dead_temps(out)
    tops = {
        out / (n.split("/")[0] if n.startswith((".iofleet-load-", ".import-")) else n) for n in DEAD
    }
    assert set(removed) == tops
    assert [n for n in DEAD if (out / n).exists()] == []
    assert [n for n in KEPT if not (out / n).is_file()] == []


def test_links_are_not_followed(tmp_path: Path) -> None:
    # given an --out whose raw/ run is a link to a directory of the user's
    mine = tmp_path / "mine"
    _tree(mine, ["run.json.tmp", "c/slot-0000/slot.json.tmp"])
    out = tmp_path / "out"
    (out / "raw").mkdir(parents=True)
    (out / "raw" / RUN).symlink_to(mine)
    (out / ".iofleet-load-ab12cd_3").symlink_to(mine)
    # then nothing through it is taken
    assert dead_temps(out) == []
    assert (mine / "run.json.tmp").is_file()


def test_a_report_temp_file_whose_writer_holds_its_lock_is_left(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _tree(out, [".report.html.q1w2e3r4.tmp"])
    fd = os.open(out / ".report.html.q1w2e3r4.tmp", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # as iofleet.report.cli._write_whole holds it
        assert remove_dead_temps(out) == []
    finally:
        os.close(fd)
    assert remove_dead_temps(out) == [out / ".report.html.q1w2e3r4.tmp"]
