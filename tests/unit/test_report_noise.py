"""The report's repeat-noise section: repeats pooled per configuration, their spread
shown, and a configuration whose repeats disagree flagged (text, HTML, JSON).

Real DuckDB; the slot and app rows are written here (build times chosen so one
configuration's second repeat is twice as slow as its first)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from iofleet.report.cli import report_command
from iofleet.results.schema import APP_RUNS, RUNS, SLOTS
from iofleet.results.warehouse import Warehouse

RUN = "noise-20261123t120000z"
BUILD_SECONDS = {
    # (storage label, repeat) -> the slots' build times
    ("steady", 1): [100.0, 103.0, 98.0, 101.0, 99.0],
    ("steady", 2): [102.0, 97.0, 100.5, 99.5, 101.5],
    ("shifty", 1): [100.0, 103.0, 98.0, 101.0, 99.0],
    ("shifty", 2): [200.0, 206.0, 196.0, 202.0, 198.0],
}


def write_noise_warehouse(path: Path) -> Path:
    """A DuckDB warehouse at `path` holding RUN: BUILD_SECONDS as slots' app rows."""
    slots, apps = [], []
    for index, ((label, repeat), seconds) in enumerate(sorted(BUILD_SECONDS.items())):
        cell = f"c{index:03d}-{label}-x5-r{repeat}"
        for slot, wall in enumerate(seconds):
            slots.append(
                SLOTS.row(
                    run_id=RUN,
                    cell_id=cell,
                    slot_index=slot,
                    cell_index=index,
                    instance_type="local",
                    storage_label=label,
                    storage_type="local",
                    storage_detail=label,
                    fleet_size=5,
                    repeat=repeat,
                    status="SUCCEEDED",
                )
            )
            apps.append(
                APP_RUNS.row(
                    run_id=RUN,
                    cell_id=cell,
                    slot_index=slot,
                    workload_index=0,
                    app="c-build",
                    phase="run",
                    exit_code=0,
                    wall_seconds=wall,
                )
            )
    with Warehouse(path) as wh:
        wh.insert_rows(RUNS, [RUNS.row(run_id=RUN, matrix_name="noise", mode="local")])
        wh.insert_rows(SLOTS, slots)
        wh.insert_rows(APP_RUNS, apps)
    return path


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    return write_noise_warehouse(tmp_path / "warehouse.duckdb")


def test_text_report_flags_only_the_configuration_whose_repeats_disagree(
    warehouse: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert report_command(warehouse, RUN, "table", None) == 0
    out = capsys.readouterr().out
    section = out[out.index("Repeat noise (1 flagged)") :]
    lines = {line.split()[0]: line for line in section.splitlines() if line.startswith("  s")}
    assert lines["shifty"].rstrip().endswith("DISAGREE")
    assert lines["steady"].rstrip().endswith("agree")
    assert " 2 " in lines["shifty"] and " 10 " in lines["shifty"]  # repeats, slots pooled


def test_html_and_json_carry_the_noise(
    warehouse: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    html = tmp_path / "r.html"
    assert report_command(warehouse, RUN, "json", str(html)) == 0
    doc = json.loads(capsys.readouterr().out)
    by_label = {r["storage_label"]: r for r in doc["repeat_noise"]}
    assert by_label["shifty"]["repeats_disagree"] is True
    assert by_label["steady"]["repeats_disagree"] is False
    assert by_label["shifty"]["n_repeats"] == 2 and by_label["shifty"]["n_slots"] == 10
    # CV of the repeat means: means 100.2 and 200.4
    assert by_label["shifty"]["cv_repeats"] == pytest.approx(
        (abs(200.4 - 100.2) / 2**0.5) / 150.3, rel=1e-6
    )
    page = html.read_text()
    assert "Repeat noise (1 flagged)" in page
    assert page.count("DISAGREE") == 2  # the note and the shifty row


def test_a_run_without_repeats_has_no_noise_rows_and_never_imports_scipy() -> None:
    # `iofleet local` of a one-repeat matrix: scipy.stats costs about a second to import
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from iofleet.results.noise import repeat_noise\n"
        "row = dict(instance_type='local', storage_label='a', storage_type='local',\n"
        "           storage_detail=None, fleet_size=1, metric_source='app', workload_index=0,\n"
        "           workload='b', job=None, direction=None, metric='wall_seconds', unit='s',\n"
        "           run_id='r', repeat=1, value=1.0)\n"
        "assert repeat_noise([row, dict(row, value=2.0)]) == []\n"
        "print('scipy' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "False"


WITHOUT_SCIPY = """
import importlib.abc, runpy, sys

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("numpy", "scipy"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Block())
sys.argv = ["iofleet", *sys.argv[1:]]
runpy.run_module("iofleet.cli", run_name="__main__")
"""


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_without_scipy_the_report_says_why_the_noise_is_missing(
    warehouse: Path, tmp_path: Path, fmt: str
) -> None:
    # given: a Python that cannot import numpy or scipy (as a Lambda without the layer)
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    html = tmp_path / "r.html"
    args = ["report", "--warehouse", str(warehouse), "--run", RUN, "--format", fmt]
    # when: the run with repeats is reported
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_SCIPY, *args, "--html", str(html)],
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    # then: the report is printed, and says in the section's place why it is missing
    assert done.returncode == 0, done.stderr[-2000:]
    reason = "ModuleNotFoundError: No module named 'numpy'"
    if fmt == "json":
        doc = json.loads(done.stdout)
        assert doc["repeat_noise"] is None and doc["repeat_noise_missing"] == reason
    else:
        assert "Repeat noise (not computed): configurations of this run have 2+ " in done.stdout
        assert reason in done.stdout and "DISAGREE" not in done.stdout
    page = html.read_text()
    assert "<h2>Repeat noise (not computed)</h2>" in page and "DISAGREE" not in page
