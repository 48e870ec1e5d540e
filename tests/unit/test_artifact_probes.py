"""The odd-artifact probe set (tests/data/probes/artifacts/index.json): each probe is
written into a good raw tree and ingested twice into a real DuckDB warehouse.

A refused probe becomes exactly one `ingest_errors` row whose reason names the field,
and every other artifact's rows load as without it; an accepted probe loads with no
error. Nothing raises (a raise is a crash), and the second ingest into the same
warehouse gives the same rows (a poisoned --out is never stuck).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from iofleet.results.ingest import loadable_text
from iofleet.results.schema import TABLES
from iofleet.results.warehouse import Warehouse
from tests.unit import rawtree

PROBES_DIR = Path(__file__).resolve().parents[1] / "data" / "probes" / "artifacts"
PROBES: list[dict[str, Any]] = json.loads((PROBES_DIR / "index.json").read_text())
RUN = "demo-20261121t051200z"


def _counts(wh: Warehouse) -> dict[str, int]:
    return {t.name: wh.query(f"SELECT count(*) AS n FROM {t.name}")[0]["n"] for t in TABLES}


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> dict[str, int]:
    raw = tmp_path_factory.mktemp("baseline") / "raw"
    rawtree.write_run(raw, RUN, slots=1)
    with Warehouse(":memory:") as wh:
        wh.ingest_dir(raw)
        return _counts(wh)


def test_every_probe_file_is_listed_once() -> None:
    listed = [p["file"] for p in PROBES]
    on_disk = sorted(p.name for p in PROBES_DIR.iterdir() if p.name != "index.json")
    assert sorted(listed) == on_disk and len(set(listed)) == len(listed)


@pytest.mark.parametrize("probe", PROBES, ids=[p["file"] for p in PROBES])
def test_odd_artifact_is_refused_with_its_reason_or_loaded(
    tmp_path: Path, baseline: dict[str, int], probe: dict[str, Any]
) -> None:
    # given a good run and the probe at its place in the raw layout
    raw = tmp_path / "raw"
    rawtree.write_run(raw, RUN, slots=1)
    relpath = probe["path"].format(run=RUN)
    target = os.path.join(os.fsencode(raw), os.fsencode(relpath))
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target, "wb") as out:
        out.write((PROBES_DIR / probe["file"]).read_bytes())
    with Warehouse(":memory:") as wh:
        for _ in range(2):  # the second ingest into the same warehouse works as the first
            # when
            stats = wh.ingest_dir(raw)
            # then
            counts = _counts(wh)
            errors = wh.query("SELECT object_key, reason FROM ingest_errors")
            if probe["expect"] == "refused":
                (error,) = errors
                assert error["object_key"] == loadable_text(relpath)
                assert probe["reason"] in error["reason"], error["reason"]
                assert "\n" not in error["reason"]
                assert stats.errors == 1
                assert counts == {**baseline, "ingest_errors": 1}
            else:
                assert errors == []
                grown = probe.get("tables") or [probe.get("table")]
                for name, n in counts.items():
                    assert n > baseline[name] if name in grown else n == baseline[name], name
