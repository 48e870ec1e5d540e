"""iofleet's fio option check against the real fio installed here (Debian's package).

For every probe job file (tests/data/probes/fio-jobs): a file iofleet accepts, fio
`--parse-only` accepts too (the check is never stricter than fio about what fio reads
as written); a file fio refuses, iofleet refuses; the `stricter-*` files are the
documented exceptions, accepted by fio and refused by iofleet because fio would read
something other than what is written (docs/decisions.md #42); a `release-*` file's
verdict depends on the release (checked when the installed fio is a pinned one; the
recorded verdicts of fio 3.28, 3.33 and 3.36: tests/unit/test_fio_verdicts.py). The
library's own jobs pass both. The option table of the installed release names every
option and every engine option this fio lists.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from iofleet.plan import fiojobs, fioopts
from tests.fio_probes import EXPECTED, PROBES, verdict

FIO = shutil.which("fio")
pytestmark = pytest.mark.skipif(FIO is None, reason="fio is not installed")
VERSION = fioopts.installed_version(FIO)
RELEASE = fioopts.release_for_version(VERSION)


def _parse_only(path: Path, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    assert FIO is not None
    return subprocess.run(
        [FIO, "--parse-only", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env={**os.environ, **env},
        check=False,
    )


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fio_and_iofleet_agree_on_each_probe(name: str, tmp_path: Path) -> None:
    entry = EXPECTED[name]
    if name.startswith("release-") and VERSION != f"fio-{RELEASE}":
        pytest.skip(f"{name}: its verdict is known for the pinned releases, not {VERSION}")
    kind = verdict(name, RELEASE)
    try:
        ours = [p.text() for p in fioopts.check_job_file(PROBES / f"{name}.fio", {}, RELEASE)]
    except fioopts.JobTextError as exc:
        ours = [str(exc)]
    fio = _parse_only(PROBES / f"{name}.fio", tmp_path, entry.get("fio_env", {}))
    if kind == "accepted":
        assert (fio.returncode, ours) == (0, []), fio.stderr
    elif kind == "refused":
        assert fio.returncode != 0 and ours, (fio.returncode, ours)
    else:  # stricter-: fio reads it (other than written), iofleet refuses
        assert fio.returncode == 0 and ours, (fio.stderr, ours)
    assert list(tmp_path.iterdir()) == []  # --parse-only made nothing


@pytest.mark.parametrize("job", [j.name for j in fiojobs.list_jobs()])
def test_every_library_job_passes_fio_and_iofleet(job: str, tmp_path: Path) -> None:
    assert fiojobs.option_problems(job, {}, RELEASE) == []
    assert fiojobs.parse_only_problem(job, {}, str(tmp_path)) is None
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def same_release() -> None:
    if VERSION != f"fio-{RELEASE}":
        pytest.skip(f"installed {VERSION} has no table of its own (tables: {fioopts.RELEASES})")


@pytest.mark.usefixtures("same_release")
def test_the_table_names_every_option_fio_lists() -> None:
    assert FIO is not None
    listing = subprocess.run([FIO, "--cmdhelp=all"], capture_output=True, text=True, check=True)
    listed = {m[1] for m in re.finditer(r"^\s*([a-z0-9_-]+)\s*:", listing.stdout, re.M)}
    table = fioopts.table(RELEASE)["options"]
    known = set(table) | {o["alias"] for o in table.values() if o.get("alias")}
    assert len(listed) > 200
    assert listed - known == set()


@pytest.mark.usefixtures("same_release")
def test_each_engine_has_the_options_fio_lists_for_it() -> None:
    assert FIO is not None
    listing = subprocess.run([FIO, "--enghelp"], capture_output=True, text=True, check=True)
    engines = listing.stdout.split(":", 1)[1].split()
    table = fioopts.table(RELEASE)["engines"]
    assert {"libaio", "io_uring", "psync"} <= set(engines)
    for engine in engines:
        assert engine in table, engine
        help_text = subprocess.run(
            [FIO, f"--enghelp={engine}"], capture_output=True, text=True, check=False
        ).stdout
        listed = {m[1] for m in re.finditer(r"^\s*([a-z0-9_-]+)\s*:", help_text, re.M)}
        assert listed == set(table[engine]["options"]), engine
