"""iofleet's fio option tables against what the real fio of each release said.

tests/data/probes/fio-jobs/verdicts-<release>.json records, for every probe job file,
the exit status and first line of `fio --parse-only` of that real release: fio 3.28 and
3.36 (what Ubuntu 22.04 and 24.04 install on the fleet) built from their git tags, and
Debian 12's fio 3.33 (scripts/record_fio_verdicts.py says how). With no fio needed,
the check with each release's table must agree with that release's fio: it accepts
what fio accepts and refuses what fio refuses; it refuses what fio accepts only for
the documented `stricter-*` probes, where fio reads something other than what is
written (docs/decisions.md #42). The `release-*` probes use what fio added between
3.28 and 3.36, so the tables are shown to differ exactly where the releases do.
"""

from __future__ import annotations

import hashlib
from itertools import permutations

import pytest

from iofleet.plan import fioopts
from tests.fio_probes import EXPECTED, PROBES, problem, recorded, verdict

RECORDED = tuple(sorted(p.stem.removeprefix("verdicts-") for p in PROBES.glob("verdicts-*.json")))


def _ours(name: str, release: str) -> list[str]:
    """iofleet's problems with probe `name` for fio `release` (probe directory left out)."""
    try:
        found = [p.text() for p in fioopts.check_job_file(PROBES / f"{name}.fio", {}, release)]
    except fioopts.JobTextError as exc:
        found = [str(exc)]
    return [text.replace(f"{PROBES}/", "") for text in found]


def _agrees(name: str, table: str, fio: str) -> bool:
    """Does the check with `table`'s table agree with what real fio `fio` said?"""
    fio_accepts = recorded(fio)["probes"][name]["exit"] == 0
    refused = bool(_ours(name, table))
    if fio_accepts and refused:
        return verdict(name, fio) == "stricter"
    return fio_accepts != refused


def test_every_pinned_table_has_a_real_fios_verdicts() -> None:
    assert RECORDED == fioopts.RELEASES
    for release in RECORDED:
        assert recorded(release)["fio"] == f"fio-{release}"


@pytest.mark.parametrize("release", RECORDED)
def test_the_verdicts_are_of_these_probe_files(release: str) -> None:
    # a probe added or edited since its fio was asked: rerun scripts/record_fio_verdicts.py
    probes = recorded(release)["probes"]
    assert set(probes) == set(EXPECTED)
    for name, said in probes.items():
        digest = hashlib.sha256((PROBES / f"{name}.fio").read_bytes()).hexdigest()
        assert said["sha256"] == digest, name


@pytest.mark.parametrize("release", RECORDED)
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_check_agrees_with_the_real_fio_of_its_release(name: str, release: str) -> None:
    # given what fio `release` said about the probe
    said = recorded(release)["probes"][name]
    kind = verdict(name, release)
    # then fio did what the probe's name (or its release verdict) says
    assert (said["exit"] == 0) == (kind != "refused"), said
    if kind == "refused":
        assert said["first_line"], "fio refused it without a word"
    # and iofleet's check with that release's table agrees, with its own message
    ours = _ours(name, release)
    assert bool(ours) == (kind != "accepted"), ours
    assert _agrees(name, release, release)
    if name.startswith("release-"):
        assert (ours[0] if ours else None) == problem(name, release)


@pytest.mark.parametrize(("table", "fio"), list(permutations(fioopts.RELEASES, 2)))
def test_another_releases_table_disagrees_with_that_fio(table: str, fio: str) -> None:
    # the probes tell the tables apart: checked with the wrong release's table, some
    # probe gets a verdict that real fio contradicts (an option or value one has and
    # the other lacks: rw=randtrimwrite, log_entries, fadvise_hint=noreuse, ...)
    wrong = [name for name in sorted(EXPECTED) if not _agrees(name, table, fio)]
    assert wrong
    assert all(name.startswith("release-") for name in wrong), wrong


def test_a_release_probe_differs_between_the_hosts_fio_releases() -> None:
    # Ubuntu 22.04's fio 3.28 and 24.04's fio 3.36 (iofleet/plan/hosts.py) differ on each
    # release probe; where --parse-only of both accepts it, one of them fails the job
    # when it runs (3.28 loads no io_uring_cmd engine, 3.36 refuses ss_dur=1) and the
    # check refuses it for that release only
    old, new = (fioopts.release_for_host(u) for u in ("22.04", "24.04"))
    runtime_only = {"release-engine-io-uring-cmd": old, "release-steadystate-duration": new}
    for name in (n for n in EXPECTED if n.startswith("release-")):
        said = (recorded(old)["probes"][name]["exit"], recorded(new)["probes"][name]["exit"])
        if name in runtime_only:
            refused_for = {r for r in (old, new) if _ours(name, r)}
            assert (said, refused_for) == ((0, 0), {runtime_only[name]}), name
        else:
            assert said[0] != 0 and said[1] == 0, name
