"""ingest.rows_for_artifact: raw artifact -> table rows, errors as rows."""

from __future__ import annotations

import json

import pytest

from iofleet.results.ingest import (
    BIN_BLOCK_COLUMNS,
    artifact_kind,
    expand_bin_blocks,
    fold_bin_rows,
    histogram_rows,
    merge_slot_rows,
    rows_and_bin_blocks,
    rows_for_artifact,
    run_id_of,
)
from iofleet.results.parsers.fio import parse_fio
from iofleet.results.parsers.ioping import parse_ioping
from iofleet.results.schema import BY_NAME, FIO_LATENCY_BINS, FIO_LATENCY_HISTOGRAMS, SLOTS
from tests.unit import rawtree

RUN = "demo-20261121t051200z"
CELL = "c000-local-fast-x2-r1"
SLOT_DIR = f"{RUN}/{CELL}/slot-0003"


def _only_error(rows: dict) -> dict:
    assert list(rows) == ["ingest_errors"]
    (err,) = rows["ingest_errors"]
    return err


def test_every_row_has_exactly_its_tables_columns() -> None:
    rows = rows_for_artifact(f"{SLOT_DIR}/w00-fio-randread.json", rawtree.FIO_JSONPLUS.read_text())
    for table, table_rows in rows.items():
        for row in table_rows:
            assert tuple(row) == BY_NAME[table].column_names


def test_run_json_gives_one_runs_row() -> None:
    rows = rows_for_artifact(f"{RUN}/run.json", json.dumps(rawtree.run_doc(RUN)))
    (row,) = rows["runs"]
    assert row["run_id"] == RUN
    assert (row["matrix_name"], row["mode"], row["status"], row["total_instances"]) == (
        "demo",
        "local",
        "SUCCEEDED",
        2,
    )
    assert row["started_at"] == "2026-11-21 05:12:00.000000"
    assert json.loads(row["matrix_json"])["name"] == "demo"


def test_run_json_whose_run_id_disagrees_with_its_folder_is_an_ingest_error() -> None:
    err = _only_error(rows_for_artifact(f"{RUN}/run.json", json.dumps(rawtree.run_doc("other"))))
    assert err["run_id"] == RUN
    assert "does not match" in err["reason"]


def test_a_backslash_is_part_of_a_name_not_a_separator() -> None:
    # a run folder named "a\\b" (a name Linux and S3 allow) is run "a\\b", its rows and
    # its errors alike: the id the warehouse deletes the run's rows by (run_id_of)
    run = "a\\b"
    (row,) = rows_for_artifact(f"{run}/run.json", json.dumps(rawtree.run_doc(run)))["runs"]
    err = _only_error(rows_for_artifact(f"{run}/{CELL}/slot-0000/w00-fio-x.json", "{"))
    assert row["run_id"] == err["run_id"] == run_id_of(f"{run}/run.json") == run
    # and a folder "a\\c000-..." is no cell folder of run "a"
    err = _only_error(rows_for_artifact(f"{RUN}\\{CELL}/slot-0000/manifest.json", "{}"))
    assert err["run_id"] == f"{RUN}\\{CELL}" and "not a known artifact path" in err["reason"]


def test_manifest_and_slot_json_fold_into_one_slots_row() -> None:
    # given
    cell = rawtree.cell_doc()
    manifest = rows_for_artifact(
        f"{SLOT_DIR}/manifest.json", json.dumps(rawtree.manifest_doc(RUN, cell, 3))
    )["slots"]
    final = rows_for_artifact(
        f"{SLOT_DIR}/slot.json", json.dumps(rawtree.slot_doc("FAILED", 1, "w00 fio: boom"))
    )["slots"]
    # when
    (row,) = merge_slot_rows(manifest + final)
    # then
    assert (row["cell_id"], row["slot_index"], row["cell_index"], row["fleet_size"]) == (
        "c000-local-fast-x2-r1",
        3,
        0,
        2,
    )
    assert (row["storage_label"], row["hostname"], row["cpus"], row["target_fstype"]) == (
        "local-fast",
        "box",
        2,
        "ext4",
    )
    assert (row["status"], row["exit_code"], row["error"]) == ("FAILED", 1, "w00 fio: boom")
    assert row["started_at"] == "2026-11-21 05:12:01.000000"  # slot.json is the later word
    assert row["finished_at"] == "2026-11-21 05:13:01.000000"


