"""The same report from AWS, on the local cloud: Summarize's report.html, and `iofleet
report --athena` / `iofleet compare --athena` equal to their DuckDB output.

One run of the deployed state machine (2 EFS labels x fleets of 1 and 2; fio, ioping
and an app that fails on slot 1, so the report has failure reasons). Athena is the
stand-in over Trino (tests/cloud/localcloud/athena.py: Athena's protocol, Trino
runs the SQL); the CLI runs as a subprocess pointed at it with AWS_ENDPOINT_URL
(moto) and AWS_ENDPOINT_URL_ATHENA (the stand-in), as docs/local-cloud.md says.
The DuckDB side is `iofleet local`'s warehouse built from the same raw objects.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from iofleet.results.warehouse import Warehouse
from tests.cloud.localcloud.fixtures import LocalStack
from tests.cloud.test_e2e import FIO, IOPING, matrix

ROOT = Path(__file__).resolve().parents[2]
PROBES = ROOT / "tests" / "data" / "probes" / "athena" / "cloud.json"
FAIL_ON_SLOT_1 = {"app": {"name": "fail-on-slot-1", "run": 'test "$IOFLEET_SLOT" != 1'}}
STAMP = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d{1,6})?")
SIDES = ["--a", "storage_label=efs-a", "--b", "storage_label=efs-b"]


@pytest.fixture(scope="module")
def executions(local_stack: LocalStack) -> dict[str, str]:
    """Both runs of this module, started together (they share nothing but the stack);
    `run` and `repeats_run` each wait for their own."""
    # given: a run of 2 labels x fleets of 1 and 2 whose slot 1 fails its app
    doc = matrix(local_stack, "athena-report", workloads=[FIO, IOPING, FAIL_ON_SLOT_1])
    doc["parallelism"] = [1, 2]
    # and: a second run, one EFS label x a fleet of 2, measured in 2 repeats
    repeats = matrix(local_stack, "athena-repeats", workloads=[FIO, IOPING])
    repeats.update(storage=repeats["storage"][:1], parallelism=[2], repeats=2)
    return {"run": local_stack.start(doc), "repeats": local_stack.start(repeats)}


@pytest.fixture(scope="module")
def run(
    local_stack: LocalStack,
    executions: dict[str, str],
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, Any]:
    arn = executions["run"]
    # when: it ends, ingest has drained, and the raw objects are loaded into DuckDB too
    desc = local_stack.wait(arn)
    run_id = local_stack.run_id_of(arn)
    local_stack.esm.wait_drained()
    tmp = tmp_path_factory.mktemp("athena-report")
    raw = local_stack.download(f"raw/{run_id}/", tmp / "raw")
    warehouse = tmp / "warehouse.duckdb"
    with Warehouse(warehouse) as wh:
        wh.ingest_dir(raw)
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "AWS_ENDPOINT_URL": local_stack.base_config["env"]["AWS_ENDPOINT_URL"],
        "AWS_ENDPOINT_URL_ATHENA": local_stack.athena.endpoint,
    }
    return {
        "arn": arn,
        "desc": desc,
        "run_id": run_id,
        "warehouse": warehouse,
        "env": env,
        "tmp": tmp,
        "athena": ["--athena", "--workgroup", local_stack.d.workgroup, "--database", "iofleet"],
    }


@pytest.fixture(scope="module")
def repeats_run(
    local_stack: LocalStack,
    executions: dict[str, str],
    run: dict[str, Any],
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, Any]:
    # given: the second run (`executions`), one EFS label x a fleet of 2 in 2 repeats
    arn = executions["repeats"]
    desc = local_stack.wait(arn)
    run_id = local_stack.run_id_of(arn)
    local_stack.esm.wait_drained()
    tmp = tmp_path_factory.mktemp("athena-repeats")
    raw = local_stack.download(f"raw/{run_id}/", tmp / "raw")
    warehouse = tmp / "warehouse.duckdb"
    with Warehouse(warehouse) as wh:
        wh.ingest_dir(raw)
    return {**run, "arn": arn, "desc": desc, "run_id": run_id, "warehouse": warehouse, "tmp": tmp}


def noise_rows(page: str) -> list[list[str]]:
    """The rows of the page's repeat-noise table (cells as shown)."""
    match = re.search(r"<h2>Repeat noise \((\d+) flagged\)</h2>.*?<tbody>(.*?)</tbody>", page, re.S)
    assert match, "no repeat-noise table"
    return [re.findall(r"<td[^>]*>(.*?)</td>", r) for r in re.findall(r"<tr>(.*?)</tr>", match[2])]


