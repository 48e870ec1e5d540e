"""A real `iofleet local` demo report, opened in headless Chromium as a person would:
every chart must draw (uPlot puts a canvas in each chart's div once the page's inline
scripts ran). Needs the `chromium` Debian package (Makefile TEST_TOOLS)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "render-report.py"


def _render(report: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(report)],
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )


@pytest.fixture(scope="module")
def demo_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """examples/local-demo.json, shortened (2 s fio jobs, 20 ioping requests)."""
    tmp = tmp_path_factory.mktemp("chromium")
    doc = json.loads((ROOT / "examples" / "local-demo.json").read_text())
    for workload in doc["workloads"]:
        if "fio" in workload:
            workload["params"].update({"RUNTIME": 2, "SIZE": "8m"})
        if "ioping" in workload:
            workload["ioping"]["count"] = 20
    (tmp / "matrix.json").write_text(json.dumps(doc))
    done = subprocess.run(
        [sys.executable, "-m", "iofleet.cli", "local", "matrix.json", "--out", "demo-out", "-q"],
        cwd=tmp,
        env=dict(os.environ, IOFLEET_CBUILD_FILES="12", PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return tmp / "demo-out" / "report.html"


def test_every_chart_of_a_real_demo_report_draws_in_chromium(demo_report: Path) -> None:
    page = demo_report.read_text()
    charts = len(re.findall(r'<div class="chart" data-chart="\d+"', page))
    assert charts >= 5  # fio latency, ioping, IOPS, throughput and wall-time ladders
    assert "ioping (read) - request latency" in page

    done = _render(demo_report)

    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == f"{charts} drawn of {charts} charts"


def test_the_check_sees_a_page_whose_charts_did_not_draw(demo_report: Path) -> None:
    # given: the same report without uPlot (what a broken inline script would leave)
    broken = demo_report.with_name("broken.html")
    page = demo_report.read_text()
    start = page.index("<script>/*! uPlot")
    broken.write_text(page[:start] + page[page.index("</script>", start) + len("</script>") :])

    done = _render(broken)

    assert done.returncode == 1
    assert done.stdout.strip().startswith("0 drawn of ")
