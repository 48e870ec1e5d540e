"""Smoke of the bench code (`make bench`): tiny scale, real fio, DuckDB and moto.

No timing is asserted: these tests check that each figure is measured and
reported, and that the transition count of a state machine executed in moto
is what its path implies.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

import bench.fidelity
from bench import report
from bench.common import ROOT, ci_within, ratio_ci, stat
from bench.fidelity import quiet_target, ram_target, tmpfs_target
from bench.orchestration import run_execution
from bench.run import main

DOC = f"# bench\n\n{report.BEGIN}\nold\n{report.END}\n\nprose kept\n"


LAMBDA = {"Type": "AWS::Lambda::Function", "Properties": {"Handler": "handler.handler"}}


def _arn(logical: str) -> str:
    """A placeholder the template's Fn::Join replaces with the function's ARN."""
    return f"@@{logical}@@"


def _definition_string(definition: dict[str, Any]) -> dict[str, Any]:
    """The definition as CDK writes it: Fn::Join of text and Fn::GetAtt ARNs."""
    parts: list[Any] = []
    for i, piece in enumerate(re.split(r"@@(\w+)@@", json.dumps(definition))):
        parts.append({"Fn::GetAtt": [piece, "Arn"]} if i % 2 else piece)
    return {"Fn::Join": ["", parts]}


def _task(fn: str, nxt: str | None, **extra: Any) -> dict[str, Any]:
    state: dict[str, Any] = {
        "Type": "Task",
        "Resource": "arn:aws:states:::lambda:invoke",
        "Parameters": {"FunctionName": _arn(fn), "Payload.$": "$"},
        "ResultSelector": {"result.$": "$.Payload"},
        **extra,
    }
    if nxt:
        state["Next"] = nxt
    else:
        state["End"] = True
    return state


def mini_template() -> dict[str, Any]:
    """A state machine shaped like the stack's: Plan, PrepareCell, Fleet (distributed) of RunSlot."""
    definition = {
        "StartAt": "Plan",
        "States": {
            "Plan": _task("PlanFnFunction", "PrepareCell", ResultPath="$.plan"),
            "PrepareCell": _task("PrepareCellFnFunction", "Fleet", ResultPath="$.prepared"),
            "Fleet": {
                "Type": "Map",
                "ItemsPath": "$.prepared.result.slots",
                "ItemSelector": {"slot_index.$": "$$.Map.Item.Value"},
                "MaxConcurrency": 1000,
                "ResultPath": None,
                "Next": "Done",
                "ItemProcessor": {
                    "ProcessorConfig": {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"},
                    "StartAt": "RunSlot",
                    "States": {
                        "RunSlot": {
                            "Type": "Task",
                            "Resource": "arn:aws:states:::lambda:invoke.waitForTaskToken",
                            "Parameters": {
                                "FunctionName": _arn("LaunchFnFunction"),
                                "Payload": {
                                    "slot_index.$": "$.slot_index",
                                    "task_token.$": "$$.Task.Token",
                                },
                            },
                            "End": True,
                        }
                    },
                },
            },
            "Done": {"Type": "Succeed"},
        },
    }
    return {
        "Resources": {
            "PlanFnFunction": LAMBDA,
            "PrepareCellFnFunction": LAMBDA,
            "LaunchFnFunction": LAMBDA,
            "Machine": {
                "Type": "AWS::StepFunctions::StateMachine",
                "Properties": {"DefinitionString": _definition_string(definition)},
            },
        }
    }


def test_stat_gives_min_median_max_and_count() -> None:
    assert stat([3.0, 1.0, 2.0, 10.0], "s") == {
        "min": 1.0,
        "median": 2.5,
        "max": 10.0,
        "n": 4,
        "unit": "s",
    }


def test_moto_execution_counts_one_transition_per_state_entered_and_per_slot() -> None:
    # given: Plan, PrepareCell, Fleet, Done in the parent and RunSlot per slot
    template = mini_template()
    # when
    got = run_execution(template, slots=3, timeout_s=60)
    # then
    assert got["parent_states"] == {"Plan": 1, "PrepareCell": 1, "Fleet": 1, "Done": 1}
    assert got["child_executions"] == 3
    assert got["child_states"] == {"RunSlot": 3}
    assert got["fleet_step_s"] >= 0


def test_report_marks_missed_targets_and_keeps_the_prose(tmp_path: Path) -> None:
    # given: one missed target and one figure that could not be measured
    doc = tmp_path / "benchmarks.md"
    doc.write_text(DOC)
    results = {
        "machine": {},
        "ingest": {
            "status": "measured",
            "ratio_to_json_loads": stat([9.0, 10.0, 11.0], "x"),
            "met": {"ratio_to_json_loads": False},
        },
        "fleet_step": {"status": "not measured", "reason": "no local cloud"},
    }
    # when
    report.update_doc(doc, results)
    # then
    text = doc.read_text()
    assert "| ingest | ratio to json.loads of the same bytes | 9.00 | 10.00 | 11.00 |" in text
    assert "**missed**" in text
    assert "not measured: no local cloud" in text
    assert "prose kept" in text and "\nold\n" not in text


def test_report_refuses_a_doc_without_markers(tmp_path: Path) -> None:
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# no markers\n")
    with pytest.raises(ValueError, match="markers not found"):
        report.update_doc(doc, {})


@pytest.mark.parametrize("doc_text", [None, "# no markers\n"])
def test_a_docs_path_it_cannot_update_is_refused_before_anything_is_measured(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], doc_text: str | None
) -> None:
    # given a --docs that is missing or has no table markers
    out, doc, work = tmp_path / "latest.json", tmp_path / "docs" / "benchmarks.md", tmp_path / "w"
    if doc_text is not None:
        doc.parent.mkdir()
        doc.write_text(doc_text)
    # when
    rc = main(
        ["--only", "ingest", "--smoke", "--out", str(out), "--docs", str(doc), "--work", str(work)]
    )
    # then one line naming the file, exit 2, and nothing measured or written
    err = capsys.readouterr().err.splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith(f"{doc}: "), err
    assert not out.exists() and not work.exists()
    assert doc_text is None or doc.read_text() == doc_text


