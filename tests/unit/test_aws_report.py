"""report.html from the Summarize Lambda: the local report's page, without heavy imports.

The Lambda runtime has boto3 and the Powertools layer: no duckdb or sqlglot, and
numpy/scipy only from Summarize's stats layer, for a run with repeats
(tests/unit/lambdas/test_summarize_noise.py). These tests render the report of a
run without repeats in a Python that cannot import any of them, from the rows the views give (recorded from a real DuckDB
warehouse), and check the page is byte for byte the one `iofleet report --html`
writes. The Athena side of the same rows runs on the local cloud
(tests/cloud/test_athena_report.py).
"""

from __future__ import annotations

import pickle
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from iofleet.aws.athena import AthenaSource, convert
from iofleet.report.cli import load_report_data
from iofleet.report.html import render_html
from iofleet.results.warehouse import Warehouse
from tests.unit import rawtree

ROOT = Path(__file__).resolve().parents[2]
RUN = "demo-20261121t051200z"
HEAVY = ("numpy", "scipy", "duckdb", "sqlglot", "pandas")


class Recorder:
    """A results source that answers from a warehouse and keeps every answer."""

    def __init__(self, wh: Warehouse) -> None:
        self.wh = wh
        self.where = wh.where
        self.calls: dict[tuple[str, tuple[object, ...]], list[dict[str, Any]]] = {}

    def select(self, sql: str, params: Sequence[object] = ()) -> list[dict[str, Any]]:
        rows = self.wh.select(sql, params)
        self.calls[(sql, tuple(params))] = rows
        return rows


LAMBDA_SIDE = """
import importlib.abc, pickle, sys
HEAVY = {heavy!r}

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HEAVY:
            raise ImportError(f"{{name}} is not in the Lambda runtime")
        return None

sys.meta_path.insert(0, Block())
sys.path.insert(0, {root!r})
import lambdas.summarize.handler  # the cold start
from iofleet.aws.report import write_report_html
from iofleet.report.cli import load_report_data
from iofleet.report.html import render_html

calls = pickle.load(open({calls!r}, "rb"))

class Replay:
    where = "replay"
    def select(self, sql, params=()):
        return calls[(sql, tuple(params))]

page = render_html(load_report_data(Replay(), {run!r}))
open({out!r}, "w", encoding="utf-8").write(page)
print(",".join(sorted(m for m in sys.modules if m.split(".")[0] in HEAVY)))
"""


def test_summarize_renders_the_local_report_without_numpy_scipy_duckdb_sqlglot(
    tmp_path: Path,
) -> None:
    # given: a run with two slots in a DuckDB warehouse; the local report's page and
    # every row the report read, recorded
    rawtree.write_run(tmp_path / "raw", RUN, slots=2)
    with Warehouse(":memory:") as wh:
        wh.ingest_dir(tmp_path / "raw")
        recorder = Recorder(wh)
        local = render_html(load_report_data(recorder, RUN))
    calls = tmp_path / "calls.pickle"
    calls.write_bytes(pickle.dumps(recorder.calls))
    out = tmp_path / "lambda.html"
    # when: a Python that cannot import the heavy libraries loads the Summarize handler
    # and renders the page from the same rows
    script = LAMBDA_SIDE.format(
        heavy=HEAVY, root=str(ROOT), calls=str(calls), run=RUN, out=str(out)
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    # then: it ran, imported none of them, and wrote the very page the CLI writes
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == ""
    assert out.read_text(encoding="utf-8") == local
    assert "Decision" in local and "uPlot" in local


@pytest.mark.parametrize(
    ("value", "kind", "expected"),
    [
        ("42", "bigint", 42),
        ("7", "integer", 7),
        ("1.5E7", "double", 1.5e7),
        ("12345678.25", "double", 12345678.25),
        ("NaN", "double", "nan"),
        ("true", "boolean", True),
        ("false", "boolean", False),
        ("1.05", "decimal", "Decimal('1.05')"),
        (
            "2026-11-21 05:12:00.250",
            "timestamp",
            "datetime.datetime(2026, 11, 21, 5, 12, 0, 250000)",
        ),
        (
            "2026-11-21 05:12:00.250",
            "timestamp(3)",
            "datetime.datetime(2026, 11, 21, 5, 12, 0, 250000)",
        ),
        ("2026-11-21", "date", "datetime.date(2026, 11, 21)"),
        ("gp3", "varchar", "gp3"),
        ("[1, 2]", "array(bigint)", "[1, 2]"),
        (None, "bigint", None),
        ("", "varchar", None),  # the warehouse loads empty strings as NULL
    ],
)
def test_athena_values_convert_by_their_column_type(value: Any, kind: str, expected: Any) -> None:
    got = convert(value, kind)
    if isinstance(expected, str) and expected.startswith(("Decimal", "datetime")):
        assert repr(got) == expected
    elif expected == "nan":
        assert got != got  # NaN
    else:
        assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize(
    ("value", "literal"),
    [("run-1", "'run-1'"), ("it's", "'it''s'"), (3, "3"), (None, "NULL"), (True, "true")],
)
def test_execution_parameters_are_sql_literals(value: object, literal: str) -> None:
    assert AthenaSource.literal(value) == literal


OFFLINE_PROBES = ROOT / "tests" / "data" / "probes" / "athena" / "offline.json"


def _offline_probes() -> list[dict[str, Any]]:
    import json

    return list(json.loads(OFFLINE_PROBES.read_text()))


@pytest.mark.parametrize("probe", _offline_probes(), ids=lambda p: p["name"])
def test_bad_athena_options_are_one_line_and_their_exit_status(
    probe: dict[str, Any], tmp_path: Path
) -> None:
    # given: a command line from the probe table (no AWS anywhere: the refusal comes
    # before any request, or the request cannot be made); the local cloud's probes
    # (unknown run, workgroup, database) are tests/data/probes/athena/cloud.json
    import os

    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("AWS_") and k not in ("IOFLEET_DEBUG",)
    }
    env.update(PYTHONPATH=str(ROOT), HOME=str(tmp_path), **probe.get("env", {}))
    env = {k: v for k, v in env.items() if v != ""}  # "" in the table: unset
    # when
    done = subprocess.run(
        [sys.executable, "-m", "iofleet.cli", *probe["args"]],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    # then: nothing on stdout, one line `PATH: message`, the documented status
    assert done.returncode == probe["exit"], done.stderr
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and probe["error"] in lines[0], done.stderr
    assert list(tmp_path.iterdir()) == []  # nothing created
