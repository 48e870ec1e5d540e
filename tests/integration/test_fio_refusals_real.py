"""The job options `plan` refuses because fio refuses them as the job starts
(iofleet/plan/fiojobs.py _refused_by_fio and the missing size; docs/decisions.md #85),
run through the real fio in a new, empty directory as a slot's: each one fails there,
and each look-alike the plan accepts runs. The cases are the unit test's."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.unit.test_fiojobs import _HEAD, ACCEPTED_BODIES, REFUSED_BODIES

pytestmark = pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")


def _direct_io_works(directory: Path) -> bool:
    try:
        fd = os.open(directory / "probe", os.O_CREAT | os.O_WRONLY | os.O_DIRECT, 0o600)
    except OSError:
        return False
    os.close(fd)
    (directory / "probe").unlink()
    return True


def _fio(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    target = tmp_path / "slot"
    target.mkdir()
    if "direct=1" in body and not _direct_io_works(target):
        pytest.skip("this file system takes no O_DIRECT")
    job = tmp_path / "j.fio"
    job.write_text(_HEAD + body + "runtime=1\n")
    return subprocess.run(
        ["fio", "--output-format=json", str(job)],
        cwd=target,
        env={**os.environ, "TARGET": str(target)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(("body", "raw_only", "why"), REFUSED_BODIES)
def test_what_the_plan_refuses_fails_in_fio(
    tmp_path: Path, body: str, raw_only: bool, why: str
) -> None:
    result = _fio(tmp_path, body)
    # fio exits non-zero, or its job reports an error
    failed = result.returncode != 0 or '"error" : 0' not in result.stdout
    assert failed, (result.returncode, result.stdout[-500:], result.stderr[-500:])


@pytest.mark.parametrize("body", ACCEPTED_BODIES)
def test_what_the_plan_accepts_runs_in_fio(tmp_path: Path, body: str) -> None:
    result = _fio(tmp_path, body)
    assert result.returncode == 0, result.stderr[-800:]
    assert '"error" : 0' in result.stdout


@pytest.mark.parametrize("option", ["cpus_allowed", "cpumask"])
def test_a_job_pinned_past_this_machines_cpus_fails_in_fio_and_is_refused_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, option: str
) -> None:
    from iofleet.plan.fiojobs import host_problems

    cpus = os.sysconf("SC_NPROCESSORS_CONF")
    last, beyond = (
        (str(cpus - 1), str(cpus))
        if option == "cpus_allowed"
        else (hex(1 << (cpus - 1)), hex(1 << cpus))
    )
    library = tmp_path / "jobs"
    library.mkdir()
    monkeypatch.setenv("IOFLEET_FIO_JOBS", str(library))
    for value, fails in ((last, False), (beyond, True)):
        body = f"[x]\nsize=1m\n{option}={value}\n"
        (library / "pin.fio").write_text(_HEAD + body)
        run = tmp_path / value
        run.mkdir()
        result = _fio(run, body)
        failed = result.returncode != 0 or '"error" : 0' not in result.stdout
        # fio drops the job pinned to a CPU the machine lacks, and runs the other
        assert failed is fails, (value, result.stderr[-400:])
        lines = host_problems("pin", {}, cpus, True, "this machine")
        assert bool(lines) is fails, lines


@pytest.mark.parametrize("line", ["mem=shmhuge", "mem=mmaphuge"])
def test_huge_page_buffers_fail_in_fio_without_huge_pages_and_are_refused_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, line: str
) -> None:
    from iofleet.plan.fiojobs import host_problems, huge_pages_reserved

    if huge_pages_reserved():
        pytest.skip("this machine has huge pages reserved")
    library = tmp_path / "jobs"
    library.mkdir()
    monkeypatch.setenv("IOFLEET_FIO_JOBS", str(library))
    body = f"[x]\nsize=64k\nrw=read\n{line}\n"
    (library / "huge.fio").write_text(_HEAD + body)
    # fio fails the job here (no huge pages reserved: vm.nr_hugepages is 0) ...
    result = _fio(tmp_path, body)
    assert result.returncode != 0 or '"error" : 0' not in result.stdout, result.stdout[-400:]
    # ... and the local check says so before anything runs; with pages reserved it would not
    assert host_problems("huge", {}, 1, False, "this machine")
    assert host_problems("huge", {}, 1, True, "this machine") == []