def test_manifest_of_a_block_target_gives_the_volume_id() -> None:
    doc = {**rawtree.manifest_doc(RUN, rawtree.cell_doc(), 3), "target_kind": "block"}
    doc["target_volume_id"] = "vol-0123456789abcdef0"

    (row,) = rows_for_artifact(f"{SLOT_DIR}/manifest.json", json.dumps(doc))["slots"]

    assert row["volume_id"] == "vol-0123456789abcdef0"


def test_manifest_of_a_directory_target_has_no_volume_id() -> None:
    doc = rawtree.manifest_doc(RUN, rawtree.cell_doc(), 3)

    (row,) = rows_for_artifact(f"{SLOT_DIR}/manifest.json", json.dumps(doc))["slots"]

    assert row["volume_id"] is None


def test_slot_json_without_an_error_line_names_the_failed_workloads() -> None:
    doc = rawtree.slot_doc("FAILED", 1, None)
    doc["workloads"] = [
        {"index": 0, "kind": "fio", "name": "randread", "status": "SUCCEEDED", "error": None},
        {"index": 1, "kind": "app", "name": "c-build", "status": "FAILED", "error": "exit 3"},
    ]
    (row,) = rows_for_artifact(f"{SLOT_DIR}/slot.json", json.dumps(doc))["slots"]
    assert row["error"] == "w01 app c-build: exit 3"


def test_fio_jsonplus_gives_results_and_bins_keyed_by_the_path() -> None:
    text = rawtree.FIO_JSONPLUS.read_text()
    parsed = parse_fio(text)
    rows = rows_for_artifact(f"{SLOT_DIR}/w04-fio-randread.json", text)
    assert len(rows["fio_results"]) == len(parsed.records) > 0
    assert len(rows["fio_latency_histograms"]) == len(parsed.histograms) > 0
    assert sum(len(h["bins_ns"]) for h in rows["fio_latency_histograms"]) == len(parsed.bins)
    for row in rows["fio_results"] + rows["fio_latency_histograms"]:
        assert (row["run_id"], row["cell_id"], row["slot_index"]) == (
            RUN,
            "c000-local-fast-x2-r1",
            3,
        )
        assert (row["workload_index"], row["workload"]) == (4, "randread")
    counted = sum(sum(h["counts"]) for h in rows["fio_latency_histograms"])
    assert counted == sum(b["count"] for b in parsed.bins)


def test_truncated_fio_output_is_one_ingest_error_row() -> None:
    text = (rawtree.FIXTURES / "fio" / "truncated.json").read_text()
    err = _only_error(rows_for_artifact(f"{SLOT_DIR}/w00-fio-randread.json", text))
    assert err["object_key"] == f"{SLOT_DIR}/w00-fio-randread.json"
    assert err["reason"].startswith("fio output:")
    assert "\n" not in err["reason"]


def test_ioping_gives_one_row_per_timed_request() -> None:
    text = rawtree.IOPING_READ.read_text()
    rows = rows_for_artifact(f"{SLOT_DIR}/w01-ioping.json", text)["ioping_requests"]
    assert [r["time_ns"] for r in rows] == [r["time_ns"] for r in parse_ioping(text).requests]
    assert {r["workload_index"] for r in rows} == {1}


def test_truncated_ioping_output_is_an_ingest_error() -> None:
    text = (rawtree.FIXTURES / "ioping" / "truncated.json").read_text()
    err = _only_error(rows_for_artifact(f"{SLOT_DIR}/w01-ioping.json", text))
    assert err["reason"].startswith("ioping output:")


@pytest.mark.parametrize(
    ("name", "fixture", "tool"),
    [
        ("void-w04-fio-randread.json", rawtree.FIO_JSONPLUS, "fio"),
        ("void-w01-ioping.json", rawtree.IOPING_READ, "ioping"),
    ],
)
def test_output_the_agent_voided_loads_no_rows_and_says_why_once(
    name: str, fixture: object, tool: str
) -> None:
    # given well-formed output under the name the agent gives output whose figures are not
    # about the target (iofleet.agent.slot.VOID_PREFIX)
    text = fixture.read_text()  # type: ignore[attr-defined]
    # then it is one ingest_errors row, no figure in any table
    err = _only_error(rows_for_artifact(f"{SLOT_DIR}/{name}", text))
    assert err["object_key"] == f"{SLOT_DIR}/{name}"
    assert err["reason"].startswith(
        f"{tool} output of workload {int(name[6:8])} voided by its agent"
    )
    assert artifact_kind(f"{SLOT_DIR}/{name}") == "void"
    assert artifact_kind(f"{SLOT_DIR}/{name.removeprefix('void-')}") == tool


