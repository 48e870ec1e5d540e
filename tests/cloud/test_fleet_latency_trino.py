"""The fleet_latency view on Trino (Athena's engine) reproduces fio's own percentiles.

The json+ bins of a real fio 3.33 run of 1,000 reads go into a Trino memory-catalog
table as one slot's histogram row (its bins as two arrays, as Athena stores them); the
views are created from iofleet/results/sql/ unchanged (fio_latency_bins unnests them). With
1,000 samples fio's p99.9 is the 1,000th sample (99.9 as a double is a hair above
99.9), which the view must give too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from iofleet.results.ingest import fold_bin_rows
from iofleet.results.schema import FIO_LATENCY_BINS, FIO_LATENCY_HISTOGRAMS
from tests.cloud.test_start_skew_trino import load_planted

FIXTURE = (
    Path(__file__).resolve().parents[1]
    / "fixtures"
    / "fio"
    / "versions"
    / "fio-3.33-jsonplus-1000-reads.json"
)
COLUMNS = {
    "50.000000": "p50_ns",
    "90.000000": "p90_ns",
    "99.000000": "p99_ns",
    "99.900000": "p99_9_ns",
    "99.990000": "p99_99_ns",
}


def test_fleet_latency_on_trino_gives_fios_percentiles(trino_server: Any, unique: str) -> None:
    # given the bins of one real fio run, as one slot's rows
    clat = json.loads(FIXTURE.read_text())["jobs"][0]["read"]["clat_ns"]
    assert sum(clat["bins"].values()) == 1000
    rows = [
        FIO_LATENCY_BINS.row(
            run_id="r",
            cell_id="c000",
            slot_index=0,
            workload_index=0,
            workload="w",
            job="a",
            job_index=0,
            direction="read",
            bin_ns=int(value),
            count=count,
        )
        for value, count in clat["bins"].items()
    ]
    # stored as the warehouse and Athena store them: one histogram row, two arrays
    histograms = fold_bin_rows(rows)
    assert len(histograms) == 1
    trino = load_planted(
        trino_server, f"latency_{unique}", {FIO_LATENCY_HISTOGRAMS.name: histograms}
    )
    # when
    (got,) = trino.execute(f"SELECT {', '.join(COLUMNS.values())} FROM fleet_latency").dicts()
    # then every percentile is the figure fio printed for those bins
    assert got == {column: clat["percentile"][key] for key, column in COLUMNS.items()}
