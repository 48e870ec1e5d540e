"""Every job in fio-jobs/ runs under real fio with short overrides, and parses into records."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from iofleet.plan.fiojobs import get_job, list_jobs, render_command, render_job
from iofleet.results.parsers.fio import parse_fio

pytestmark = pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")

JOBS = [job.name for job in list_jobs()]
# Short and small: about a second per job, a few MiB per file.
SHORT = {
    "RUNTIME": "1",
    "SIZE": "4m",
    "NUM_JOBS": "2",
    "IO_DEPTH": "4",
    "BURST_START": "0",
    "BURST_RUNTIME": "1",
}


def _direct_io_works(directory: Path) -> bool:
    probe = directory / ".odirect-probe"
    try:
        fd = os.open(probe, os.O_CREAT | os.O_WRONLY | getattr(os, "O_DIRECT", 0), 0o600)
    except OSError:
        return False
    os.close(fd)
    probe.unlink()
    return True


def _short_params(name: str, directory: Path) -> dict[str, str]:
    params = {k: v for k, v in SHORT.items() if k in get_job(name).params}
    if not _direct_io_works(directory):  # e.g. /tmp on tmpfs
        params["DIRECT"] = "0"
    return params


def _run(argv: list[str], text: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        input=text,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("name", JOBS)
def test_job_parses_with_no_parameters(name: str, tmp_path: Path) -> None:
    # given only the defaults from the header (TARGET=. is the working directory)
    job = get_job(name)
    # when
    result = _run(["fio", "--parse-only", "-"], render_job(job, job.params), tmp_path)
    # then
    assert result.returncode == 0, result.stderr


@pytest.fixture(scope="module")
def job_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> Callable[[str], subprocess.CompletedProcess[str]]:
    """A job's short run under real fio (in a directory of its own), once per job in this
    module: the logging job's test reads the run the every-job test made."""
    base = tmp_path_factory.mktemp("fio-jobs")
    runs: dict[str, subprocess.CompletedProcess[str]] = {}

    def get(name: str) -> subprocess.CompletedProcess[str]:
        if name not in runs:
            directory = base / name
            directory.mkdir()
            argv, text = render_command(name, _short_params(name, directory), str(directory))
            runs[name] = _run(argv, text, directory)
        return runs[name]

    return get


@pytest.mark.parametrize("name", JOBS)
def test_job_runs_and_parses_into_records(
    name: str, job_run: Callable[[str], subprocess.CompletedProcess[str]]
) -> None:
    # given the job with short parameters, when it runs
    result = job_run(name)
    # then
    assert result.returncode == 0, result.stderr
    out = parse_fio(result.stdout)
    assert out.records, out.warnings
    for record in out.records:
        assert record["error"] == 0
        assert record["io_bytes"] > 0
        assert record["clat_p50_ns"] is not None and record["clat_p99_99_ns"] is not None
    assert out.bins, "json+ output carries histogram bins"


def test_parameters_reach_fio_in_the_job_text(tmp_path: Path) -> None:
    argv, text = render_command(
        "seq-read-1m-qd32",
        {**_short_params("seq-read-1m-qd32", tmp_path), "IO_DEPTH": "3"},
        str(tmp_path),
    )
    result = _run(argv, text, tmp_path)
    doc = json.loads(result.stdout[result.stdout.index("{") :])
    assert doc["global options"]["directory"] == str(tmp_path)
    assert doc["global options"]["runtime"] == "1"
    assert doc["jobs"][0]["job options"]["iodepth"] == "3"


def test_logging_job_reports_writers_and_read_burst_apart(
    job_run: Callable[[str], subprocess.CompletedProcess[str]],
) -> None:
    out = parse_fio(job_run("logging-steady-write-burst-read").stdout)
    assert [(r["job"], r["direction"]) for r in out.records] == [
        ("steady_write", "write"),
        ("burst_read", "read"),
    ]


def test_device_points_every_job_process_at_its_own_region_of_one_file(tmp_path: Path) -> None:
    # given a pre-made 16 MiB file standing in for a raw device, and an empty scratch dir
    device = tmp_path / "fakedev"
    with device.open("wb") as f:
        f.truncate(16 * 1024 * 1024)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    name = "logging-steady-write-burst-read"
    argv, text = render_command(
        name, _short_params(name, tmp_path), str(scratch), device=str(device), device_bytes=16 << 20
    )
    # when
    result = _run(argv, text, scratch)
    # then both sections did I/O, on that file only (fio laid out no per-job files) ...
    assert result.returncode == 0, result.stderr
    assert {r["job"] for r in parse_fio(result.stdout).records} == {"steady_write", "burst_read"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fakedev", "scratch"]
    assert list(scratch.iterdir()) == []
    # ... and each of the two writer clones wrote its own 4 MiB region, nothing beyond
    data = device.read_bytes()
    mib = 1 << 20
    assert data[: 4 * mib].strip(b"\0") and data[4 * mib : 8 * mib].strip(b"\0")
    assert not data[8 * mib :].strip(b"\0")
