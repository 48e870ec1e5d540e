"""The HTML report's charts: uPlot vendored from its pinned npm package, inlined once,
fed by inline JSON that equals the warehouse's numbers, and nothing loaded from anywhere."""

from __future__ import annotations

import fnmatch
import json
import re
import tomllib
from pathlib import Path

import pytest

from iofleet.report import charts
from iofleet.report.cli import load_report_data, report_command
from iofleet.report.html import render_html
from iofleet.results.warehouse import Warehouse
from tests.unit import rawtree
from tests.unit.test_expected_vs_measured import add_plan, expected_entry

ROOT = Path(__file__).resolve().parents[2]
RUN = "demo-20261121t051200z"
VENDORED = {
    "uPlot.iife.min.js": "dist/uPlot.iife.min.js",
    "uPlot.min.css": "dist/uPlot.min.css",
    "uPlot.LICENSE": "LICENSE",
}
BANNER_URL = "https://github.com/leeoniya/uPlot"


def _warehouse(tmp_path: Path, expected: bool = False) -> Path:
    run_dir = rawtree.write_run(tmp_path / "raw", RUN, slots=2)
    if expected:
        add_plan(run_dir, [expected_entry()])
    path = tmp_path / "warehouse.duckdb"
    with Warehouse(path) as wh:
        wh.ingest_dir(tmp_path / "raw")
    return path


def _page(tmp_path: Path, expected: bool = False) -> str:
    out = tmp_path / "report.html"
    assert report_command(_warehouse(tmp_path, expected), RUN, "json", str(out)) == 0
    return out.read_text(encoding="utf-8")


def _specs(page: str) -> list[dict]:
    blocks = re.findall(
        rf'<script type="application/json" id="{charts.DATA_ID}">(.*?)</script>', page, re.S
    )
    assert len(blocks) == 1
    return json.loads(blocks[0])


def _by_title(specs: list[dict], part: str) -> dict:
    found = [s for s in specs if part in s["title"]]
    assert len(found) == 1, [s["title"] for s in specs]
    return found[0]


def test_the_vendored_uplot_is_the_pinned_npm_package_byte_for_byte() -> None:
    pin = json.loads((ROOT / "package.json").read_text())["devDependencies"]["uplot"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", pin), f"uplot must be pinned exactly, not {pin!r}"
    lock = json.loads((ROOT / "package-lock.json").read_text())
    assert lock["packages"]["node_modules/uplot"]["version"] == pin
    assert f"(v{pin})" in charts.UPLOT_JS.read_text()[:200]  # the file says which version
    package = ROOT / "node_modules" / "uplot"
    if not (ROOT / "node_modules").is_dir():
        pytest.skip("no node_modules here (make bootstrap runs npm ci): the pin is checked")
    assert (package / "package.json").is_file(), "node_modules lacks uplot: run `npm ci`"
    assert json.loads((package / "package.json").read_text())["version"] == pin, "run `npm ci`"
    for name, source in VENDORED.items():
        assert (charts.VENDOR_DIR / name).read_bytes() == (package / source).read_bytes(), (
            f"iofleet/report/vendor/{name} differs from node_modules/uplot/{source}: "
            "copy it again (see iofleet/report/charts.py)"
        )


def test_the_vendored_files_and_charts_js_are_package_data() -> None:
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]["iofleet"]
    shipped = [charts.CHARTS_JS, *(charts.VENDOR_DIR / n for n in VENDORED)]
    for path in shipped:
        rel = path.relative_to(ROOT / "iofleet").as_posix()
        assert any(fnmatch.fnmatch(rel, p) for p in patterns), rel


def test_uplot_is_inlined_once_and_nothing_is_loaded_from_anywhere(tmp_path: Path) -> None:
    page = _page(tmp_path)
    js = charts.UPLOT_JS.read_text()
    assert page.count(js) == 1
    assert page.count(charts.CHARTS_JS.read_text()) == 1
    assert page.count(charts.UPLOT_CSS.read_text()) == 1
    assert "Copyright (c)" in page and "Leon Sorokin" in page  # uPlot's MIT notice travels
    assert not re.search(r"\b(src|href|action|srcset)\s*=", page, re.I)
    assert not re.search(r"@import|url\(\s*['\"]?(?!data:)", page, re.I)
    # the one URL is inside uPlot's license banner comment (never fetched)
    assert re.findall(r"(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}[^\s\"'<>)]*", page, re.I) == [
        f"{BANNER_URL}"
    ]
    assert f"/*! {BANNER_URL} (v" in page


