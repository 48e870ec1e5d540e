"""Fleet totals say the slots ran together only when their fio jobs did: real local
runs of two slots, one where an app before fio holds slot 1 back 4 s (the jobs, 2 s
each, never overlap), one where nothing does.

fleet_totals placed each slot's job at the barrier plus the runtimes of its earlier fio
workloads, so an app or ioping before fio (or fio's file layout) did not move it: the
staggered run was reported as "2.0s of 2.0s" together, its fleet IOPS summed over slots
that never ran at once. The window now ends where fio ended (docs/decisions.md #103)."""

from __future__ import annotations

from pathlib import Path

from tests.integration.localrun import query, run_local, write_matrix


def _run(tmp_path: Path, before: str) -> tuple[float, list[int]]:
    workloads = [
        {"app": {"name": "before", "run": before}},
        {"fio": "latency-4k-qd1-randwrite", "params": {"RUNTIME": 2, "SIZE": "1m"}},
    ]
    done = run_local(tmp_path, write_matrix(tmp_path, workloads, [2]))
    assert done.returncode == 0, done.stderr
    [(overlap,)] = query(tmp_path, "SELECT overlap_s FROM fleet_totals")
    ends = query(tmp_path, "SELECT fio_ended_ms FROM fio_results ORDER BY slot_index")
    return overlap, [e for (e,) in ends]


def test_slots_held_apart_by_an_app_before_fio_are_not_reported_together(tmp_path: Path) -> None:
    overlap, (first, second) = _run(tmp_path, "sleep $((IOFLEET_SLOT*4))")
    # fio's own ends are about the app's 4 s apart, so the 2 s jobs never overlapped
    assert second - first >= 3500
    assert overlap == 0.0


def test_slots_that_ran_fio_at_once_are_reported_together(tmp_path: Path) -> None:
    overlap, (first, second) = _run(tmp_path, "true")
    assert abs(second - first) < 1000
    assert overlap > 1.0  # most of the 2 s
