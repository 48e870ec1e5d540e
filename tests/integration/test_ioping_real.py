"""The installed ioping, run for real with many option sets and targets, read by iofleet.

Each output is checked against figures taken from ioping's own lines
(tests/ioping_lines.py, no JSON decoder and no iofleet code): iofleet's rows are
exactly the requests ioping timed, and ioping's own statistics (count, sum, min,
avg, max, mdev) recomputed from those requests equal the ones it printed. Writes
go only to ioping's temporary file in a test directory or to a loop device over
a sparse scratch file.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import iofleet.agent.slot as slot_module
from iofleet.agent.slot import run_slot
from iofleet.cli import main
from iofleet.results.ingest import rows_for_artifact
from iofleet.results.parsers import detect_kind
from iofleet.results.parsers.ioping import parse_ioping
from tests.integration.mounts import tmpfs
from tests.integration.test_agent_slot import _payload as agent_slot_payload
from tests.ioping_lines import ioping_statistics, requests_by_lines, stats_by_lines

pytestmark = pytest.mark.skipif(not shutil.which("ioping"), reason="needs ioping")

RUN_ID = "itest-20261126t000000z"
CELL_ID = "c000-local-tmp-x1-r1"


def _ioping(*args: str | Path, cwd: Path | None = None) -> str:
    proc = subprocess.run(
        ["ioping", *map(str, args)], capture_output=True, text=True, cwd=cwd, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _check_against_ioping_lines(text: str) -> list[dict]:
    """iofleet's rows are ioping's timed requests; its statistics recompute from them."""
    printed = requests_by_lines(text)
    timed = [r for r in printed if not r["ignored"]]

    out = parse_ioping(text)

    assert [
        (r["request"], r["operation"], r["size_bytes"], r["time_ns"]) for r in out.requests
    ] == [(r["request"], r["operation"], r["size"], r["time"]) for r in timed]
    assert out.ignored_requests == len(printed) - len(timed)
    if timed:
        total = stats_by_lines(text)[-1]  # after any -p period objects, the total
        assert ioping_statistics([r["time"] for r in timed]) == total
        summary = out.summary()
        assert (summary["lat_p0_ns"], summary["lat_p100_ns"]) == (total["min"], total["max"])
        assert summary["requests"] == total["count"]
    return timed


# (options, request size in bytes, ignored requests of -c 6)
OPTION_SETS = {
    "default": ([], 4096, 1),
    "direct": (["-D"], 4096, 1),
    "cached": (["-C"], 4096, 1),
    "async": (["-A"], 4096, 1),
    "sequential": (["-L"], 256 * 1024, 1),  # -L makes 256 KiB the default size
    "write": (["-W"], 4096, 1),
    "write-sync": (["-W", "-Y"], 4096, 1),
    "read-write": (["-G"], 4096, 1),
    "size-sectors": (["-s", "8sector", "-S", "2MiB"], 4096, 1),
    "size-fraction": (["-s", "1/2m"], 512 * 1024, 1),
    "size-direct-512": (["-D", "-s", "512"], 512, 1),
    "warmup-3": (["-a", "3"], 4096, 3),
    "no-warmup": (["-a", "0"], 4096, 0),
    "burst": (["-b", "2"], 4096, 1),
    "period": (["-p", "2"], 4096, 1),
    "all-too-fast": (["-t", "1h"], 4096, 6),
    "all-too-slow": (["-T", "1ns"], 4096, 6),
    "time-format-with-quote": (['-I%H"%M\\x'], 4096, 1),  # after -J: printed unescaped
}


@pytest.mark.parametrize("name", sorted(OPTION_SETS))
def test_option_set_rows_are_ioping_s_timed_requests(name: str, tmp_path: Path) -> None:
    options, size, ignored = OPTION_SETS[name]

    text = _ioping("-J", "-c", "6", "-i", "0", *options, tmp_path)

    timed = _check_against_ioping_lines(text)
    assert len(timed) == 6 - ignored
    assert {r["size"] for r in timed} <= {size}
    if name == "read-write":
        assert {r["operation"] for r in timed} == {"read", "write"}


def test_period_objects_are_partial_statistics_of_the_same_requests(tmp_path: Path) -> None:
    text = _ioping("-J", "-p", "2", "-c", "7", "-i", "0", tmp_path)

    stats = stats_by_lines(text)
    rows = parse_ioping(text).requests

    assert [s["count"] for s in stats] == [2, 2, 2, 6]  # a period every 2 timed, the total
    for i, period in enumerate(stats[:3]):
        assert ioping_statistics([r["time_ns"] for r in rows[2 * i : 2 * i + 2]]) == period


def test_deadline_instead_of_count(tmp_path: Path) -> None:
    text = _ioping("-J", "-w", "20ms", "-i", "1ms", tmp_path)

    assert len(_check_against_ioping_lines(text)) >= 1


def test_two_requests_give_one_row(tmp_path: Path) -> None:
    text = _ioping("-J", "-c", "2", "-i", "0", tmp_path)

    assert len(_check_against_ioping_lines(text)) == 1


def test_a_regular_file_target(tmp_path: Path) -> None:
    target = tmp_path / "data"
    target.write_bytes(os.urandom(1 << 20))

    text = _ioping("-J", "-c", "5", "-i", "0", target)

    assert len(_check_against_ioping_lines(text)) == 4


def test_a_directory_named_with_backslash_and_quote(tmp_path: Path) -> None:
    # ioping prints the path inside its JSON unescaped: not valid JSON as printed
    target = tmp_path / 'we\\ird "dir'
    target.mkdir()

    text = _ioping("-J", "-c", "4", "-i", "0", target)

    with pytest.raises(ValueError):
        json.loads(text)
    assert len(_check_against_ioping_lines(text)) == 3


@pytest.fixture
def tmpfs_with_a_space_in_its_source(tmp_path: Path) -> Iterator[Path]:
    with tmpfs(tmp_path / "mnt", "8m", "iofleet ioping") as point:
        yield point


def test_a_mount_source_the_kernel_escapes(tmpfs_with_a_space_in_its_source: Path) -> None:
    # /proc/self/mountinfo spells the space \040, and ioping copies that into its JSON
    text = _ioping("-J", "-c", "3", "-i", "0", tmpfs_with_a_space_in_its_source)

    assert '"device": "iofleet\\040ioping"' in text
    assert len(_check_against_ioping_lines(text)) == 2


@pytest.fixture
def scratch_loop_device(tmp_path: Path) -> Iterator[Path]:
    """A loop device over a sparse scratch file that holds no data."""
    if os.geteuid() != 0 or not Path("/dev/loop-control").exists():
        pytest.skip("needs root and loop devices")
    image = tmp_path / "scratch.img"
    with image.open("wb") as handle:
        handle.truncate(16 << 20)
    proc = subprocess.run(
        ["losetup", "--find", "--show", str(image)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot attach a loop device: {proc.stderr.strip()}")
    device = Path(proc.stdout.strip())
    try:
        yield device
    finally:
        subprocess.run(["losetup", "--detach", str(device)], capture_output=True)


def test_a_block_device_read(scratch_loop_device: Path) -> None:
    text = _ioping("-J", "-D", "-c", "5", "-i", "0", scratch_loop_device)

    assert '"fstype": "block"' in text
    assert len(_check_against_ioping_lines(text)) == 4


def test_a_block_device_write(scratch_loop_device: Path, tmp_path: Path) -> None:
    text = _ioping("-J", "-WWW", "-c", "5", "-i", "0", scratch_loop_device)

    assert {r["operation"] for r in _check_against_ioping_lines(text)} == {"write"}
    image = (tmp_path / "scratch.img").read_bytes()
    assert image.count(0) < len(image)  # the writes landed on the scratch file


def test_warnings_on_stderr_before_the_json_are_skipped(tmp_path: Path) -> None:
    # given ioping's stdout and stderr in one file: -N without -C/-D warns, then fails
    # every request with EAGAIN (ioping 1.3 prints them as ignored, size 0)
    proc = subprocess.run(
        ["ioping", "-J", "-N", "-c", "3", "-i", "0", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=True,
    )
    assert proc.stdout.startswith("ioping: nowait without cached or direct I/O")

    assert detect_kind(proc.stdout) == "ioping"
    out = parse_ioping(proc.stdout)
    assert (out.requests, out.ignored) == ([], {"failed": 3})
    assert [r["size"] for r in requests_by_lines(proc.stdout)] == [0, 0, 0]


# --- other ioping outputs through the command line: one line `PATH: message`, exit 2


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["-B"], "ioping -B statistics, no per-request times"),
        (["-B", "-p", "2"], "ioping -B statistics, no per-request times"),
        ([], "ioping human-readable output"),
        (["-q"], "ioping human-readable output"),
        (["-J", "-q"], "ioping -J statistics only, no per-request times"),
        (["-J", "-R", "-w", "20ms"], "ioping -J statistics only, no per-request times"),
        (["-J", "-B"], "ioping -J statistics only, no per-request times (ioping ran with -q, -B"),
    ],
)
def test_iofleet_parse_refuses_other_outputs_in_one_line(
    options: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "t"
    target.mkdir()
    path = tmp_path / "out.txt"
    path.write_text(_ioping(*options, "-c", "5", "-i", "0", target))

    rc = main(["parse", str(path)])

    out, err = capsys.readouterr()
    assert rc == 2
    assert out == ""
    assert err.splitlines() == [err.strip()]
    assert err.startswith(f"{path}: {message}")


@pytest.mark.parametrize(
    ("options", "line"),
    [
        (["missing"], 'ioping: stat "missing" failed: No such file or directory'),
        (["-W", "file"], "ioping: think twice, then use -WWW to shred this target"),
    ],
)
def test_iofleet_parse_names_a_failed_ioping_by_its_own_line(
    options: list[str], line: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a failed ioping -J run saved with its stderr (`ioping ... > out 2>&1`), and
    # its stdout alone, which is empty
    (tmp_path / "file").write_bytes(b"x" * 4096)
    proc = subprocess.run(
        ["ioping", "-J", "-c", "3", "-i", "0", *options],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode != 0 and proc.stdout == "" and proc.stderr.strip() == line
    both, stdout = tmp_path / "both.txt", tmp_path / "stdout.txt"
    both.write_text(proc.stdout + proc.stderr)
    stdout.write_text(proc.stdout)
    for path, message in (
        (both, f"ioping printed no JSON, only its message: {line}"),
        (stdout, "empty file (no fio or ioping output)"),
    ):
        # when
        rc = main(["parse", str(path)])
        # then one line naming the file and what ioping said, not a fio document
        out, err = capsys.readouterr()
        assert (rc, out) == (2, "")
        assert err.splitlines() == [f"{path}: {message}"]


def test_iopings_warnings_inside_its_json_cost_no_request(tmp_path: Path) -> None:
    # given ioping reading /dev/null with its stderr in the same file: every read
    # returns 0 bytes, and with an interval ioping's stdout goes out between requests,
    # so each warning lands inside the JSON
    proc = subprocess.run(
        ["ioping", "-J", "-c", "4", "-i", "0.01", "/dev/null"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=True,
    )
    assert "}ioping: request returned less than expected: 0\n," in proc.stdout
    # when
    out = parse_ioping(proc.stdout)
    # then every request ioping printed is accounted for (all failed: 0 bytes read)
    assert out.requests == []
    assert out.ignored == {"failed": len(requests_by_lines(proc.stdout))} == {"failed": 4}


def test_iofleet_parse_names_iopings_error_when_it_stopped_mid_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # given ioping writing to /dev/full with its stderr in the same file: the first
    # write fails, ioping exits (err 3) and its JSON is never finished
    proc = subprocess.run(
        ["ioping", "-J", "-WWW", "-c", "3", "-i", "0", "/dev/full"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=False,
    )
    assert proc.returncode == 3
    path = tmp_path / "out.txt"
    path.write_text(proc.stdout)
    # when
    rc = main(["parse", str(path)])
    # then one line naming the file, where the JSON breaks and ioping's own reason
    out, err = capsys.readouterr()
    assert (rc, out) == (2, "")
    assert err.splitlines() == [err.strip()]
    assert err.startswith(f"{path}: invalid ioping JSON at line ")
    assert err.strip().endswith(
        "(ioping's last message: ioping: request failed: No space left on device)"
    )


def test_iofleet_parse_refuses_a_truncated_output_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = _ioping("-J", "-c", "4", "-i", "0", tmp_path)
    path = tmp_path / "cut.json"
    path.write_text(text[: len(text) // 2])

    rc = main(["parse", str(path)])

    out, err = capsys.readouterr()
    assert (rc, out) == (2, "")
    assert err.splitlines() == [err.strip()]
    assert err.startswith(f"{path}: invalid ioping JSON at line ")


def test_import_keeps_the_good_file_beside_a_refused_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import duckdb

    target = tmp_path / "t"
    target.mkdir()
    good, batch = tmp_path / "good.json", tmp_path / "batch.txt"
    good.write_text(_ioping("-J", "-c", "5", "-i", "0", target))
    batch.write_text(_ioping("-B", "-c", "5", "-i", "0", target))
    out = tmp_path / "out"

    rc = main(["import", str(good), str(batch), "--out", str(out), "--label", "x"])

    _, err = capsys.readouterr()
    assert rc == 1
    assert err.splitlines() == [
        f"{batch}: ioping output: ioping -B statistics, no per-request times: "
        "iofleet reads ioping -J output (ioping 1.2 or later)"
    ]
    db = duckdb.connect(str(out / "warehouse.duckdb"), read_only=True)
    query = "SELECT time_ns FROM ioping_requests ORDER BY request"
    times = [t for (t,) in db.execute(query).fetchall()]
    assert times == [r["time"] for r in requests_by_lines(good.read_text()) if not r["ignored"]]


# --- the agent's own ioping run


def _payload(tmp_path: Path, target: Path, workload: dict) -> dict:
    """test_agent_slot's payload, on a target directory of the test's choosing."""
    target.mkdir(exist_ok=True)
    doc = agent_slot_payload(
        tmp_path,
        [workload],
        run_id=RUN_ID,
        target={"kind": "directory", "path": str(target)},
        time_limit_s=60,
    )
    doc["cell"] = {**doc["cell"], "storage_detail": str(target)}
    return doc


IOPING = {"kind": "ioping", "count": 5, "interval_ms": 0, "write": False}


def test_agent_on_a_target_path_ioping_cannot_quote(tmp_path: Path) -> None:
    # given a directory target whose path ioping prints unescaped into its JSON
    target = tmp_path / 'dir \\ with "quotes"'

    run_slot(_payload(tmp_path, target, IOPING))

    slot = tmp_path / "raw" / RUN_ID / CELL_ID / "slot-0000"
    entry = json.loads((slot / "slot.json").read_text())["workloads"][0]
    assert entry["status"] == "SUCCEEDED", entry.get("error")
    text = (slot / "w00-ioping.json").read_text()
    rows = rows_for_artifact(f"{RUN_ID}/{CELL_ID}/slot-0000/w00-ioping.json", text)
    assert [r["time_ns"] for r in rows["ioping_requests"]] == [
        r["time"] for r in requests_by_lines(text) if not r["ignored"]
    ]


def test_agent_reports_ioping_s_own_error_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given an option this ioping does not know (as -J is to ioping 1.1 and older),
    # ioping prints its complaint and then its whole usage text on stderr
    real = slot_module.ioping_argv
    monkeypatch.setattr(slot_module, "ioping_argv", lambda *a: [*real(*a)[:1], "-Z", *real(*a)[1:]])

    run_slot(_payload(tmp_path, tmp_path / "t", IOPING))

    slot = tmp_path / "raw" / RUN_ID / CELL_ID / "slot-0000"
    entry = json.loads((slot / "slot.json").read_text())["workloads"][0]
    assert entry["status"] == "FAILED"
    assert entry["error"] == "ioping exited with status 1: ioping: unrecognized option '-Z'"


def test_agent_fails_an_ioping_stopped_from_outside(tmp_path: Path) -> None:
    import signal
    import threading

    from tests.integration.proctable import runs_workload, tree, wait_for

    # given a slot running ioping for 400 requests, 50 ms apart
    slow = {**IOPING, "count": 400, "interval_ms": 50}
    stopped: list[int] = []

    def interrupt_ioping() -> None:
        def ready() -> int | None:  # ioping runs, has taken SIGINT (SigCgt, bit 2) and has
            # written its third request to its output (a file: read it through /proc)
            for pid in tree(os.getpid()):
                if runs_workload(pid, "ioping"):
                    status = Path(f"/proc/{pid}/status").read_text()
                    caught = next(ln for ln in status.splitlines() if ln.startswith("SigCgt"))
                    written = Path(f"/proc/{pid}/fd/1").read_bytes()
                    if int(caught.split()[1], 16) >> (signal.SIGINT - 1) & 1 and (
                        b'"request": 3,' in written
                    ):
                        return pid
            return None

        pid = wait_for(ready, 60, "ioping to run")
        assert isinstance(pid, int)
        os.kill(pid, signal.SIGINT)  # when: someone sends it SIGINT (not the agent)
        stopped.append(pid)

    watcher = threading.Thread(target=interrupt_ioping)
    watcher.start()
    try:
        code = run_slot(_payload(tmp_path, tmp_path / "t", slow))
    finally:
        watcher.join()
    assert stopped
    # then ioping, which ends with status 0 on SIGINT, printing what it had, is not
    # taken for a run of 400 requests: the workload and the slot FAILED, saying why
    slot = tmp_path / "raw" / RUN_ID / CELL_ID / "slot-0000"
    entry = json.loads((slot / "slot.json").read_text())["workloads"][0]
    assert code == 1
    assert entry["status"] == "FAILED"
    assert entry["error"].startswith("ioping ended after ")
    assert entry["error"].endswith(
        " of its 400 requests, with status 0 (as it does when stopped by a SIGINT from "
        "outside iofleet)"
    )
    # and its requests, real but fewer than asked, are kept under the void name and loaded
    # into no table: the slot's latency is not read from a run cut short (one ingest_errors row)
    assert entry["artifact"].endswith("/void-w00-ioping.json")
    assert parse_ioping((slot / "void-w00-ioping.json").read_text()).requests
    from iofleet.results.warehouse import Warehouse

    with Warehouse(tmp_path / "w.duckdb") as wh:
        wh.ingest_dir(tmp_path / "raw")
        requests = wh.con.execute("SELECT count(*) FROM ioping_requests").fetchone()
        errors = wh.con.execute("SELECT object_key FROM ingest_errors").fetchall()
    assert requests == (0,)
    assert [key.rsplit("/", 1)[1] for (key,) in errors] == ["void-w00-ioping.json"]


def test_iofleet_parse_of_a_warm_up_only_output_warns_as_import_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # given real ioping -c 1 output: its one request is the warm-up, ignored by ioping
    target = tmp_path / "t"
    target.mkdir()
    path = tmp_path / "warm.json"
    path.write_text(_ioping("-J", "-c", "1", target))
    # when parsed
    rc = main(["parse", str(path)])
    # then the record says 0 requests, and one warning line says why, in the words
    # `iofleet import` refuses the same file with
    out, err = capsys.readouterr()
    assert rc == 0
    assert json.loads(out)["requests"] == 0
    assert err.splitlines() == [
        f"warning: {path}: no timed request, 1 ignored by ioping (1 warm-up or outside "
        "-t/-T): ioping ignores its first request, use -c 2 or more"
    ]
