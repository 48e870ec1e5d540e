"""Summarize's report.html carries the repeat-noise section (issue 12, items 2 and 6).

The run: two configurations measured in two repeats of five slots each; "shifty"'s
second repeat builds twice as slowly as its first (tests/unit/test_report_noise.py),
"steady"'s repeats agree. S3 and DynamoDB are moto server; the page's SELECTs are
answered by a real DuckDB warehouse holding the run, put in the place of
`AthenaSource` (moto's Athena accepts queries but runs no SQL; the Athena protocol
over these same views runs on the local cloud, tests/cloud/test_athena_report.py).

On AWS, numpy and scipy come from Summarize's stats layer (infra/stats_layer.py,
asserted in tests/infra/test_stats_layer.py); here from the venv. Without them the
handler still writes the page, which says why the section is missing.
"""

from __future__ import annotations

import json
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest

from iofleet.report.cli import load_report_data
from iofleet.report.html import render_html
from iofleet.results.warehouse import Warehouse
from lambdas.summarize import handler as summarize
from tests.unit.lambdas.conftest import Cloud, FakeLambdaContext
from tests.unit.test_aws_report import Recorder
from tests.unit.test_report_noise import RUN, write_noise_warehouse

ROOT = Path(__file__).resolve().parents[3]
ROW = re.compile(r"<tr>(.*?)</tr>")
CELL = re.compile(r"<td[^>]*>(.*?)</td>")


def noise_rows(page: str, heading: str) -> dict[str, list[str]]:
    """The section's table under `heading`: first cell (storage) -> the row's cells."""
    start = page.index(heading)
    table = page[start : page.index("</table>", start)]
    rows = [CELL.findall(r) for r in ROW.findall(table)]
    return {cells[0].split()[0]: cells for cells in rows if cells}


def test_summarize_report_html_flags_the_configuration_whose_repeats_disagree(
    cloud: Cloud,
    workgroup: str,
    context: FakeLambdaContext,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # given: the run in DuckDB, answering the page's SELECTs
    with Warehouse(write_noise_warehouse(tmp_path / "wh.duckdb")) as wh:
        monkeypatch.setattr("iofleet.aws.report.AthenaSource", lambda *a, **k: wh)
        # when: the Summarize handler runs for it
        out = summarize.handler({"run_id": RUN}, context)
        local = render_html(load_report_data(wh, RUN))
    # then: report.html in S3 has the section with "shifty" flagged and "steady" not
    assert out["report_html"] == f"reports/{RUN}/report.html"
    assert "report_html_error" not in out
    page = cloud.text(f"reports/{RUN}/report.html")
    rows = noise_rows(page, "<h2>Repeat noise (1 flagged)</h2>")
    assert sorted(rows) == ["shifty", "steady"]
    assert rows["shifty"][-1] == "DISAGREE" and rows["steady"][-1] == "agree"
    assert rows["shifty"][4:6] == ["2", "10"]  # repeats and slots pooled
    assert "not computed" not in page
    # and: it is the page `iofleet report --html` writes from the warehouse
    assert page == local
    report = json.loads(cloud.text(f"reports/{RUN}/report.json"))
    assert report["report_html"]["repeat_noise_missing"] is None


LAMBDA_WITHOUT_SCIPY = """
import importlib.abc, pickle, sys
BLOCKED = ("numpy", "scipy", "duckdb", "sqlglot", "pandas")

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, Block())
sys.path.insert(0, {root!r})
import iofleet.aws.report
from lambdas.summarize import handler

calls = pickle.load(open({calls!r}, "rb"))

class Replay:
    where = "replay"
    def __init__(self, *args, **kwargs):
        pass
    def select(self, sql, params=()):
        return calls[(sql, tuple(params))]

iofleet.aws.report.AthenaSource = Replay

class Context:
    function_name = "summarize"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:summarize"
    aws_request_id = "req"

print("RESULT=" + repr(handler.handler({{"run_id": {run!r}}}, Context())))
print("IMPORTED=" + ",".join(sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)))
"""


def test_summarize_without_scipy_writes_the_page_saying_why_the_noise_is_missing(
    cloud: Cloud, workgroup: str, tmp_path: Path
) -> None:
    # given: the rows the page reads, recorded off the warehouse
    with Warehouse(write_noise_warehouse(tmp_path / "wh.duckdb")) as wh:
        recorder = Recorder(wh)
        load_report_data(recorder, RUN)
    calls = tmp_path / "calls.pickle"
    calls.write_bytes(pickle.dumps(recorder.calls))
    # when: the handler runs in a Python that cannot import numpy or scipy (a
    # Summarize deployed without its stats layer), against moto's S3/DynamoDB
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            LAMBDA_WITHOUT_SCIPY.format(root=str(ROOT), calls=str(calls), run=RUN),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    # then: it ends normally, having imported none of them
    assert done.returncode == 0, done.stderr[-3000:]
    said = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line[:9])
    result, imported = said["RESULT"], said["IMPORTED"]
    assert imported == ""
    assert "report_html_error" not in result
    # and: the page is written, and in the section's place says why it is missing
    page = cloud.text(f"reports/{RUN}/report.html")
    assert "<h2>Repeat noise (not computed)</h2>" in page
    assert "ModuleNotFoundError: No module named &#x27;numpy&#x27;" in page
    assert "<h2>Repeat noise (1 flagged)" not in page and "DISAGREE" not in page
    assert "<h2>Decision" in page  # the rest of the report is there
    report = json.loads(cloud.text(f"reports/{RUN}/report.json"))
    assert report["report_html"]["repeat_noise_missing"] == (
        "ModuleNotFoundError: No module named 'numpy'"
    )