def test_the_chart_data_equals_the_warehouse_numbers(tmp_path: Path) -> None:
    page = _page(tmp_path)
    specs = _specs(page)
    assert page.count('<div class="chart" data-chart=') == len(specs) == 5
    with Warehouse(tmp_path / "warehouse.duckdb") as wh:
        fleet = wh.query("SELECT * FROM fleet_latency WHERE run_id = ?", [RUN])
        requests = wh.query(
            "SELECT time_ns FROM ioping_requests WHERE run_id = ? ORDER BY time_ns", [RUN]
        )
        pcts = wh.query(
            "SELECT metric, p0, p50, p75, p90, p98, p100 FROM cell_percentiles WHERE run_id = ?",
            [RUN],
        )
    # fio: the fleet_latency view, column by column
    fio = _by_title(specs, "completion latency")
    assert fio["unit"] == "ns" and fio["log"] is True
    assert fio["xticks"] == ["P0", "P50", "P75", "P90", "P98", "P99", "P99.9", "P99.99", "P100"]
    assert fio["series"][0]["values"] == [fleet[0][c] for c, _ in charts.FLEET_COLUMNS]
    # ioping: every request of both slots pooled, nearest rank, computed here independently
    times = [r["time_ns"] for r in requests]
    n = len(times)
    assert n == 40
    ladder = [times[max(1, -(-n * p_bp // 10000)) - 1] for p_bp in (0, 5000, 7500, 9000, 9800)]
    ladder += [times[-(-n * p_bp // 10000) - 1] for p_bp in (9900, 9990, 9999, 10000)]
    ioping = _by_title(specs, "ioping (read) - request latency")
    assert ioping["series"][0]["values"] == ladder
    assert ioping["series"][0]["label"].startswith("c000-local-fast-x2-r1")
    # ladders across slots: the cell_percentiles view
    by_metric = {
        r["metric"]: [r[c] for c in ("p0", "p50", "p75", "p90", "p98", "p100")] for r in pcts
    }
    assert _by_title(specs, "- IOPS")["series"][0]["values"] == by_metric["iops"]
    assert _by_title(specs, "- throughput")["series"][0]["values"] == by_metric["bw_bytes"]
    assert _by_title(specs, "wall time")["series"][0]["values"] == by_metric["wall_seconds"]
    assert _by_title(specs, "wall time")["series"][0]["values"] == [
        60.0,
        60.5,
        60.75,
        60.9,
        60.98,
        61.0,
    ]


def test_predicted_vs_measured_charts_carry_the_plan_and_the_slots(tmp_path: Path) -> None:
    specs = _specs(_page(tmp_path, expected=True))
    with Warehouse(tmp_path / "warehouse.duckdb") as wh:
        row = wh.query("SELECT * FROM expected_vs_measured WHERE run_id = ?", [RUN])[0]
    iops = _by_title(specs, "IOPS: predicted vs measured")
    assert iops["points_only"] is True and iops["xticks"] == ["c000-local-fast-x2-r1"]
    assert {s["label"]: s["values"] for s in iops["series"]} == {
        "expected (plan)": [40000.0],
        "P0 slot": [row["iops_p0"]],
        "P50 slot": [row["iops_p50"]],
        "P100 slot": [row["iops_p100"]],
    }
    bw = _by_title(specs, "throughput: predicted vs measured")
    assert bw["series"][0]["values"] == [655360000]
    assert bw["series"][2]["values"] == [row["bw_p50"]]


def test_no_predicted_vs_measured_chart_without_an_expectation(tmp_path: Path) -> None:
    specs = _specs(_page(tmp_path))
    assert not [s for s in specs if "predicted" in s["title"]]


def test_hostile_labels_cannot_close_the_data_script(tmp_path: Path) -> None:
    # given: a cell id (user-chosen storage label) that tries to end the script element
    hostile = '</script><script>alert("x")</script><!--'
    with Warehouse(_warehouse(tmp_path)) as wh:
        data = load_report_data(wh, RUN)
    for row in data.fleet:
        row["cell_id"] = hostile
    # when
    page = render_html(data)
    # then: the block parses and the label comes back intact, never as markup
    assert page.count('<script>alert("x")') == 0
    labels = [s["label"] for spec in _specs(page) for s in spec["series"]]
    assert any(label.startswith(hostile) for label in labels)


def test_script_json_escapes_what_could_end_a_script() -> None:
    text = charts.script_json({"a": "</script><!-- & >"})
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == {"a": "</script><!-- & >"}


def test_a_library_that_would_close_the_element_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.js"
    bad.write_text('var s = "</SCRIPT>";')
    with pytest.raises(RuntimeError, match="cannot be inlined"):
        charts._inline(bad)


def test_number_cells_do_not_wrap() -> None:
    from iofleet.report.html import CSS

    assert re.search(r"td:not\(\.l\), th:not\(\.l\) \{ white-space: nowrap; \}", CSS)
