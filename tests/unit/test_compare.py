"""`iofleet compare` over a real DuckDB warehouse, built by `iofleet import` from real
fio output whose IOPS (and throughput) were edited to plant a known difference."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from statistics import mean

import duckdb
import pytest

from iofleet.cli import main
from iofleet.results.compare import ROW_COLUMNS, Side, compare_rows, parse_selector

FIO = Path(__file__).resolve().parents[1] / "fixtures" / "fio" / "json-randread.json"
PROBES = Path(__file__).resolve().parents[1] / "data" / "probes" / "compare" / "selectors.json"
IOPS_A = [1000.0, 1010.0, 990.0, 1005.0, 995.0, 1002.0]
IOPS_B = [1300.0, 1290.0, 1310.0, 1305.0, 1295.0, 1302.0]


def _files(folder: Path, iops: list[float]) -> list[str]:
    folder.mkdir()
    doc = json.loads(FIO.read_text())
    paths = []
    for i, value in enumerate(iops):
        doc["jobs"][0]["read"]["iops"] = value
        doc["jobs"][0]["read"]["bw_bytes"] = int(value * 4096)
        path = folder / f"slot{i}.json"
        path.write_text(json.dumps(doc))
        paths.append(str(path))
    return paths


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    tmp = tmp_path_factory.mktemp("compare")
    out = tmp / "out"
    assert main(["import", *_files(tmp / "a", IOPS_A), "--out", str(out), "--label", "gp3"]) == 0
    assert main(["import", *_files(tmp / "b", IOPS_B), "--out", str(out), "--label", "io2"]) == 0
    db = duckdb.connect(str(out / "warehouse.duckdb"), read_only=True)
    runs = dict(db.execute("SELECT matrix_name, run_id FROM runs").fetchall())
    db.close()
    return out / "warehouse.duckdb", runs["gp3"], runs["io2"]


def _compare(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(["compare", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def test_json_rows_carry_the_planted_difference(warehouse, capsys) -> None:
    wh, run_a, run_b = warehouse
    rc, out, err = _compare(capsys, "--warehouse", str(wh), run_a, run_b, "--format", "json")
    assert rc == 0, err
    rows = json.loads(out)
    by_metric = {r["metric"]: r for r in rows}
    iops = by_metric["iops"]
    assert iops["a"] == pytest.approx(mean(IOPS_A))
    assert iops["b"] == pytest.approx(mean(IOPS_B))
    assert iops["ratio"] == pytest.approx(mean(IOPS_B) / mean(IOPS_A))
    assert 1.25 < iops["ci_low"] < iops["ratio"] < iops["ci_high"] < 1.35
    assert iops["a_n_slots"] == iops["b_n_slots"] == 6
    assert iops["p_adjusted"] < 0.05
    assert iops["verdict"] == "b_better"
    assert by_metric["bw_bytes"]["verdict"] == "b_better"
    # latency was not edited: identical on both sides
    p50 = by_metric["clat_p50_ns"]
    assert (p50["ratio"], p50["verdict"]) == (1.0, "no_difference")
    assert {r["verdict"] for r in rows} <= {"b_better", "no_difference"}
    for r in rows:
        assert set(ROW_COLUMNS) <= set(r)


def test_swapping_the_sides_flips_the_verdict(warehouse, capsys) -> None:
    wh, run_a, run_b = warehouse
    rc, out, _ = _compare(capsys, "--warehouse", str(wh), run_b, run_a, "--format", "json")
    iops = next(r for r in json.loads(out) if r["metric"] == "iops")
    assert (rc, iops["verdict"]) == (0, "a_better")
    assert iops["ratio"] == pytest.approx(mean(IOPS_A) / mean(IOPS_B))


def test_csv_and_table_hold_the_same_rows(warehouse, capsys) -> None:
    wh, run_a, run_b = warehouse
    _, out_json, _ = _compare(capsys, "--warehouse", str(wh), run_a, run_b, "--format", "json")
    _, out_csv, _ = _compare(capsys, "--warehouse", str(wh), run_a, run_b, "--format", "csv")
    rc, table, _ = _compare(capsys, "--warehouse", str(wh), run_a, run_b)
    rows = json.loads(out_json)
    parsed = list(csv.DictReader(io.StringIO(out_csv)))
    assert [r["metric"] for r in parsed] == [r["metric"] for r in rows]
    assert [r["verdict"] for r in parsed] == [r["verdict"] for r in rows]
    iops_line = next(line for line in table.splitlines() if line.strip().startswith("IOPS"))
    assert "b_better" in iops_line and "1.300 [" in iops_line
    assert f"{len(rows)} comparisons:" in table


def test_selectors_pick_configurations(warehouse, capsys) -> None:
    # two runs, each side pinned by its storage label: same rows as without selectors
    wh, run_a, run_b = warehouse
    rc, out, err = _compare(
        capsys,
        "--warehouse",
        str(wh),
        run_a,
        run_b,
        "--a",
        "storage_label=gp3",
        "--b",
        "storage_label=io2",
        "--format",
        "json",
    )
    assert rc == 0, err
    iops = next(r for r in json.loads(out) if r["metric"] == "iops")
    assert (iops["a_selector"], iops["verdict"]) == ("storage_label=gp3", "b_better")


def _probes() -> list[dict]:
    return json.loads(PROBES.read_text())


@pytest.mark.parametrize("probe", _probes(), ids=lambda p: p["name"])
def test_bad_input_is_one_line_and_exit_2(probe: dict, warehouse, capsys) -> None:
    wh, run_a, run_b = warehouse
    args = [a.replace("RUN_A_ID", run_a).replace("RUN_B_ID", run_b) for a in probe["args"]]
    if probe.get("no_warehouse"):
        args = ["--warehouse", str(wh.parent / "missing.duckdb"), *args]
    else:
        args = ["--warehouse", str(wh), *args]
    rc, out, err = _compare(capsys, *args)
    assert rc == 2
    assert out == ""
    [line] = err.splitlines()
    assert line.startswith(probe["error"]), line


# --- pairing, on slot_values rows made here -------------------------------------------


def _rows(run: str, label: str, fleet: int, repeat: int, values: list[float]) -> list[dict]:
    return [
        {
            "run_id": run,
            "cell_id": f"c-{label}-x{fleet}-r{repeat}",
            "cell_index": 0,
            "instance_type": "m7i.large",
            "storage_label": label,
            "storage_type": "ebs",
            "storage_detail": label,
            "fleet_size": fleet,
            "repeat": repeat,
            "slot_index": i,
            "metric_source": "fio",
            "workload_index": 0,
            "workload": "randread",
            "job": "randread",
            "direction": "read",
            "metric": "iops",
            "unit": "iops",
            "value": v,
        }
        for i, v in enumerate(values)
    ]


def test_configurations_pair_on_the_fields_no_selector_names() -> None:
    # one run: gp3 and io2 at fleet sizes 4 and 8, two repeats each
    rows = []
    for fleet in (4, 8):
        for rep in (1, 2):
            rows += _rows("r", "gp3", fleet, rep, [100.0 + i for i in range(fleet)])
            rows += _rows("r", "io2", fleet, rep, [150.0 + i for i in range(fleet)])
    out = compare_rows(
        rows,
        Side("a", "r", parse_selector("--a", "storage_label=gp3"), "storage_label=gp3"),
        Side("b", "r", parse_selector("--b", "storage_label=io2"), "storage_label=io2"),
    )
    assert [(r["config"], r["a_n_slots"], r["a_n_repeats"]) for r in out] == [
        ("instance_type=m7i.large,fleet_size=4", 8, 2),
        ("instance_type=m7i.large,fleet_size=8", 16, 2),
    ]
    assert [r["verdict"] for r in out] == ["b_better", "b_better"]


def test_an_ambiguous_side_is_refused() -> None:
    from iofleet.errors import ValidationFailed

    rows = _rows("r", "gp3", 4, 1, [1.0] * 4) + _rows("r", "io2", 4, 1, [2.0] * 4)
    rows += _rows("r", "io2", 8, 1, [2.0] * 8)
    with pytest.raises(ValidationFailed) as info:
        compare_rows(
            rows,
            Side("a", "r", {"storage_label": "gp3", "fleet_size": "4"}, ""),
            Side("b", "r", {"storage_label": "io2"}, ""),
        )
    assert info.value.lines() == [
        "--b: selects 2 configurations that differ only in fleet_size; pin fleet_size in --b "
        "(e.g. fleet_size=4)"
    ]


def test_runs_with_nothing_in_common_are_refused_in_one_line(
    tmp_path: Path, warehouse, capsys
) -> None:
    # given a third run that measured another fio job (nothing the others measured)
    wh, run_a, _ = warehouse
    doc = json.loads(FIO.read_text())
    doc["jobs"][0]["jobname"] = "other"
    path = tmp_path / "other.json"
    path.write_text(json.dumps(doc))
    out = tmp_path / "out"
    assert main(["import", str(path), "--out", str(out), "--label", "other"]) == 0
    assert main(["import", *_files(tmp_path / "a", IOPS_A), "--out", str(out), "--label", "a"]) == 0
    db = duckdb.connect(str(out / "warehouse.duckdb"), read_only=True)
    runs = dict(db.execute("SELECT matrix_name, run_id FROM runs").fetchall())
    db.close()
    # when they are compared, in each format
    for fmt in ("table", "json", "csv"):
        rc, stdout, err = _compare(
            capsys,
            "--warehouse",
            str(out / "warehouse.duckdb"),
            runs["a"],
            runs["other"],
            "--format",
            fmt,
        )
        # then one line says why, exit 2, and no empty table ("0 comparisons: ")
        assert (rc, stdout) == (2, ""), (fmt, stdout)
        assert err.splitlines() == [
            "RUN_B: measured no workload, job, direction and metric that the A side measured: "
            "nothing to compare"
        ]
