"""Fleet totals say the slots ran together only when their fio jobs did: real local
runs of two slots, one where an app before fio holds slot 1 back 4 s (the jobs, 2 s
each, never overlap), one where nothing does.

fleet_totals placed each slot's job at the barrier plus the runtimes of its earlier fio
workloads, so an app or ioping before fio (or fio's file layout) did not move it: the
staggered run was reported as "2.0s of 2.0s" together, its fleet IOPS summed over slots
that never ran at once. The window now ends where fio ended (docs/decisions.md #103).
fio 3.36 (Ubuntu 24.04's, on the fleet) also says when each job began (job_start): two
slots of its real output, a workload of two stonewall groups, are placed by it (#115)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.integration.localrun import iofleet, query, run_local, write_matrix

VERSIONS = Path(__file__).resolve().parents[1] / "fixtures" / "fio" / "versions"


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


def test_each_group_of_fio_3_36_is_placed_where_fio_began_it(tmp_path: Path) -> None:
    # given fio 3.36's output of two slots started 0.5 s apart, each job a then b (stonewall)
    slots = [VERSIONS / f"fio-3.36-json-two-groups-slot{i}.json" for i in range(2)]
    done = iofleet(tmp_path, "import", *map(str, slots), "--out", "out", "--label", "two", "-q")
    assert done.returncode == 0, done.stderr
    # then each job's window is [job_start, + its runtime] on each slot, from fio's own
    # figures (before: two groups were placed from a barrier an import has not, unknown)
    want = {}
    for name in ("a", "b"):
        spans = []
        for path in slots:
            (job,) = [j for j in json.loads(path.read_text())["jobs"] if j["jobname"] == name]
            spans.append((job["job_start"], job["job_start"] + job["read"]["runtime"]))
        start, end = max(s for s, _ in spans), min(e for _, e in spans)
        want[name] = (round((end - start) / 1000, 3), start * 1000)
    rows = query(tmp_path, "SELECT job, overlap_s, window_start_us FROM fleet_totals ORDER BY job")
    assert {job: (overlap, start) for job, overlap, start in rows} == want
    assert 0.4 < want["a"][0] < 0.6 and 0.4 < want["b"][0] < 0.6  # half of each 1 s job