def iofleet(run: dict[str, Any], *args: str, env: dict[str, str] | None = None) -> Any:
    return subprocess.run(
        [sys.executable, "-m", "iofleet.cli", *args],
        env=env or run["env"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def ok(done: Any) -> str:
    assert done.returncode == 0, done.stderr[-3000:]
    return str(done.stdout)


def same(a: Any, b: Any, path: str = "") -> None:
    """JSON values equal; numbers to 1e-12 relative (Trino and DuckDB sum in their own
    order); timestamps to the millisecond."""
    if isinstance(a, dict) and isinstance(b, dict):
        assert sorted(a) == sorted(b), path
        for k in a:
            same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            same(x, y, f"{path}[{i}]")
    elif isinstance(a, float | int) and isinstance(b, float | int) and not isinstance(a, bool):
        assert math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12), f"{path}: {a} != {b}"
    elif isinstance(a, str) and isinstance(b, str) and STAMP.fullmatch(a) and STAMP.fullmatch(b):
        # Athena's curated timestamps hold milliseconds (docs/local-cloud.md), DuckDB's microseconds
        assert a[:23] == b[:23], f"{path}: {a} != {b}"
    else:
        assert a == b, path


def test_the_run_ends_partial_with_one_failed_slot_per_fleet_of_two(
    run: dict[str, Any], local_stack: LocalStack
) -> None:
    failed = [
        {k: v for k, v in e.items() if k.endswith("EventDetails")}
        for e in local_stack.history(run["arn"])
        if "Failed" in e["type"]
    ]
    assert run["desc"]["status"] == "SUCCEEDED", failed
    assert local_stack.run_item(run["run_id"])["status"] == "PARTIAL"


def test_summarize_puts_the_full_report_html_in_s3_and_returns_where(
    run: dict[str, Any], local_stack: LocalStack
) -> None:
    # when: the execution's output names report.html and the object is fetched
    summary = json.loads(run["desc"]["output"])["summary"]["result"]
    key = f"reports/{run['run_id']}/report.html"
    assert summary["report_html"] == key
    assert summary["report_html_uri"] == f"s3://{local_stack.d.bucket}/{key}"
    assert "report_html_error" not in summary
    got = local_stack.client("s3").get_object(Bucket=local_stack.d.bucket, Key=key)
    page = got["Body"].read().decode("utf-8")
    # then: the whole report, charts inlined: decision table, percentile tables, failure
    # reasons, start skew, environment, ioping ladder, uPlot and its data block
    assert got["ContentType"].startswith("text/html")
    for heading in (
        "<h2>Decision",
        "<h2>Storage x fleet size</h2>",
        "<h2>Fleet totals and the binding limit</h2>",
        "<h2>Failures (4)</h2>",  # per failed slot: its slot.json and its app
        "<h2>Environment</h2>",
        "<h2>ioping latency</h2>",
        "<h2>Percentiles across slots</h2>",
        "<h2>Start skew</h2>",
    ):
        assert heading in page, heading
    assert page.count("fail-on-slot-1 run: exit 1") == 2  # the app's failure on each slot 1
    assert "<script>/*! uPlot, vendored" in page and "var uPlot=function" in page
    assert '<script type="application/json"' in page
    assert "<script src=" not in page and "<link " not in page  # one offline file
    # and: it is the very page `iofleet report --html` writes from the DuckDB warehouse
    local = run["tmp"] / "local.html"
    ok(iofleet(run, "report", "--warehouse", str(run["warehouse"]), "--html", str(local)))
    assert page == local.read_text(encoding="utf-8")
    # and: report.json carries the start skew rows, one per cell
    body = local_stack.client("s3").get_object(
        Bucket=local_stack.d.bucket, Key=f"reports/{run['run_id']}/report.json"
    )["Body"]
    skew = json.loads(body.read())["start_skew"]
    assert len(skew) == 4 and {r["fleet_size"] for r in skew} == {1, 2}
    assert all(r["start_skew_us"] is not None for r in skew if r["fleet_size"] == 2)


def test_summarize_report_html_of_a_run_with_repeats_has_the_duckdb_noise_rows(
    repeats_run: dict[str, Any], local_stack: LocalStack
) -> None:
    run = repeats_run
    summary = json.loads(run["desc"]["output"])["summary"]["result"]
    assert "report_html_error" not in summary
    # when: Summarize's report.html is fetched, and the CLI writes the page from DuckDB
    got = local_stack.client("s3").get_object(
        Bucket=local_stack.d.bucket, Key=summary["report_html"]
    )
    page = got["Body"].read().decode("utf-8")
    local = run["tmp"] / "local.html"
    ok(iofleet(run, "report", "--warehouse", str(run["warehouse"]), "--html", str(local)))
    # then: the S3 page has the repeat-noise section with DuckDB's rows: one per
    # workload metric of the one configuration, each pooling 2 repeats of 2 slots
    rows = noise_rows(page)
    assert rows == noise_rows(local.read_text(encoding="utf-8"))
    assert len(rows) >= 2 and {(r[4], r[5]) for r in rows} == {("2", "4")}
    assert "Repeat noise (not computed)" not in page
    assert page == local.read_text(encoding="utf-8")
    # and: report.json says nothing is missing; `report --athena` has the same noise rows
    body = local_stack.client("s3").get_object(
        Bucket=local_stack.d.bucket, Key=f"reports/{run['run_id']}/report.json"
    )["Body"]
    assert json.loads(body.read())["report_html"]["repeat_noise_missing"] is None
    athena = [*run["athena"], "--run", run["run_id"], "--format", "json"]
    duck = ["--warehouse", str(run["warehouse"]), "--run", run["run_id"], "--format", "json"]
    got_noise = json.loads(ok(iofleet(run, "report", *athena)))["repeat_noise"]
    want_noise = json.loads(ok(iofleet(run, "report", *duck)))["repeat_noise"]
    assert got_noise and len(got_noise) == len(rows)
    same(got_noise, want_noise)


GATED_IMPORT = """
from tests.cloud.localcloud.lambda_runtime import _block_missing_layers
_block_missing_layers()
try:
    import scipy.stats
    print("imported")
except ModuleNotFoundError as exc:
    print(type(exc).__name__)
"""


def test_only_summarize_is_deployed_with_the_stats_layer_and_only_it_imports_scipy(
    local_stack: LocalStack,
) -> None:
    # given: the deployed functions' configurations (moto Lambda)
    lam = local_stack.client("lambda")
    layers = {
        kind: [
            x["Arn"] for x in lam.get_function_configuration(FunctionName=name).get("Layers", [])
        ]
        for kind, name in local_stack.d.functions.items()
    }
    # then: Summarize alone has the stack's layer (Powertools is played by the venv)
    assert len(layers) == 8 and [k for k, v in layers.items() if v] == ["summarize"]
    (arn,) = layers["summarize"]
    assert "StatsLayer" in arn
    # and: the local worker lets a function import scipy only when it has that layer
    for have, outcome in (("", "ModuleNotFoundError"), (arn.split(":")[-2], "imported")):
        done = subprocess.run(
            [sys.executable, "-c", GATED_IMPORT],
            env={**os.environ, "PYTHONPATH": str(ROOT), "IOFLEET_LOCAL_LAYERS": have},
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        assert done.stdout.strip() == outcome, have


def test_report_athena_prints_the_duckdb_report(run: dict[str, Any]) -> None:
    duck = ["--warehouse", str(run["warehouse"]), "--run", run["run_id"]]
    athena = [*run["athena"], "--run", run["run_id"]]
    # when/then: the text report is the same, character for character
    text = ok(iofleet(run, "report", *athena))
    assert text == ok(iofleet(run, "report", *duck))
    assert "fail-on-slot-1 run: exit 1" in text
    # and: every section of the JSON report holds the same rows
    got = json.loads(ok(iofleet(run, "report", *athena, "--format", "json")))
    want = json.loads(ok(iofleet(run, "report", *duck, "--format", "json")))
    same(got, want)
    assert got["start_skew"] and got["decision"] and got["failures"]


def test_compare_athena_prints_the_duckdb_compare(run: dict[str, Any]) -> None:
    duck = ["--warehouse", str(run["warehouse"]), run["run_id"], *SIDES]
    athena = [*run["athena"], run["run_id"], *SIDES]
    # when/then: table and JSON the same as from DuckDB
    text = ok(iofleet(run, "compare", *athena))
    assert text == ok(iofleet(run, "compare", *duck))
    got = json.loads(ok(iofleet(run, "compare", *athena, "--format", "json")))
    want = json.loads(ok(iofleet(run, "compare", *duck, "--format", "json")))
    assert {r["metric"] for r in got} >= {"iops", "wall_seconds"}
    same(got, want)


def _probes() -> list[dict[str, Any]]:
    return list(json.loads(PROBES.read_text()))


@pytest.mark.parametrize("probe", _probes(), ids=lambda p: p["name"])
def test_bad_athena_input_is_one_line_and_its_exit_status(
    run: dict[str, Any], local_stack: LocalStack, probe: dict[str, Any]
) -> None:
    # given: a command line from the probe table; {run} is the run's id, {wg} the workgroup
    def fill(arg: str) -> str:
        return arg.replace("{run}", run["run_id"]).replace("{wg}", local_stack.d.workgroup)

    env = {k: v for k, v in {**run["env"], **probe.get("env", {})}.items() if v != ""}
    # when
    done = iofleet(run, *[fill(a) for a in probe["args"]], env=env)
    # then: nothing on stdout, one line on stderr, the documented status
    assert done.returncode == probe["exit"], done.stderr
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and fill(probe["error"]) in lines[0], done.stderr


def test_the_dashboards_decision_query_gives_on_athena_what_it_gives_on_duckdb(
    run: dict[str, Any], local_stack: LocalStack
) -> None:
    import boto3

    from iofleet.aws.athena import AthenaSource
    from iofleet.results.source import named_query

    athena = boto3.client("athena", endpoint_url=local_stack.athena.endpoint)
    source = AthenaSource(athena, workgroup=local_stack.d.workgroup, database="iofleet")
    order = 'metric_source, workload_index, metric, stat, "rank"'
    # when: the QuickSight data set's query runs on Athena (Trino) and on DuckDB
    got = named_query(source, "decision", [run["run_id"]], order)
    with Warehouse(run["warehouse"]) as wh:
        want = named_query(wh, "decision", [run["run_id"]], order)
    # then: the same rows (typed alike by the Athena source)
    assert {r["metric"] for r in got if r["ranked"]} == {"iops", "lat_median_ns", "wall_seconds"}
    same(got, want)