def test_smoke_run_measures_local_figures_and_writes_json_and_docs(tmp_path: Path) -> None:
    # given
    out, doc = tmp_path / "latest.json", tmp_path / "benchmarks.md"
    doc.write_text(DOC)
    # when: real fio (1 s jobs), iofleet local, ingest and DuckDB queries at tiny scale
    rc = main(
        [
            "--smoke",
            "--only",
            "fidelity,overhead,ingest,queries",
            "--out",
            str(out),
            "--docs",
            str(doc),
            "--work",
            str(tmp_path / "work"),
        ]
    )
    # then
    assert rc == 0
    results = json.loads(out.read_text())
    for figure in ("fidelity", "overhead", "ingest", "queries"):
        assert results[figure]["status"] == "measured", results[figure]
    for row in ("ram", "disk"):  # the RAM-backed target needs tmpfs with O_DIRECT, or loops
        if results["fidelity"][row]["status"] != "measured":
            assert row == "ram" and results["fidelity"][row]["reason"]
            continue
        assert results["fidelity"][row]["iops_ratio"]["median"] > 0
        assert results["fidelity"][row]["aa_iops_ratio"]["median"] > 0
        assert results["fidelity"][row]["p99_ratio"]["n"] >= 1
    assert results["overhead"]["agent_peak_rss_mib"]["max"] > 0
    assert results["ingest"]["results"] == 12
    assert results["queries"]["duckdb"]["rows_out"]["fleet_latency"]["all"] > 0
    assert results["machine"]["versions"]["fio"].startswith("fio-")
    assert "| fidelity | IOPS ratio iofleet / bare fio, real disk |" in doc.read_text()


def test_ratio_ci_is_a_geometric_interval_and_needs_two_pairs() -> None:
    # a ratio of 0.8 and one of 1.25 cancel on the log scale
    got = ratio_ci([0.8, 1.25])
    assert got["geomean"] == 1.0
    low, high = got["ci95"]
    assert low < 0.8 and high > 1.25 and abs(low * high - 1.0) < 1e-2  # symmetric in log
    tight = ratio_ci([0.99, 1.0, 1.01, 1.0, 0.995, 1.005])
    assert ci_within(tight, 0.98, 1.02)
    assert not ci_within(got, 0.98, 1.02)
    assert ratio_ci([1.2])["ci95"] is None and not ci_within(ratio_ci([1.2]), 0.0, 9.0)