def test_populate_timing_has_no_slot_index() -> None:
    rel = f"{RUN}/c000-local-fast-x2-r1/populate/w02-app-c-build.json"
    (row,) = rows_for_artifact(rel, json.dumps(rawtree.app_doc("populate", 12.5)))["app_runs"]
    assert (row["slot_index"], row["phase"], row["wall_seconds"], row["app"]) == (
        None,
        "populate",
        12.5,
        "c-build",
    )


def test_malformed_manifest_is_an_ingest_error_not_an_exception() -> None:
    err = _only_error(rows_for_artifact(f"{SLOT_DIR}/manifest.json", '{"cell": '))
    assert err["reason"].startswith("manifest.json: not valid JSON")


def test_a_path_outside_the_raw_layout_is_an_ingest_error() -> None:
    assert artifact_kind(f"{RUN}/notes/readme.json") is None
    err = _only_error(rows_for_artifact(f"{RUN}/notes/readme.json", "{}"))
    assert "not a known artifact path" in err["reason"]


def test_the_same_artifact_twice_gives_identical_rows() -> None:
    text = rawtree.FIO_JSONPLUS.read_text()
    first = rows_for_artifact(f"{SLOT_DIR}/w00-fio-randread.json", text)
    second = rows_for_artifact(f"{SLOT_DIR}/w00-fio-randread.json", text)
    assert first == second


def test_bin_block_columns_are_the_latency_bin_columns_before_bin_and_count() -> None:
    assert (*BIN_BLOCK_COLUMNS, "bin_ns", "count") == FIO_LATENCY_BINS.column_names
    assert (*BIN_BLOCK_COLUMNS, "bins_ns", "counts") == FIO_LATENCY_HISTOGRAMS.column_names


def test_bin_blocks_are_the_histogram_rows_and_fold_back_from_bin_rows() -> None:
    # given a json+ output with two jobs
    text = (rawtree.FIXTURES / "fio" / "jsonplus-two-jobs.json").read_text()
    relpath = f"{SLOT_DIR}/w00-fio-randread.json"
    rows, blocks = rows_and_bin_blocks(relpath, text)
    assert blocks is not None
    histograms = rows_for_artifact(relpath, text)["fio_latency_histograms"]
    # then one histogram row per block, bins ascending, as many values as counts
    assert histogram_rows(blocks) == histograms and len(histograms) == len(blocks) > 1
    for row in histograms:
        assert row["bins_ns"] == sorted(set(row["bins_ns"]))
        assert len(row["bins_ns"]) == len(row["counts"]) > 0
        assert FIO_LATENCY_HISTOGRAMS.row_problem(row) is None
    # and the per-bin rows (the fio_latency_bins view's shape) fold back into them
    assert fold_bin_rows(expand_bin_blocks(blocks)) == histograms


def test_bin_blocks_expand_to_the_bin_rows_in_order() -> None:
    # given a json+ output with two jobs
    text = (rawtree.FIXTURES / "fio" / "jsonplus-two-jobs.json").read_text()
    relpath = f"{SLOT_DIR}/w00-fio-randread.json"
    # when its bins are kept as blocks
    rows, blocks = rows_and_bin_blocks(relpath, text)
    # then the blocks are exactly the bin rows rows_for_artifact gives
    assert blocks is not None and len(blocks) > 1
    assert list(rows) == ["fio_results"]
    assert expand_bin_blocks(blocks) == [
        {**{c: h[c] for c in BIN_BLOCK_COLUMNS}, "bin_ns": value, "count": count}
        for h in rows_for_artifact(relpath, text)["fio_latency_histograms"]
        for value, count in zip(h["bins_ns"], h["counts"], strict=True)
    ]


