"""What the shipped job files (fio-jobs/*.fio) compute did not move when iofleet's three
readers of job text and two size parsers became one (iofleet/plan/jobtext.py,
docs/decisions.md #47), except where the old readers were wrong.

tests/data/shipped-job-readings.json was written by the old readers (commit b151705):
for every shipped job, with its defaults and with SIZE set to a few spellings, the
JobProfiles (ceilings, room check, EFS layout cost), the raw-device layout on a 1 TiB
device, the Mountpoint problems and the Mountpoint traffic. Every entry is the same now,
but for the SIZE spellings the old parsers refused although fio reads them (checked
with fio in tests/integration/test_jobtext_real.py): `010` is 10 bytes (fio's strtoll
is base 10), `4ki` is 4096 (fio's unit is the `k`; only `kib` is the other base).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from iofleet.plan import expect, fiojobs, mountpoint

OLD = json.loads(
    (Path(__file__).resolve().parents[1] / "data" / "shipped-job-readings.json").read_text()
)
SIZES = ["4k", "010", "4ki", "4KiB", "1g", "0x1000", "256m"]
# the SIZE values the old readers refused ("size not countable", no raw layout), with
# the bytes fio reads from them
NOW_READ = {"010": 10, "4ki": 4096}


def _readings(name: str, params: dict[str, str]) -> dict[str, Any]:
    job = fiojobs.get_job(name)
    # (startdelay_s came after the old readers: the time limit's check, decision 81)
    profiles = [
        {
            **{k: v for k, v in dataclasses.asdict(p).items() if k != "startdelay_s"},
            "file_bytes": p.file_bytes,
            "bytes_per_io": p.bytes_per_io,
        }
        for p in expect.job_profiles(name, params)
    ]
    raw: Any = fiojobs.raw_plan_problem(name, params, 1 << 40)
    if raw is None:
        env = {**fiojobs.plan_env(job, params), "TARGET": "/mnt/iofleet"}
        raw = dataclasses.asdict(fiojobs.raw_layout(job, env, 1 << 40))
    w, r, f, notes = mountpoint.fio_traffic([{"kind": "fio", "name": name, "params": params}])
    return {
        "profiles": profiles,
        "raw": raw,
        "mountpoint": mountpoint.fio_workload_problems(name, params),
        "mountpoint_traffic": [w, r, f, notes],
    }


def _cases() -> list[tuple[str, dict[str, str]]]:
    out: list[tuple[str, dict[str, str]]] = []
    for job in fiojobs.list_jobs():
        out.append((job.name, {}))
        if "SIZE" in job.params:
            out += [(job.name, {"SIZE": s}) for s in SIZES]
    return out


def _key(name: str, params: dict[str, str]) -> str:
    return name + "".join(f" {k}={v}" for k, v in params.items())


def test_every_shipped_job_is_covered() -> None:
    assert sorted(_key(*c) for c in _cases()) == sorted(OLD)


@pytest.mark.parametrize(("name", "params"), _cases(), ids=lambda c: str(c))
def test_a_shipped_job_computes_what_it_did(name: str, params: dict[str, str]) -> None:
    old, new = OLD[_key(name, params)], json.loads(json.dumps(_readings(name, params)))
    # fields the old readers did not have: the files of a filesize= job, where I/O starts
    # in each file (offset=, offset_increment=, decision 101) and nrfiles: no shipped job
    # sets any of them
    for key, default in (
        ("layout_bytes", None),
        ("offset_bytes", 0),
        ("offset_increment", 0),
        ("nrfiles", 1),
        ("ramp_s", 0.0),
        ("waits_for", None),
        ("io_limited", False),
        ("loops", 1),
        ("think_s", 0.0),
        ("think_blocks", 1),
    ):
        assert [p.pop(key) for p in new["profiles"]] == [default] * len(new["profiles"])
    size = params.get("SIZE")
    if size not in NOW_READ:
        assert new == old
        return
    # the old readers refused the size; every figure now uses the bytes fio reads
    fio_bytes = NOW_READ[size]
    assert [p["size_bytes"] for p in new["profiles"]] == [fio_bytes] * len(new["profiles"])
    assert [p["file_bytes"] for p in new["profiles"]] == [
        fio_bytes * p["numjobs"] for p in new["profiles"]
    ]
    unchanged = ("size_bytes", "file_bytes")
    for o, n in zip(old["profiles"], new["profiles"], strict=True):
        assert {k: v for k, v in o.items() if k not in unchanged} == {
            k: v for k, v in n.items() if k not in unchanged
        }
    assert "not countable" not in json.dumps(new["mountpoint_traffic"])
    if isinstance(new["raw"], dict):
        assert new["raw"]["region_bytes"] == 4096  # one whole block holds the region
