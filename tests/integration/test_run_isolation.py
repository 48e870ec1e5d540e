"""Runs are isolated: unique ids, per-run workdirs, a locked --out, symlink-safe cleanup.

Real `iofleet local` processes against one target directory; the outcome is read in
the target (whose files exist, which were deleted) and in --out.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pytest

from iofleet.agent.payload import parse_payload
from iofleet.agent.target import cleanup_target, prepare_target
from iofleet.aws.keys import run_date
from iofleet.local.runner import new_run_id
from tests.integration.proctable import files_under, stopped, wait_for

IOPING = {"ioping": {"count": 3, "interval_ms": 0, "write": False}}


def _matrix(tmp_path: Path, target: Path, workloads: list[dict], name: str = "iso") -> Path:
    doc = {
        "name": name,
        "storage": [{"label": "disk", "type": "local", "path": str(target)}],
        "workloads": workloads,
        "parallelism": [1],
    }
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(doc))
    return path


def _local(tmp_path: Path, matrix: Path, out: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "iofleet.cli", "local", str(matrix), "--out", out, "-q"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_run_ids_differ_within_one_second_and_keep_their_date() -> None:
    now = datetime(2026, 11, 21, 5, 12, 0, tzinfo=UTC)
    ids = {new_run_id("demo", now) for _ in range(1000)}
    assert len(ids) == 1000
    assert {run_date(i) for i in ids} == {"2026-11-21"}


@pytest.mark.slow
def test_two_runs_at_once_on_one_target_keep_their_own_files(tmp_path: Path) -> None:
    # given one matrix whose app writes its own marker into its workdir, waits until the
    # other run's app has written one too, then checks that its marker is still its own
    target = tmp_path / "target"
    script = (
        'echo $$ > "$IOFLEET_WORKDIR/marker"; '
        f"for i in $(seq 400); do [ $(ls {target}/iofleet-*/*/slot-*/marker | wc -l) -ge 2 ] "
        "&& break; sleep 0.05; done; "
        '[ "$(cat "$IOFLEET_WORKDIR/marker")" = "$$" ]'
    )
    matrix = _matrix(tmp_path, target, [IOPING, {"app": {"name": "marker", "run": script}}])
    # when: two runs of it start together, each into its own --out
    runs = [_local(tmp_path, matrix, out) for out in ("out1", "out2")]
    results = [r.communicate(timeout=300) for r in runs]
    # then: both succeed, with different run ids, and the target is left clean
    assert [r.returncode for r in runs] == [0, 0], results
    ids = [next((tmp_path / out / "raw").iterdir()).name for out in ("out1", "out2")]
    assert ids[0] != ids[1]
    for out, run_id in zip(("out1", "out2"), ids, strict=True):
        con = duckdb.connect(str(tmp_path / out / "warehouse.duckdb"), read_only=True)
        try:
            rows = con.execute("SELECT run_id, status FROM slots").fetchall()
        finally:
            con.close()
        assert rows == [(run_id, "SUCCEEDED")]
    assert files_under(target) == []


@pytest.mark.slow
def test_a_second_run_into_a_busy_out_is_refused_and_creates_nothing(tmp_path: Path) -> None:
    # given a run that is busy in a long fio
    target = tmp_path / "target"
    long_fio = {
        "fio": "randwrite-16k-psync-16jobs",
        "params": {"RUNTIME": 120, "SIZE": "4m", "NUM_JOBS": 1},
    }
    first = _local(tmp_path, _matrix(tmp_path, target, [IOPING, long_fio]), "out")
    try:
        wait_for(
            lambda: list((tmp_path / "out" / "raw").glob("*/*/slot-*/w00-ioping.json")),
            120,
            "the first run's ioping",
        )
        before = sorted(str(p) for p in (tmp_path / "out").rglob("*"))
        # when: a second run into the same --out
        second = subprocess.run(
            [
                sys.executable,
                "-m",
                "iofleet.cli",
                "local",
                str(_matrix(tmp_path, target, [IOPING], "two")),
                "--out",
                "out",
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        after = sorted(str(p) for p in (tmp_path / "out").rglob("*"))
    finally:
        first.terminate()
        first.communicate(timeout=120)
    # then: exit 4, one line, nothing created in --out
    assert second.returncode == 4, second.stderr
    assert second.stderr.strip().count("\n") == 0
    assert "in use by another run" in second.stderr
    assert f"pid {first.pid}" in second.stderr
    assert after == before
    assert first.returncode == 143  # stopped by SIGTERM: 128 + 15


# --- cleanup never follows a symlink out of the directory it owns --------------------

RUN_ID = "iso-20261121t000000z-0123abcd"
CELL_ID = "c000-disk-x1-r1"


def _payload(target: Path) -> dict:
    return {
        "version": 1,
        "run_id": RUN_ID,
        "cell": {
            "cell_id": CELL_ID,
            "cell_index": 0,
            "instance_type": "local",
            "storage_label": "disk",
            "storage_type": "local",
            "storage_detail": str(target),
            "fleet_size": 1,
            "repeat": 1,
        },
        "slot_index": 0,
        "target": {"kind": "directory", "path": str(target)},
        "workloads": [{"kind": "ioping", "count": 1, "interval_ms": 0, "write": False}],
        "barrier": {"kind": "none"},
        "results": {"kind": "directory", "root": str(target.parent / "raw")},
        "time_limit_s": 60,
    }


# where the symlink to the victim directory is planted (levels counted up from the slot's
# workdir, whatever the layout: learnt from a first prepare), and when
PLANTS = [
    ("workdir", "workdir", "before"),
    ("cell dir (workdir's parent)", "parent", "before"),
    ("run dir (workdir's grandparent)", "grandparent", "before"),
    ("shared dir", "shared", "before"),
    ("inside the workdir", "inside", "during"),
    ("workdir swapped for a symlink", "workdir", "during"),
    ("cell dir swapped for a symlink", "parent", "during"),
]


def _plant_path(probe_workdir: Path, probe_shared: Path, level: str) -> Path:
    return {
        "workdir": probe_workdir,
        "parent": probe_workdir.parent,
        "grandparent": probe_workdir.parent.parent,
        "shared": probe_shared,
        "inside": probe_workdir / "data",
    }[level]


@pytest.mark.parametrize(("where", "level", "when"), PLANTS, ids=[p[0] for p in PLANTS])
def test_a_planted_symlink_never_leads_prepare_or_cleanup_outside(
    tmp_path: Path, where: str, level: str, when: str
) -> None:
    # given a victim directory outside the target, with a file and a slot-0000 subdir
    victim = tmp_path / "victim"
    (victim / "slot-0000").mkdir(parents=True)
    (victim / "keep.txt").write_text("precious")
    (victim / "slot-0000" / "keep.txt").write_text("precious")
    snapshot = {p: (victim / p).read_bytes() for p in files_under(victim)}
    target = tmp_path / "target"
    target.mkdir()
    spec = parse_payload(_payload(target))
    probe = prepare_target(spec, "slot-0000")  # learn the layout, then start over
    assert probe.error is None and probe.shared is not None
    cleanup_target(probe)
    planted = _plant_path(probe.workdir, probe.shared, level)
    assert planted != target and target in planted.parents
    if when == "before":
        planted.parent.mkdir(parents=True, exist_ok=True)
        if planted.exists():
            os.rename(planted, tmp_path / "moved-away")
        planted.symlink_to(victim, target_is_directory=True)
    # when: a slot prepares its target, works in it, and cleans up
    prepared = prepare_target(spec, "slot-0000")
    if prepared.error is None:
        (prepared.workdir / "fio.dat").write_text("slot data")
    if when == "during":
        if planted.exists() and not planted.is_symlink():
            os.rename(planted, tmp_path / "moved-away")
        planted.symlink_to(victim, target_is_directory=True)
    cleanup_target(prepared)
    # then: the victim is exactly as it was: nothing written there, nothing deleted
    assert {p: (victim / p).read_bytes() for p in files_under(victim)} == snapshot
    assert sorted(p.name for p in victim.iterdir()) == ["keep.txt", "slot-0000"]


def _local_on_a_small_out(
    tmp_path: Path, options: str, out: str = "out"
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """`iofleet local` (one ioping slot, on a target not yet made) into `out` below a
    tmpfs mounted at tmp_path/mnt with `options`, with a TMPDIR of its own (tmp_path/tmp);
    with what it left on the mount (every file, and every entry at its top)."""
    mnt, tmp = tmp_path / "mnt", tmp_path / "tmp"
    mnt.mkdir()
    tmp.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(mnt)], check=True)
    try:
        matrix = _matrix(tmp_path, tmp_path / "new" / "target", [IOPING])
        result = subprocess.run(
            [sys.executable, "-m", "iofleet", "local", str(matrix), "--out", f"mnt/{out}", "-q"],
            cwd=tmp_path,
            env=dict(os.environ, TMPDIR=str(tmp)),
            capture_output=True,
            text=True,
            timeout=300,
        )
        return result, sorted({*files_under(mnt), *(p.name for p in mnt.iterdir())})
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def _no_space_in_one_line(result: subprocess.CompletedProcess[str]) -> None:
    """The machine's problem (exit 3), said in one line, not "bad input" (2)."""
    assert result.returncode == 3, result.stderr
    assert "No space left on device" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def _nothing_left(tmp_path: Path, left_on_mnt: list[str]) -> None:
    """Nothing the refused run made is left: on the mount (raw/, the lock file, --out and
    its parents), the target directory, the run temp directory in TMPDIR."""
    assert left_on_mnt == []
    assert not (tmp_path / "new").exists()
    assert list((tmp_path / "tmp").iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_a_full_out_disk_exits_3_not_2(tmp_path: Path) -> None:
    # given an --out on a 1 MiB tmpfs (the warehouse alone needs more)
    result, left = _local_on_a_small_out(tmp_path, "size=1m", out=".")
    # then: exit 3 in one line
    _no_space_in_one_line(result)
    # and the run had begun (slots ran): what it measured is kept for the next run
    assert any(name.endswith("w00-ioping.json") for name in left)


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_an_out_refusing_the_run_folder_is_left_as_it_was(tmp_path: Path) -> None:
    # given an --out that exists, on a tmpfs with room for 3 inodes: itself, the lock and
    # raw/ (the run's folder cannot be made)
    result, left = _local_on_a_small_out(tmp_path, "nr_inodes=3", out=".")
    # then: exit 3 in one line, and no lock file, raw/, target or run temp directory
    _no_space_in_one_line(result)
    _nothing_left(tmp_path, left)


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_an_out_it_made_is_removed_again_when_the_run_is_refused(tmp_path: Path) -> None:
    # given an --out not yet there (nor its parent), on a tmpfs with room for 5 inodes:
    # the mount, the two directories, the lock and raw/ (the run's folder cannot be made)
    result, left = _local_on_a_small_out(tmp_path, "nr_inodes=5", out="runs/out")
    # then: exit 3 in one line, and the mount is as empty as it was: --out and its
    # parent, the lock file and raw/ are gone, with the target and the run temp directory
    _no_space_in_one_line(result)
    _nothing_left(tmp_path, left)


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_an_out_whose_parent_fills_up_leaves_no_parent(tmp_path: Path) -> None:
    # given an --out two levels below a tmpfs with room for 2 inodes (the mount and one
    # directory): its parent can be made, --out itself cannot
    result, left = _local_on_a_small_out(tmp_path, "nr_inodes=2", out="runs/out")
    # then: exit 3 in one line naming --out, and the parent made on the way is gone
    _no_space_in_one_line(result)
    assert "--out" in result.stderr
    _nothing_left(tmp_path, left)


CLAIM = """
import sys
from pathlib import Path
from iofleet.errors import OutputBusy
from iofleet.results.outdir import claim_out_dir, output_lock
out = Path(sys.argv[1])
with claim_out_dir(out, "writer B") as claim:
    (out / "claimed-by-b").write_text("B wrote here under the lock")
    try:  # a third writer, while B holds --out
        with output_lock(out, "writer C"):
            print("C: got the lock too")
    except OutputBusy as exc:
        print(f"C: {exc}")
    claim.kept = True
"""


@pytest.mark.parametrize("out_was_there", [True, False], ids=["out-there", "out-made-by-A"])
def test_a_lock_file_removed_after_a_writer_opened_it_makes_that_writer_start_over(
    tmp_path: Path, out_was_there: bool
) -> None:
    # given writer A holding an --out whose lock file it created (and the --out too,
    # when it was not there)
    from iofleet.results.outdir import LOCK_NAME, claim_out_dir

    out = tmp_path / "out"
    if out_was_there:
        out.mkdir()
    with claim_out_dir(out, "writer A") as claim:
        assert claim.made == ([] if out_was_there else [out]) + [out / LOCK_NAME]
        # and writer B, which has opened that lock file and not yet locked it
        b = subprocess.Popen(
            [sys.executable, "-c", CLAIM, str(out)],
            env=dict(os.environ, IOFLEET_TEST_PAUSE_AT="lock-opened"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        wait_for(lambda: stopped(b.pid), 60, "writer B at lock-opened")
        # when: A is refused, and leaves without keeping its claim: what it made is
        # removed (the lock file while A still holds the lock), then A lets go
    assert not (out / LOCK_NAME).exists()
    assert out.exists() == out_was_there
    stops = 1
    while True:  # B goes on; each lock file opened stops it once more (testhook)
        os.kill(b.pid, signal.SIGCONT)
        wait_for(lambda: b.poll() is not None or stopped(b.pid), 60, "writer B")
        if b.poll() is not None:
            break
        stops += 1
    stdout, stderr = b.communicate(timeout=60)
    # then: B's first lock, on a file nobody else would open, was no lock: B started
    # over (its second opening), made what was missing and locked the file the path
    # names, so a third writer (its third opening) is refused while B holds --out
    assert b.returncode == 0, stderr
    assert stops == 3
    assert stdout.strip() == f"C: --out {out}: in use by another run (writer B pid {b.pid})"
    assert (out / "claimed-by-b").read_text() == "B wrote here under the lock"
    assert (out / LOCK_NAME).read_text() == f"{b.pid} writer B\n"


def _import_on_a_small_out(
    tmp_path: Path, options: str, out: str
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """`iofleet import` of one ioping file into `out` below a tmpfs mounted at
    tmp_path/mnt with `options`; with every entry it left on the mount."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(mnt)], check=True)
    try:
        fixture = Path(__file__).resolve().parents[1] / "fixtures" / "ioping" / "read-c21.json"
        result = subprocess.run(
            [sys.executable, "-m", "iofleet", "import", str(fixture), "--out", f"mnt/{out}"]
            + ["--label", "x"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
        return result, sorted({*files_under(mnt), *(p.name for p in mnt.iterdir())})
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_an_import_refused_for_room_removes_the_out_it_made(tmp_path: Path) -> None:
    # given an --out not yet there (nor its parent), on a tmpfs with room for 5 inodes:
    # the mount, the two directories, the lock and raw/ (the import's folder cannot be made)
    result, left = _import_on_a_small_out(tmp_path, "nr_inodes=5", "runs/out")
    # then: exit 3 in one line, and the mount as empty as it was
    assert result.returncode == 3, result.stderr
    assert result.stderr.splitlines() == [
        "iofleet: --out mnt/runs/out: cannot write: No space left on device"
    ]
    assert left == []


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
@pytest.mark.parametrize("command", ["local", "import"])
def test_an_out_it_made_but_could_not_lock_is_removed_again(tmp_path: Path, command: str) -> None:
    # given an --out not yet there (nor its parent), on a tmpfs with room for 3 inodes:
    # the mount and the two directories (no inode is left for the lock file)
    if command == "local":
        result, left = _local_on_a_small_out(tmp_path, "nr_inodes=3", out="runs/out")
    else:
        result, left = _import_on_a_small_out(tmp_path, "nr_inodes=3", "runs/out")
    # then: exit 3 in one line naming the lock file, and the mount as empty as it was
    _no_space_in_one_line(result)
    assert ".iofleet.lock" in result.stderr
    assert left == []