def test_bin_blocks_are_none_for_other_artifacts_and_errors() -> None:
    bad = (rawtree.FIXTURES / "fio" / "truncated.json").read_text()
    assert rows_and_bin_blocks(f"{SLOT_DIR}/w00-fio-randread.json", bad)[1] is None
    assert rows_and_bin_blocks(f"{SLOT_DIR}/slot.json", json.dumps({"status": "ok"}))[1] is None


def test_barrier_instants_and_clock_status_reach_the_slots_row() -> None:
    # given a manifest with the clock at start and a slot.json with the barrier record
    # and the clock read when the slot passed
    manifest = rawtree.manifest_doc(RUN, rawtree.cell_doc(), 3)
    manifest["clock"] = {"synced": False, "max_error_us": 16_000_000, "est_error_us": 16_000_000}
    final = rawtree.slot_doc()
    final.update(
        barrier_released_at="2026-11-21T05:12:01.250000Z",
        barrier_passed_at="2026-11-21T05:12:01.250037Z",
        barrier_late_s=0.000125,
        clock={"synced": True, "max_error_us": 1500, "est_error_us": 42},
    )
    # when
    (row,) = merge_slot_rows(
        rows_for_artifact(f"{SLOT_DIR}/manifest.json", json.dumps(manifest))["slots"]
        + rows_for_artifact(f"{SLOT_DIR}/slot.json", json.dumps(final))["slots"]
    )
    # then the instants keep their microseconds, and the clock at the pass is the later word
    assert row["barrier_released_at"] == "2026-11-21 05:12:01.250000"
    assert row["barrier_passed_at"] == "2026-11-21 05:12:01.250037"
    assert (
        row["barrier_passed_us"] == 1_795_237_921_250_037
    )  # date -d 2026-11-21T05:12:01Z +%s, then .250037
    assert row["barrier_late_us"] == 125
    assert (row["clock_synced"], row["clock_max_error_us"], row["clock_est_error_us"]) == (
        True,
        1500,
        42,
    )


def test_a_slot_that_never_passed_the_barrier_has_no_instants() -> None:
    doc = {**rawtree.slot_doc("FAILED", 1, "start barrier timed out"), "barrier_passed_at": None}

    (row,) = rows_for_artifact(f"{SLOT_DIR}/slot.json", json.dumps(doc))["slots"]

    assert row["barrier_passed_at"] is None and row["barrier_passed_us"] is None
    assert row["clock_synced"] is None


@pytest.mark.parametrize(
    ("passed_at", "epoch_us"),
    [
        ("2026-11-21T05:12:01.250037Z", 1_795_237_921_250_037),
        ("2026-11-21T07:12:01.250037+02:00", 1_795_237_921_250_037),  # an offset, same instant
        ("1970-01-01T00:00:00Z", 0),
        ("1969-12-31T23:59:59.999999Z", -1),
        ("0001-01-01T00:00:00Z", -62_135_596_800_000_000),
        ("9999-12-31T23:59:59.999999Z", 253_402_300_799_999_999),
        ("yesterday", None),
        ("", None),
        (1795237921.25, None),  # a number is not the agent's spelling: no exact instant
        (None, None),
    ],
)
def test_barrier_pass_instant_is_exact_or_null_never_an_ingest_error(
    passed_at: object, epoch_us: int | None
) -> None:
    doc = {**rawtree.slot_doc(), "barrier_passed_at": passed_at}

    rows = rows_for_artifact(f"{SLOT_DIR}/slot.json", json.dumps(doc))

    (row,) = rows["slots"]
    assert row["barrier_passed_us"] == epoch_us


def test_the_plans_cell_cost_reaches_cell_costs() -> None:
    doc = rawtree.run_doc(RUN)
    doc["plan"] = {
        "cells": [
            {
                "cell_id": "c000",
                "estimated_cost_usd": 1.25,
                "slot_seconds": 900.0,
                "cost": {
                    "complete": False,
                    "items": [
                        {"item": "ebs gp3 storage", "unit_usd": 0.08},
                        {"item": "ec2 m6i.large", "unit_usd": 0.096},
                    ],
                },
            },
            {"cell_id": "c001", "estimated_cost_usd": 0.0},  # a local cell
            {"cell_id": "c002"},  # no estimate: no row
        ]
    }
    rows = rows_for_artifact(f"{RUN}/run.json", json.dumps(doc))["cell_costs"]
    assert [(r["cell_id"], r["estimated_cost_usd"]) for r in rows] == [
        ("c000", 1.25),
        ("c001", 0.0),
    ]
    assert (rows[0]["slot_seconds"], rows[0]["instance_hour_usd"], rows[0]["cost_complete"]) == (
        900.0,
        0.096,
        False,
    )


