"""Which files in --out `remove_dead_temps` takes for a dead writer's temp files: each
kind at its place, and nothing else (the user's look-alikes, links, a live writer's)."""

from __future__ import annotations

import fcntl
import json
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


def _run_json(out: Path, run: str, status: str) -> None:
    (out / "raw" / run).mkdir(parents=True, exist_ok=True)
    (out / "raw" / run / "run.json").write_text(json.dumps({"run_id": run, "status": status}))


# what no writer of ours leaves in a finished run's folders: left there, which shows
# the sweep did not look into them
DECOYS = [
    "{run}/c000-disk-x1-r1/slot-0000/slot.json.tmp",
    "{run}/c000-disk-x1-r1/slot-0000/.manifest.json.decoy_01",
]


def test_only_the_runs_not_finished_are_looked_into(tmp_path: Path) -> None:
    # given an --out with many finished runs, each holding what looks like a temp file
    out = tmp_path / "out"
    finished = [f"done-{i:03d}" for i in range(60)]
    statuses = ["SUCCEEDED", "PARTIAL", "FAILED", "ABORTED"]
    for i, run in enumerate(finished):
        _run_json(out, run, statuses[i % len(statuses)])
        _tree(out / "raw", [d.format(run=run) for d in DECOYS])
        _tree(out / "payloads", [f"{run}/c000-disk-x1-r1/slot-0000.json.tmp"])
    # and runs that did not finish: still RUNNING (its runner killed), no run.json yet,
    # a run.json that is not our JSON, or one of a status we do not know
    unfinished = {"killed": "RUNNING", "early": None, "torn": "{", "odd": "PAUSED"}
    for run, status in unfinished.items():
        if status == "{":
            (out / "raw" / run).mkdir(parents=True)
            (out / "raw" / run / "run.json").write_text('{"status": "SUCCEEDED"')
        elif status is not None:
            _run_json(out, run, status)
        _tree(out / "raw", [d.format(run=run) for d in DECOYS])
        _tree(out / "payloads", [f"{run}/c000-disk-x1-r1/slot-0000.json.tmp"])
    # when
    removed = remove_dead_temps(out)
    # then: the unfinished runs' temp files are gone, every finished run's are there
    assert removed == sorted(
        [out / "raw" / d.format(run=run) for run in unfinished for d in DECOYS]
        + [out / "payloads" / run / "c000-disk-x1-r1/slot-0000.json.tmp" for run in unfinished]
    )
    for run in finished:
        for d in DECOYS:
            assert (out / "raw" / d.format(run=run)).is_file()
        assert (out / "payloads" / run / "c000-disk-x1-r1/slot-0000.json.tmp").is_file()


def test_a_run_json_that_is_a_fifo_or_a_link_is_not_waited_on_nor_trusted(
    tmp_path: Path,
) -> None:
    # given runs whose run.json is a fifo nobody writes, and a link to a finished one
    out = tmp_path / "out"
    _run_json(tmp_path, "elsewhere", "SUCCEEDED")
    for run in ("fifo", "link"):
        (out / "raw" / run).mkdir(parents=True)
        _tree(out / "raw", [d.format(run=run) for d in DECOYS])
    os.mkfifo(out / "raw" / "fifo" / "run.json")
    (out / "raw" / "link" / "run.json").symlink_to(tmp_path / "raw/elsewhere/run.json")
    # then: both are looked into (open does not block on the fifo)
    removed = remove_dead_temps(out)
    assert removed == sorted(
        out / "raw" / d.format(run=r) for r in ("fifo", "link") for d in DECOYS
    )
