"""`iofleet plan` as users run it: a real process, exit codes, stdout/stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "examples").glob("*.json"))


def iofleet(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "iofleet.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


MATRIX = {
    "name": "cli-test",
    "instance_types": ["m6i.4xlarge"],
    "storage": [{"type": "ebs", "label": "gp3", "volume_type": "gp3", "size_gib": 100}],
    "workloads": [{"fio": "seq-read-1m-qd32", "params": {"RUNTIME": 2}}],
    "parallelism": [1, 10],
}


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_every_example_passes_plan(example: Path) -> None:
    target = "local" if "local" in example.stem else "aws"
    result = iofleet("plan", str(example), "--target", target, "--format", "json")
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    assert plan["total_instances"] == sum(c["slots"] for c in plan["cells"]) > 0


def test_seed004_example_expands_to_the_seed_fleet_sizes() -> None:
    result = iofleet(
        "plan", str(REPO / "examples" / "seed004-yocto-fleet.json"), "--format", "json"
    )
    plan = json.loads(result.stdout)
    assert sorted({c["fleet_size"] for c in plan["cells"]}) == [1, 10, 50, 100, 200]
    assert plan["total_instances"] == 5 * (1 + 10 + 50 + 100 + 200)


def test_plan_table_from_stdin() -> None:
    result = iofleet("plan", "-", stdin=json.dumps(MATRIX))
    assert result.returncode == 0, result.stderr
    assert "c001-gp3-m6i.4xlarge-x10-r1" in result.stdout
    assert "2 cells, total instances: 11 (limit 100)" in result.stdout.splitlines()


def test_bad_matrix_exits_2_with_one_line_per_problem(tmp_path: Path) -> None:
    bad = dict(MATRIX, parallelism=[0], storage=[dict(MATRIX["storage"][0], iops=100)])
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    result = iofleet("plan", str(path))
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"{path}: storage[0].iops: gp3 IOPS must be 3000-80000, got 100",
        f"{path}: parallelism[0]: must be greater than or equal to 1, got 0",
    ]


def test_json_syntax_error_exits_2_with_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{\n  "name": "x",\n  "storage": [}\n')
    result = iofleet("plan", str(path))
    assert result.returncode == 2
    assert result.stderr.strip() == f"{path}: line 3 column 15: Expecting value"


def test_over_the_instance_limit_exits_2_with_the_count(tmp_path: Path) -> None:
    result = iofleet("plan", "-", stdin=json.dumps(dict(MATRIX, parallelism=[50, 60])))
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "<stdin>: limits.max_instances: plan needs 110 instances, over the limit of 100"
    )


def test_missing_file_exits_2_without_traceback(tmp_path: Path) -> None:
    result = iofleet("plan", str(tmp_path / "nope.json"))
    assert result.returncode == 2
    assert result.stderr.strip() == f"{tmp_path / 'nope.json'}: no such matrix file"


def test_local_target_rejects_aws_storage() -> None:
    result = iofleet("plan", "-", "--target", "local", stdin=json.dumps(MATRIX))
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "<stdin>: storage[0].type: 'ebs' storage needs an AWS run; local runs take only 'local' "
        "storage"
    )


# --- the probe set: bad matrices as data (tests/data/probes/matrices) ----------------------

PROBES = REPO / "tests" / "data" / "probes" / "matrices"
EXPECTED: dict[str, dict] = json.loads((PROBES / "expected.json").read_text())
GOOD_MATRIX = json.dumps(MATRIX).encode()
# made at test time: a valid matrix padded past the size limit (1 MiB) with spaces
GENERATED = {"document-oversize": GOOD_MATRIX + b" " * (1024 * 1024 + 1 - len(GOOD_MATRIX))}
OVERSIZE_LINE = "the matrix is over the 1048576 byte limit"


def _probe_bytes(name: str) -> bytes:
    return GENERATED[name] if name in GENERATED else (PROBES / f"{name}.json").read_bytes()


def _run_in(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("IOFLEET_DEBUG", None)
    return subprocess.run(
        [sys.executable, "-m", "iofleet.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env=env,
    )


def test_probe_files_and_expected_lines_match_one_to_one() -> None:
    files = {p.stem for p in PROBES.glob("*.json")} - {"expected"}
    assert files == set(EXPECTED)
    assert len(files) + len(GENERATED) >= 60


@pytest.mark.parametrize("name", sorted(EXPECTED) + sorted(GENERATED))
def test_bad_matrix_probe_is_refused_with_its_path_and_creates_nothing(
    name: str, tmp_path: Path
) -> None:
    # given a bad matrix in an empty working directory
    work = tmp_path / "work"
    work.mkdir()
    matrix = tmp_path / "matrix.json"
    matrix.write_bytes(_probe_bytes(name))
    lines = EXPECTED[name]["stderr"] if name in EXPECTED else [OVERSIZE_LINE]
    expected = [f"{matrix}: {line}" for line in lines]  # every line starts with the file
    target = EXPECTED.get(name, {}).get("target", "aws")
    # when it is planned
    result = _run_in(work, "plan", str(matrix), "--target", target)
    # then exactly the expected `PATH: message` lines, exit 2, nothing on stdout
    assert (result.returncode, result.stderr.splitlines()) == (2, expected)
    assert result.stdout == ""
    # and when it is run locally, it is refused the same way before anything exists
    out = tmp_path / "out"
    local = _run_in(work, "local", str(matrix), "--out", str(out), "-q")
    assert local.returncode == 2, local.stderr
    lines = local.stderr.splitlines()
    assert lines and "Traceback" not in local.stderr and "internal error" not in local.stderr
    if target == "local":
        assert lines == expected
    assert not out.exists()
    assert list(work.iterdir()) == []


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_every_example_is_still_accepted_by_plan_and_local_validation(example: Path) -> None:
    from iofleet.plan.matrix import build_plan, load_matrix_file

    target = "local" if "local" in example.stem else "aws"
    plan = build_plan(load_matrix_file(example), target=target)
    assert plan.cells


def test_oversized_stdin_is_refused_without_reading_it_all(tmp_path: Path) -> None:
    result = iofleet("plan", "-", stdin=json.dumps(MATRIX) + " " * (2 * 1024 * 1024))
    assert (result.returncode, result.stderr.splitlines()) == (2, [f"<stdin>: {OVERSIZE_LINE}"])


# A user's own job library: fio accepts every one of these files, but iofleet cannot plan
# them (their size, block size or clone count is not a figure before fio runs).
USER_JOB = "; {what}\n; @param TARGET=.  target\n[global]\ndirectory=${{TARGET}}\n[j]\n{lines}\n"
UNPLANNABLE = {
    "percent": (
        "rw=write\nsize=50%",
        "job 'percent': percent.fio:7: size=50%: fio takes a percentage of a file that "
        "already exists, and iofleet's targets hold new files (fio fails: 'Invalid "
        "argument'); write a size (a percentage is for raw devices only)",
    ),
    "ncpus": (
        "rw=read\nsize=1m\nnumjobs=$ncpus",
        "job 'ncpus': ncpus.fio:8: numjobs=$ncpus: fio fills this in from the host it runs "
        "on; iofleet plans a job from its figures: write the number",
    ),
    "split": (
        "rw=randread\nsize=1m\nbssplit=4k/50:64k/50",
        "job 'split': split.fio:8: bssplit=4k/50:64k/50: block sizes drawn from a range or "
        "a split have no one size per I/O for the expected ceilings: give bs= (one size "
        "per direction)",
    ),
}


def _user_library(tmp_path: Path) -> Path:
    library = tmp_path / "jobs"
    library.mkdir()
    for name, (lines, _) in UNPLANNABLE.items():
        (library / f"{name}.fio").write_text(USER_JOB.format(what=name, lines=lines))
    return library


@pytest.mark.parametrize("name", sorted(UNPLANNABLE))
def test_a_job_iofleet_cannot_plan_for_exits_2_with_one_line(name: str, tmp_path: Path) -> None:
    # given a user's job file fio accepts, whose figures iofleet would have to guess
    library = _user_library(tmp_path)
    matrix = tmp_path / "m.json"
    matrix.write_text(json.dumps(dict(MATRIX, workloads=[{"fio": name}])))
    env = {**os.environ, "IOFLEET_FIO_JOBS": str(library)}
    for target in ("aws", "local"):
        doc = json.loads(matrix.read_text())
        if target == "local":
            doc["storage"] = [{"type": "local", "label": "here", "path": str(tmp_path / "t")}]
            doc["parallelism"] = [1]
        matrix.write_text(json.dumps(doc))
        # when it is planned
        result = subprocess.run(
            [sys.executable, "-m", "iofleet.cli", "plan", str(matrix), "--target", target],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            check=False,
        )
        # then one line names the file, the workload and the option, and nothing is made
        assert (result.returncode, result.stderr.splitlines()) == (
            2,
            [f"{matrix}: workloads[0].fio: {UNPLANNABLE[name][1]}"],
        )
        assert not (tmp_path / "t").exists()


def test_a_percentage_size_is_planned_on_a_raw_volume(tmp_path: Path) -> None:
    # fio's size=50% is a share of the device there: the raw layout reads it as such
    library = _user_library(tmp_path)
    raw = dict(MATRIX["storage"][0], filesystem="raw")  # type: ignore[arg-type]
    doc = dict(MATRIX, storage=[raw], workloads=[{"fio": "percent"}], parallelism=[1])
    result = subprocess.run(
        [sys.executable, "-m", "iofleet.cli", "plan", "-", "--format", "json"],
        input=json.dumps(doc),
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "IOFLEET_FIO_JOBS": str(library)},
        check=False,
    )
    assert result.returncode == 0, result.stderr