def test_the_manifests_iofleet_version_reaches_the_slots_row() -> None:
    from iofleet import __version__
    from iofleet.agent.manifest import system_info

    doc = rawtree.manifest_doc(RUN, rawtree.cell_doc(), 3)
    doc["system"] = {**doc.get("system", {}), **system_info()}
    (row,) = rows_for_artifact(f"{SLOT_DIR}/manifest.json", json.dumps(doc))["slots"]
    assert row["iofleet_version"] == __version__


def test_slot_error_line_gains_the_reasons_of_every_later_failed_workload() -> None:
    doc = rawtree.slot_doc("FAILED", 1, "2 of 3 workloads did not succeed; first: workload 0 ...")
    doc["workloads"] = [
        {"index": 0, "kind": "fio", "name": "randread", "status": "FAILED", "error": "fio exit 1"},
        {"index": 1, "kind": "ioping", "name": "ioping", "status": "SUCCEEDED", "error": None},
        {"index": 2, "kind": "app", "name": "c-build", "status": "SKIPPED", "error": "time limit"},
    ]
    (row,) = rows_for_artifact(f"{SLOT_DIR}/slot.json", json.dumps(doc))["slots"]
    assert row["error"] == (
        "2 of 3 workloads did not succeed; first: workload 0 ...; then w02 app c-build: time limit"
    )


def test_a_slot_level_error_is_not_repeated_per_skipped_workload() -> None:
    doc = rawtree.slot_doc("FAILED", 130, "slot interrupted by a signal")
    doc["workloads"] = [
        {"index": i, "kind": "fio", "name": "w", "status": "SKIPPED", "error": "slot interrupted"}
        for i in range(3)
    ]
    (row,) = rows_for_artifact(f"{SLOT_DIR}/slot.json", json.dumps(doc))["slots"]
    assert row["error"] == "slot interrupted by a signal"


def test_manifest_host_distro_and_release_land_in_the_slots_row() -> None:
    doc = {**rawtree.manifest_doc(RUN, rawtree.cell_doc(), 3)}
    doc.update(distro="ubuntu", distro_release="22.04")

    (row,) = rows_for_artifact(f"{SLOT_DIR}/manifest.json", json.dumps(doc))["slots"]

    assert (row["distro"], row["distro_release"]) == ("ubuntu", "22.04")
    # appended: every column the slots table had before keeps its position
    assert list(SLOTS.column_names[-3:]) == ["distro", "distro_release", "fio_jobs"]


def test_the_planned_job_texts_land_in_the_slots_row() -> None:
    # each fio workload's job_sha256 (the plan's, in the payload the manifest keeps)
    doc = rawtree.manifest_doc(RUN, rawtree.cell_doc(), 3)
    doc["workloads"] = [
        {"kind": "fio", "name": "a", "params": {}, "job_sha256": "a" * 64},
        {"kind": "ioping", "count": 2},
        {"kind": "fio", "name": "b", "params": {}, "job_sha256": "0123456789abcdef" * 4},
        {"kind": "fio", "name": "c", "params": {}},  # a payload without one
        {"kind": "fio", "name": "d", "job_sha256": "not hex"},
    ]
    (row,) = rows_for_artifact(f"{SLOT_DIR}/manifest.json", json.dumps(doc))["slots"]
    assert row["fio_jobs"] == f"w00={'a' * 16},w02=0123456789abcdef"
    doc["workloads"] = [{"kind": "fio", "name": "c", "params": {}}]
    (row,) = rows_for_artifact(f"{SLOT_DIR}/manifest.json", json.dumps(doc))["slots"]
    assert row["fio_jobs"] is None


def test_a_manifest_from_before_the_host_fields_loads_with_nulls() -> None:
    doc = rawtree.manifest_doc(RUN, rawtree.cell_doc(), 3)

    (row,) = rows_for_artifact(f"{SLOT_DIR}/manifest.json", json.dumps(doc))["slots"]

    assert (row["distro"], row["distro_release"]) == (None, None)
