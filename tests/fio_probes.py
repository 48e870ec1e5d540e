"""The probe job files of tests/data/probes/fio-jobs and what each fio release says.

A probe's name says what fio does with it: `accepted-*` fio reads as written,
`refused-*` fio refuses, `stricter-*` fio accepts but reads other than written (or
fails only when the job runs) and iofleet refuses (docs/decisions.md #42). A
`release-*` probe's verdict depends on the fio release: its expected.json entry lists
the verdict and iofleet's first problem per pinned release (`verdicts`, `problems`);
the others have one `problem` (with the fio 3.33 table).

`verdicts-<release>.json` beside them records what a real fio of that release said
about each probe (scripts/record_fio_verdicts.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PROBES = Path(__file__).resolve().parent / "data" / "probes" / "fio-jobs"
EXPECTED: dict[str, dict[str, Any]] = json.loads((PROBES / "expected.json").read_text())
KINDS = ("accepted", "refused", "stricter")


def verdict(name: str, release: str) -> str:
    """accepted, refused or stricter: what fio `release` and iofleet do with probe `name`."""
    entry = EXPECTED[name]
    if name.startswith("release-"):
        return str(entry["verdicts"][release])
    kind = name.split("-", 1)[0]
    assert kind in KINDS, name
    return kind


def problem(name: str, release: str) -> str | None:
    """iofleet's first problem for probe `name` with the table of fio `release` (the
    `problem` of a probe that is not release-specific is the 3.33 table's)."""
    entry = EXPECTED[name]
    if name.startswith("release-"):
        return entry["problems"][release]
    return entry["problem"]


def recorded(release: str) -> dict[str, Any]:
    """verdicts-<release>.json: a real fio's exit status and first line for each probe."""
    return json.loads((PROBES / f"verdicts-{release}.json").read_text())