def test_report_shows_the_interval_and_judges_by_it(tmp_path: Path) -> None:
    doc = tmp_path / "benchmarks.md"
    doc.write_text(DOC)
    wide = ratio_ci([0.9, 1.0, 1.1])
    results = {
        "machine": {},
        "fidelity": {
            "status": "measured",
            "ram": {"status": "measured", "iops_ratio": wide, "met": {"iops_ratio": False}},
            "disk": {"status": "not measured", "reason": "no disk"},
        },
    }
    report.update_doc(doc, results)
    text = doc.read_text()
    num = report._num
    ci = f"{num(wide['geomean'])} ({num(wide['ci95'][0])}-{num(wide['ci95'][1])})"
    assert f"| 3 | {ci} | 0.97-1.03 (95% CI inside) | **missed** |" in text
    assert (
        "IOPS ratio iofleet / bare fio, real disk | | | | | | |  | not measured: no disk |" in text
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="loop devices and mount need root")
def test_ram_target_is_a_file_system_on_a_loop_device_over_tmpfs_and_goes_away(
    tmp_path: Path,
) -> None:
    # given / when: the fidelity figure's RAM-backed target
    with ram_target(tmp_path, 32) as (target, device):
        # then: the directory is on a loop device whose backing file lives in /dev/shm (tmpfs)
        source = subprocess.run(
            ["findmnt", "-n", "-o", "SOURCE", "-T", str(target)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        assert source.startswith("/dev/loop")
        backing = Path(f"/sys/block/{Path(source).name}/loop/backing_file").read_text().strip()
        assert backing.startswith("/dev/shm/")
        fstype = subprocess.run(
            ["stat", "-f", "-c", "%T", backing], capture_output=True, text=True, check=True
        ).stdout.strip()
        assert fstype == "tmpfs"
        (target / "probe").write_bytes(b"x" * 4096)
        assert device["kind"].startswith("ext4 on a loop device")
    # and afterwards nothing is left: unmounted, detached, the backing file deleted
    assert not Path(backing).exists()
    listed = subprocess.run(["losetup", "-a"], capture_output=True, text=True, check=True).stdout
    assert backing not in listed
    assert not (tmp_path / "ram-mnt" / "target").exists()


def _fs_type(path: Path) -> str:
    """The file system `path` is on, as stat(1) names it (statfs's f_type)."""
    return subprocess.run(
        ["stat", "-f", "-c", "%T", str(path)], capture_output=True, text=True, check=True
    ).stdout.strip()


def _zero_pages(path: Path) -> int:
    """How many 4 KiB pages of the file read back as zeros (a hole, or never written)."""
    with path.open("rb") as f:
        return sum(1 for page in iter(lambda: f.read(4096), b"") if not page.strip(b"\0"))


def _held_open_below(path: Path) -> list[str]:
    """Open file descriptors of any process on a file below `path`: a deleted tmpfs
    file's pages stay in RAM while one is open."""
    prefix = f"{path}/"
    held = []
    for fds in Path("/proc").glob("[0-9]*/fd"):
        try:
            names = os.listdir(fds)
        except OSError:  # gone, or not ours to see
            continue
        for name in names:
            try:
                link = os.readlink(fds / name)
            except OSError:
                continue
            if link.startswith(prefix):
                held.append(f"{fds}/{name} -> {link}")
    return held


def test_tmpfs_target_holds_fio_direct_reads_in_ram_and_goes_away(tmp_path: Path) -> None:
    # Measured on the file fio laid out, not on the machine's shared-memory total (which
    # other processes move): its blocks, its file system, its bytes read back.
    # given / when: the fidelity figure's RAM row target, and fio's O_DIRECT job laid out in it
    with tmpfs_target(tmp_path) as (target, device):
        got = subprocess.run(
            [
                "fio",
                "--name=probe",
                f"--directory={target}",
                "--size=16m",
                "--rw=randread",
                "--bs=4k",
                "--ioengine=libaio",
                "--direct=1",
                "--number_ios=256",
                "--output-format=json",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        # then: fio accepted O_DIRECT there and read what it asked for
        assert got.returncode == 0, got.stderr
        job = json.loads(got.stdout[got.stdout.index("{") :])["jobs"][0]
        assert job["read"]["total_ios"] == 256
        # and its 16 MiB file is on tmpfs (RAM), on the /dev/shm mount, every page of it
        # allocated there and holding what fio wrote (no hole, no page left zero)
        (laid_out,) = list(target.iterdir())
        info = laid_out.stat()
        assert info.st_size == 16 * 1024 * 1024
        assert info.st_blocks * 512 >= info.st_size
        assert _fs_type(laid_out) == "tmpfs"
        assert info.st_dev == os.stat("/dev/shm").st_dev
        assert _zero_pages(laid_out) == 0
        assert device["kind"].startswith("tmpfs")
    # and afterwards the directory is gone, and no process holds a file of it open (which
    # would keep its pages in RAM)
    assert not target.exists()
    assert _held_open_below(target) == []


def test_quiet_target_falls_back_to_a_loop_device_when_tmpfs_refuses_o_direct(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if os.geteuid() != 0:
        pytest.skip("the fallback's loop device and mount need root")
    # given: a kernel whose tmpfs refuses O_DIRECT (Linux < 6.6); this one accepts it, so the
    # probe's answer is replaced (a stand-in: no older kernel on this machine)
    monkeypatch.setattr(bench.fidelity, "o_direct_accepted", lambda directory: False)
    # when
    with quiet_target(tmp_path, 32) as (target, device):
        source = subprocess.run(
            ["findmnt", "-n", "-o", "SOURCE", "-T", str(target)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        # then: the rounds run on ext4 over a loop device, and the JSON says why
        assert source.startswith("/dev/loop")
        assert device["why_not_tmpfs"] == "tmpfs refuses O_DIRECT here (Linux < 6.6)"
    assert not list(Path("/dev/shm").glob(f"iofleet-bench-{os.getpid()}-*"))


def test_agents_run_between_every_launch_in_flight_and_the_tokens_answered() -> None:
    # given
    seen: list[int] = []
    # when: the agents callback sees every task token before any is answered
    got = run_execution(
        mini_template(), slots=3, timeout_s=60, agents=lambda t: seen.append(len(set(t)))
    )
    # then
    assert seen == [3]
    assert got["child_states"] == {"RunSlot": 3}


def test_barrier_wait_passes_every_agent_at_one_instant_in_several_processes() -> None:
    # moto's server here (the agents are other processes); the bench runs the same code
    # on DynamoDB Local
    import boto3
    from moto.server import ThreadedMotoServer

    from bench.fleet_agents import barrier_wait, wake_floor
    from bench.fleet_scale import _state_table
    from iofleet.aws.keys import barrier_item_key

    server = ThreadedMotoServer(port=0)
    server.start()
    try:
        host, port = server.get_host_and_port()
        engine = {
            "endpoint": f"http://{host}:{port}",
            "region": "us-east-1",
            "key": "smoke",
            "secret": "smoke",
        }
        ddb = boto3.client(
            "dynamodb",
            endpoint_url=engine["endpoint"],
            region_name="us-east-1",
            aws_access_key_id="smoke",
            aws_secret_access_key="smoke",
        )
        _state_table(ddb, "state")
        got = barrier_wait(engine, "state", "run-smoke", "c000-smoke", 6, processes=3)
        control = wake_floor(engine, "state", 6, 0.2, processes=3)
        item = ddb.get_item(
            TableName="state",
            Key={k: {"S": v} for k, v in barrier_item_key("run-smoke", "c000-smoke").items()},
            ConsistentRead=True,
        )["Item"]
    finally:
        server.stop()
    # then: every party announced on the one item, one instant was set, and the agents
    # really ran in 3 processes, every one of them reading the barrier
    assert sorted(item["arrived"]["NS"], key=int) == [str(i) for i in range(6)]
    assert "release_us" in item
    assert got["agent_pids"] == 3
    assert control["processes"] == 3 and control["last_after_instant_ms"] >= 0
    assert got["last_after_release_ms"] >= got["first_after_release_ms"] >= 0


def test_trino_rows_land_where_compaction_reads_them(tmp_path: Path) -> None:
    # the Trino figure's data path up to compaction, on moto's S3 and Glue in process:
    # the stack's table pair per results table, rows landed per run as ingest writes
    # them. Compaction itself is Athena INSERT INTO on Trino: `make bench` (Trino's
    # start-up alone is tens of seconds), not this smoke.
    import boto3
    from moto import mock_aws

    from bench.common import Context, Scale
    from bench.queries import shape
    from bench.trino import TABLES_FROM_DATA, upload_tables
    from iofleet.aws import compact
    from iofleet.results import schema

    scale = Scale.smoke()
    sh = shape(scale)
    tables = {}
    for t in schema.TABLES:
        for name, location, fmt in (
            (compact.landing_table(t.name), "s3://bench-b/curated/x/", compact.JSON_FORMAT),
            (compact.parquet_table(t.name), compact.parquet_location("bench-b", t.name), None),
        ):
            tables[name] = {
                "Name": name,
                "PartitionKeys": [{"Name": "run_id", "Type": "string"}],
                "StorageDescriptor": compact.storage_descriptor(
                    t, location, fmt or compact.PARQUET_FORMAT
                ),
            }
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        glue = boto3.client("glue", region_name="us-east-1")
        s3.create_bucket(Bucket="bench-b")
        glue.create_database(DatabaseInput={"Name": "d"})
        got = upload_tables(
            Context(work=tmp_path, scale=scale), sh, tables, s3, glue, "bench-b", "d"
        )
        assert len(got["runs"]) == sh["runs"]
        assert got["runs"][0].startswith("bench-q-") and "t000000z-" in got["runs"][0]
        for name in TABLES_FROM_DATA:
            rows = 0
            for run_id in got["runs"]:
                prefix = compact.landing_prefix(name, run_id)  # where compaction looks
                listed = s3.list_objects_v2(Bucket="bench-b", Prefix=prefix).get("Contents", [])
                assert len(listed) == 1
                body = s3.get_object(Bucket="bench-b", Key=listed[0]["Key"])["Body"].read()
                lines = [json.loads(line) for line in body.splitlines()]
                assert lines and all("run_id" not in row for row in lines)  # partition key
                rows += len(lines)
                part = glue.get_partition(
                    DatabaseName="d",
                    TableName=compact.landing_table(name),
                    PartitionValues=[run_id],
                )["Partition"]
                assert part["StorageDescriptor"]["Location"] == f"s3://bench-b/{prefix}"
            assert rows == sh[name]
            parquet = glue.get_partitions(DatabaseName="d", TableName=compact.parquet_table(name))
            assert parquet["Partitions"] == []  # written by compaction, not here
        assert len(glue.get_tables(DatabaseName="d")["TableList"]) == len(tables)


def test_fleet_ingest_curates_every_slot_of_a_real_sample(tmp_path: Path) -> None:
    from bench.common import Context, Scale
    from bench.fleet_scale import ingest_all, sample_slot

    # given: one real `iofleet local` slot's artifacts, copied for 4 slots
    sample = sample_slot(Context(work=tmp_path, scale=Scale.smoke()))
    # when
    got = ingest_all(sample, 4, "c000-smoke-x4-r1")
    # then: every slot has its curated slot row and fio rows (one curated object per artifact)
    assert got["artifacts"] == 12
    assert got["rows"]["slots"] >= 4 and got["rows"]["fio_results"] >= 4
    assert got["curated_objects"] >= 8


def test_glue_calls_counts_the_glue_and_s3_requests_moto_served_since_the_mark() -> None:
    # the Trino figure's per-query request counts, read from a real moto server's log
    import boto3

    from bench.trino import GlueCalls, _engines

    engines = _engines()
    moto = engines.start_moto(execute_state_machine=False, module="bench.motolog", cwd=ROOT)
    try:
        aws = {
            "endpoint_url": moto.endpoint,
            "region_name": engines.AWS_REGION,
            "aws_access_key_id": engines.AWS_ACCESS_KEY,
            "aws_secret_access_key": engines.AWS_SECRET_KEY,
        }
        glue = boto3.client("glue", **aws)
        s3 = boto3.client("s3", **aws)
        s3.create_bucket(Bucket="bench-calls")
        glue.create_database(DatabaseInput={"Name": "d"})
        calls = GlueCalls(moto.log_path, "bench-calls")
        # given: the requests before the mark are not counted
        calls.mark()
        # when: four Glue requests (three operations) and two S3 requests on the bucket
        glue.get_databases()
        for _ in range(2):
            with pytest.raises(glue.exceptions.EntityNotFoundException):
                glue.get_table(DatabaseName="d", Name="t")
        with pytest.raises(glue.exceptions.EntityNotFoundException):
            glue.get_partitions(DatabaseName="d", TableName="t")
        s3.put_object(Bucket="bench-calls", Key="a", Body=b"x")
        s3.get_object(Bucket="bench-calls", Key="a")
        # then: moto logs each request once it has answered it
        assert calls.since_mark() == {
            "glue_requests": 4,
            "glue_get_table": 2,
            "glue_get_partitions": 1,
            "glue_batch_get_partition": 0,
            "glue_other": 1,
            "s3_requests": 2,
        }
    finally:
        moto.stop()
