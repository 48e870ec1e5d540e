"""A real slot: fio, ioping and an app command run for real into a results directory."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from iofleet.agent.slot import run_populate, run_slot
from iofleet.results.parsers.app import parse_app
from iofleet.results.parsers.fio import parse_fio
from iofleet.results.parsers.ioping import parse_ioping
from tests.integration.proctable import reaped, wait_for

RUN_ID = "itest-20261121t000000z"
CELL_ID = "c000-local-tmp-x1-r1"
FIO = {
    "kind": "fio",
    "name": "latency-4k-qd1-randread",
    "params": {"RUNTIME": "1", "SIZE": "4m", "DIRECT": "0"},
}
IOPING = {"kind": "ioping", "count": 5, "interval_ms": 0, "write": False}


def _app(command: str, name: str = "tiny") -> dict:
    return {"kind": "app", "name": name, "run": command}


def _payload(tmp_path: Path, workloads: list[dict], **changes: object) -> dict:
    target = tmp_path / "target"
    target.mkdir(exist_ok=True)
    doc = {
        "version": 1,
        "run_id": RUN_ID,
        "cell": {
            "cell_id": CELL_ID,
            "cell_index": 0,
            "instance_type": "local",
            "storage_label": "tmp",
            "storage_type": "local",
            "storage_detail": str(target),
            "fleet_size": 1,
            "repeat": 1,
        },
        "slot_index": 0,
        "target": {"kind": "directory", "path": str(target)},
        "workloads": workloads,
        "barrier": {"kind": "none"},
        "results": {"kind": "directory", "root": str(tmp_path / "raw")},
        "time_limit_s": 120,
    }
    doc.update(changes)
    return doc


def _slot_dir(tmp_path: Path, slot: int = 0) -> Path:
    return tmp_path / "raw" / RUN_ID / CELL_ID / f"slot-{slot:04d}"


def _slot_json(tmp_path: Path, slot: int = 0) -> dict:
    return json.loads((_slot_dir(tmp_path, slot) / "slot.json").read_text())


@pytest.fixture(scope="module")
def full_slot(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """fio + ioping + app, run once for the tests that read its artifacts."""
    tmp_path = tmp_path_factory.mktemp("slot")
    app = _app('echo "slot=$IOFLEET_SLOT size=$IOFLEET_FLEET_SIZE cell=$IOFLEET_CELL_ID"; pwd')
    code = run_slot(_payload(tmp_path, [FIO, IOPING, app]))
    return tmp_path, code


def test_full_slot_succeeds(full_slot: tuple[Path, int]) -> None:
    tmp_path, code = full_slot

    assert code == 0
    record = _slot_json(tmp_path)
    assert record["status"] == "SUCCEEDED"
    assert [w["status"] for w in record["workloads"]] == ["SUCCEEDED"] * 3


def test_full_slot_writes_every_artifact(full_slot: tuple[Path, int]) -> None:
    tmp_path, _ = full_slot

    names = sorted(p.name for p in _slot_dir(tmp_path).iterdir())

    assert names == [
        "manifest.json",
        "slot.json",
        "w00-fio-latency-4k-qd1-randread.json",
        "w01-ioping.json",
        "w02-app-tiny.json",
    ]


def test_fio_artifact_is_parseable_json_plus(full_slot: tuple[Path, int]) -> None:
    tmp_path, _ = full_slot

    out = parse_fio((_slot_dir(tmp_path) / "w00-fio-latency-4k-qd1-randread.json").read_text())

    assert out.records[0]["direction"] == "read"
    assert out.records[0]["iops"] > 0
    assert out.bins  # json+ histogram bins are there


def test_ioping_artifact_has_the_requested_requests(full_slot: tuple[Path, int]) -> None:
    tmp_path, _ = full_slot

    out = parse_ioping((_slot_dir(tmp_path) / "w01-ioping.json").read_text())

    assert out.summary()["requests"] == 4  # -c 5 minus the warm-up request


def test_app_artifact_records_timing_and_environment(full_slot: tuple[Path, int]) -> None:
    tmp_path, _ = full_slot
    text = (_slot_dir(tmp_path) / "w02-app-tiny.json").read_text()

    record = parse_app(text)
    stdout = json.loads(text)["stdout_tail"]

    assert record["phase"] == "run"
    assert record["exit_code"] == 0
    assert f"slot=0 size=1 cell={CELL_ID}" in stdout
    assert stdout.strip().endswith(f"iofleet-{RUN_ID}/{CELL_ID}/slot-0000")


def test_manifest_describes_the_system_and_target(full_slot: tuple[Path, int]) -> None:
    tmp_path, _ = full_slot

    manifest = json.loads((_slot_dir(tmp_path) / "manifest.json").read_text())

    assert manifest["run_id"] == RUN_ID
    assert manifest["cell"]["cell_id"] == CELL_ID
    assert manifest["fio_version"].startswith("fio-")
    assert manifest["ioping_version"].startswith("ioping ")
    assert manifest["cpus"] >= 1
    assert manifest["memory_bytes"] > 0
    assert manifest["target_path"] == str(tmp_path / "target")
    assert manifest["target_fstype"]
    assert manifest["started_at"].endswith("Z")


def test_slot_removes_its_data_files(full_slot: tuple[Path, int]) -> None:
    tmp_path, _ = full_slot

    assert not (tmp_path / "target" / f"iofleet-{RUN_ID}" / CELL_ID / "slot-0000").exists()


def test_bad_fio_param_fails_that_workload_and_the_next_still_runs(tmp_path: Path) -> None:
    bad = {"kind": "fio", "name": "latency-4k-qd1-randread", "params": {"NOPE": "1"}}

    code = run_slot(_payload(tmp_path, [bad, IOPING]))

    assert code != 0
    record = _slot_json(tmp_path)
    assert record["status"] == "FAILED"
    assert [w["status"] for w in record["workloads"]] == ["FAILED", "SUCCEEDED"]
    assert "unknown parameter NOPE" in record["workloads"][0]["error"]
    assert (_slot_dir(tmp_path) / "w01-ioping.json").exists()


def test_failing_app_is_recorded_with_its_exit_code(tmp_path: Path) -> None:
    code = run_slot(_payload(tmp_path, [_app("echo boom >&2; exit 3"), IOPING]))

    assert code != 0
    record = _slot_json(tmp_path)
    assert record["workloads"][0]["error"] == "app tiny (run) exited with status 3: boom"
    assert record["workloads"][1]["status"] == "SUCCEEDED"
    assert parse_app((_slot_dir(tmp_path) / "w00-app-tiny.json").read_text())["exit_code"] == 3


def test_fio_job_error_fails_the_workload_and_keeps_the_raw_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given SIZE=0: fio prints its JSON with the job's error 22 and exits 1. The library's
    # SIZE is a size of at least 1 byte, so a copy of the job declares 0 allowed.
    from iofleet.plan.fiojobs import get_job

    library = tmp_path / "jobs"
    library.mkdir()
    text = get_job("latency-4k-qd1-randread").path.read_text()
    (library / "size-zero.fio").write_text(text.replace("SIZE:size=", "SIZE:size(0..)="))
    monkeypatch.setenv("IOFLEET_FIO_JOBS", str(library))
    bad = {"kind": "fio", "name": "size-zero", "params": {"SIZE": "0"}}

    code = run_slot(_payload(tmp_path, [bad]))

    assert code != 0
    entry = _slot_json(tmp_path)["workloads"][0]
    assert entry["status"] == "FAILED"
    assert entry["error"].startswith("fio exited with status 1")
    raw = (_slot_dir(tmp_path) / entry["artifact"].rsplit("/", 1)[1]).read_text()
    assert '"error" : 22' in raw


def test_time_limit_kills_the_whole_process_group(tmp_path: Path) -> None:
    # given an app that leaves a background child behind and waits for it
    pidfile = tmp_path / "child.pid"
    app = _app(f"sleep 300 & echo $! > {pidfile}; wait")

    code = run_slot(_payload(tmp_path, [app, IOPING], time_limit_s=1))

    record = _slot_json(tmp_path)
    assert code != 0
    assert [w["status"] for w in record["workloads"]] == ["TIMED_OUT", "SKIPPED"]
    assert "slot time limit" in record["workloads"][1]["error"]
    child = int(pidfile.read_text())
    assert not Path(f"/proc/{child}").exists() or _is_zombie(child)


def test_a_fio_cut_short_by_the_time_limit_is_kept_but_not_loaded(tmp_path: Path) -> None:
    from iofleet.results.warehouse import Warehouse

    # given a fio workload of 60 s in a slot with a 2 s time limit: the guardian stops fio
    # with SIGTERM, and fio prints the figures of the part it ran, every job's error 0
    long_fio = {**FIO, "params": {**FIO["params"], "RUNTIME": "60"}}
    code = run_slot(_payload(tmp_path, [long_fio], time_limit_s=2))
    entry = _slot_json(tmp_path)["workloads"][0]
    assert code != 0 and entry["status"] == "TIMED_OUT"
    artifact = _slot_dir(tmp_path) / entry["artifact"].rsplit("/", 1)[1]
    text = artifact.read_text()
    assert "fio: terminating on signal 15" in text and '"error" : 0' in text
    # when the slot's raw files are ingested
    with Warehouse(tmp_path / "w.duckdb") as wh:
        wh.ingest_dir(tmp_path / "raw")
        results = wh.con.execute("SELECT count(*) FROM fio_results").fetchone()
        errors = wh.con.execute("SELECT object_key, reason FROM ingest_errors").fetchall()
    # then its figures are in no results table (they cover part of the run, not beside
    # full runs in the percentiles), the output is kept, and the reason is one row
    assert results == (0,)
    assert [(key.rsplit("/", 1)[1], reason.split(" (")[0]) for key, reason in errors] == [
        (artifact.name, "fio was stopped by signal 15 before its run ended")
    ]
    assert artifact.read_text() == text


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0] == "Z"
    except OSError:
        return True


def test_missing_target_directory_fails_the_slot_without_running(tmp_path: Path) -> None:
    payload = _payload(tmp_path, [IOPING])
    payload["target"] = {"kind": "directory", "path": str(tmp_path / "absent")}

    code = run_slot(payload)

    assert code != 0
    record = _slot_json(tmp_path)
    assert "does not exist" in record["error"]
    assert record["workloads"][0]["status"] == "SKIPPED"
    manifest = json.loads((_slot_dir(tmp_path) / "manifest.json").read_text())
    assert "does not exist" in manifest["target_error"]


def test_populate_fills_the_shared_directory_for_the_slots(tmp_path: Path) -> None:
    # given an app whose populate writes a cache the run phase needs
    app = {
        "kind": "app",
        "name": "cached",
        "populate": 'echo cache-ok > "$IOFLEET_SHARED/cache.txt"',
        "run": 'grep -q cache-ok "$IOFLEET_SHARED/cache.txt"',
    }
    payload = _payload(tmp_path, [IOPING, app])

    populate_code = run_populate(payload, 1)
    slot_code = run_slot(payload)

    assert (populate_code, slot_code) == (0, 0)
    populate = tmp_path / "raw" / RUN_ID / CELL_ID / "populate" / "w01-app-cached.json"
    assert parse_app(populate.read_text())["phase"] == "populate"


def _agent(slot_file: Path, **env_changes: str) -> subprocess.Popen[str]:
    env = dict(os.environ, **env_changes)
    return subprocess.Popen(
        [sys.executable, "-m", "iofleet.cli", "agent", "--slot", str(slot_file)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_two_slot_processes_pass_the_file_barrier_together(tmp_path: Path) -> None:
    # given two slots of one cell sharing a file barrier
    barrier = {"kind": "file", "dir": str(tmp_path / "barrier"), "parties": 2, "timeout_s": 120}
    procs = []
    for slot in (0, 1):
        payload = _payload(tmp_path, [IOPING], slot_index=slot, barrier=barrier)
        payload["cell"]["fleet_size"] = 2
        slot_file = tmp_path / f"slot-{slot}.json"
        slot_file.write_text(json.dumps(payload))
        procs.append(_agent(slot_file))

    results = [p.communicate(timeout=120) for p in procs]

    assert [p.returncode for p in procs] == [0, 0], results
    names = sorted(p.name for p in (tmp_path / "barrier").iterdir())
    assert names == ["party-0000", "party-0001", "release"]
    records = [_slot_json(tmp_path, slot) for slot in (0, 1)]
    assert [r["status"] for r in records] == ["SUCCEEDED", "SUCCEEDED"]
    # both slots were released at the one instant in the release file, and passed after it
    (released,) = {r["barrier_released_at"] for r in records}
    release_us = int((tmp_path / "barrier" / "release").read_text().split()[0])
    assert _epoch_us(released) == release_us
    for r in records:
        assert _epoch_us(r["barrier_passed_at"]) >= release_us
        assert r["barrier_late_s"] == 0
        assert set(r["clock"]) >= {"synced", "max_error_us", "est_error_us"}


def _epoch_us(iso: str) -> int:
    when = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    return (when - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)


def test_barrier_with_a_missing_party_times_out(tmp_path: Path) -> None:
    barrier = {"kind": "file", "dir": str(tmp_path / "barrier"), "parties": 2, "timeout_s": 0.3}

    code = run_slot(_payload(tmp_path, [IOPING], barrier=barrier))

    record = _slot_json(tmp_path)
    assert code != 0
    assert record["error"].startswith("start barrier timed out")
    assert record["barrier_waited_s"] >= 0.3
    assert record["workloads"][0]["status"] == "SKIPPED"
    assert not (_slot_dir(tmp_path) / "w00-ioping.json").exists()


def test_a_release_instant_beyond_the_barrier_timeout_fails_the_slot_with_the_reason(
    tmp_path: Path,
) -> None:
    # given a barrier whose release record is an hour ahead of this slot's clock
    barrier = {"kind": "file", "dir": str(tmp_path / "barrier"), "parties": 1, "timeout_s": 60}
    (tmp_path / "barrier").mkdir()
    (tmp_path / "barrier" / "release").write_text(f"{time.time_ns() // 1000 + 3_600_000_000}\n")
    # when
    code = run_slot(_payload(tmp_path, [IOPING], barrier=barrier))
    # then the slot says why in slot.json, and nothing ran
    record = _slot_json(tmp_path)
    assert code == 1
    assert record["error"].startswith("start barrier: the release instant")
    assert "ahead of this slot's clock" in record["error"]
    assert record["barrier_passed_at"] is None
    assert record["workloads"][0]["status"] == "SKIPPED"
    assert not (_slot_dir(tmp_path) / "w00-ioping.json").exists()


def test_cli_rejects_a_bad_payload_in_one_line(tmp_path: Path) -> None:
    slot_file = tmp_path / "slot.json"
    slot_file.write_text(json.dumps({"version": 1, "run_id": "x"}))

    proc = subprocess.run(
        [sys.executable, "-m", "iofleet.cli", "agent", "--slot", str(slot_file)],
        capture_output=True,
        text=True,
    )

    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "cell: required" in proc.stderr


def test_sigterm_stops_the_slot_records_it_and_kills_the_children(tmp_path: Path) -> None:
    # given an agent process running an app that is waiting on a background child
    pidfile = tmp_path / "child.pid"
    app = _app(f"sleep 300 & echo $! > {pidfile}.tmp; mv {pidfile}.tmp {pidfile}; wait")
    slot_file = tmp_path / "slot.json"
    slot_file.write_text(json.dumps(_payload(tmp_path, [app, IOPING])))
    proc = _agent(slot_file)
    wait_for(lambda: pidfile.exists() or proc.poll() is not None, 60, "the app's child")
    child = int(pidfile.read_text())

    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)

    assert proc.returncode == 130
    record = _slot_json(tmp_path)
    assert record["status"] == "FAILED"
    assert record["error"] == "slot interrupted by a signal"
    assert [w["status"] for w in record["workloads"]] == ["FAILED", "SKIPPED"]
    assert not Path(f"/proc/{child}").exists() or _is_zombie(child)


def _agent_with_tmpdir(tmp_path: Path, command: str) -> tuple[subprocess.Popen[str], Path]:
    """An agent running one app `command`, with TMPDIR a new empty directory (returned)."""
    user_tmp = tmp_path / "user-tmp"
    user_tmp.mkdir()
    slot_file = tmp_path / "slot.json"
    slot_file.write_text(json.dumps(_payload(tmp_path, [_app(command)])))
    return _agent(slot_file, TMPDIR=str(user_tmp)), user_tmp


def test_an_app_killed_by_a_signal_leaves_nothing_in_the_users_tmpdir(tmp_path: Path) -> None:
    # given an app that made a temp file (as a compiler does) and is still running
    made = tmp_path / "made"
    proc, user_tmp = _agent_with_tmpdir(
        tmp_path, f"f=$(mktemp); echo $f > {made}.tmp; mv {made}.tmp {made}; sleep 300 & wait"
    )
    with reaped(proc):
        wait_for(lambda: made.exists() or proc.poll() is not None, 60, "the app's temp file")
        temp = Path(made.read_text().strip())
        assert temp.is_file() and user_tmp in temp.parents
        # when the slot is stopped, the app killed before it could remove its file
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    # then the file, and the app's own temp directory, are gone from the user's TMPDIR
    assert proc.returncode == 130
    assert not temp.exists()
    assert list(user_tmp.iterdir()) == []


def test_an_app_runs_with_its_own_tmpdir_removed_after_it(tmp_path: Path) -> None:
    # given an app that leaves a temp file and a temp directory behind and succeeds
    seen = tmp_path / "seen"
    # when
    proc, user_tmp = _agent_with_tmpdir(tmp_path, f'mktemp; mktemp -d; echo "$TMPDIR" > {seen}')
    with reaped(proc):
        proc.communicate(timeout=120)
    # then it ran in a temp directory of its own inside the user's, gone afterwards
    assert proc.returncode == 0, proc.stderr
    own = Path(seen.read_text().strip())
    assert own.parent == user_tmp
    assert list(user_tmp.iterdir()) == []


def test_instance_program_stops_on_sigterm_and_keeps_what_was_measured(tmp_path: Path) -> None:
    # given: the instance program's agent run (iofleet.aws.instance.run_interruptible) has
    # finished ioping and is in an app waiting on a child, as when its instance is terminated
    pidfile = tmp_path / "child.pid"
    app = _app(f"sleep 300 & echo $! > {pidfile}.tmp; mv {pidfile}.tmp {pidfile}; wait")
    doc = {"mode": "slot", "slot": _payload(tmp_path, [IOPING, app])}
    doc_file = tmp_path / "instance.json"
    doc_file.write_text(json.dumps(doc))
    script = (
        "import json, sys; from pathlib import Path; "
        "from iofleet.aws.instance import run_interruptible; "
        "sys.exit(run_interruptible(json.loads(Path(sys.argv[1]).read_text()), Path(sys.argv[2])))"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(doc_file), str(tmp_path / "results")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for(lambda: pidfile.exists() or proc.poll() is not None, 60, "the app's child")
    child = int(pidfile.read_text())
    # when: SIGTERM twice (the shutdown and `timeout` may both send it)
    proc.send_signal(signal.SIGTERM)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    # then: it returns 130 after writing slot.json; ioping's result is kept for the upload
    assert proc.returncode == 130
    slot_dir = tmp_path / "results" / RUN_ID / CELL_ID / "slot-0000"
    record = json.loads((slot_dir / "slot.json").read_text())
    assert record["exit_code"] == 130 and record["error"] == "slot interrupted by a signal"
    assert [w["status"] for w in record["workloads"]] == ["SUCCEEDED", "FAILED"]
    assert parse_ioping((slot_dir / "w00-ioping.json").read_text())
    assert not Path(f"/proc/{child}").exists() or _is_zombie(child)
