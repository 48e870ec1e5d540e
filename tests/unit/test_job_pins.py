"""The sha256 of a fio job's text: recorded by the plan for every fio workload, pinned by
a matrix (`job_sha256`), checked by the agent before it runs the job (decision 95).

The run-time half (a job edited between cells is not run) is proved by a real run in
tests/integration/test_job_changed_mid_run.py; the Plan Lambda's refusal in
tests/unit/lambdas/test_plan.py.
"""

from __future__ import annotations

import copy
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from iofleet.agent.payload import PayloadError, parse_payload
from iofleet.errors import ValidationFailed
from iofleet.plan.fiojobs import get_job, render_command
from iofleet.plan.matrix import build_plan, validate_matrix_dict
from tests.unit.test_agent_payload import PAYLOAD

JOB = "; a small write\n; @param TARGET=.\n[w]\ndirectory=${TARGET}\nrw=write\nsize=64k\n"


@pytest.fixture
def library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "jobs"
    directory.mkdir()
    (directory / "w.fio").write_text(JOB)
    monkeypatch.setenv("IOFLEET_FIO_JOBS", str(directory))
    return directory


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _matrix(tmp_path: Path, *workloads: dict) -> dict:
    return {
        "name": "pins",
        "storage": [{"label": "a", "type": "local", "path": str(tmp_path / "a")}],
        "workloads": list(workloads) or [{"fio": "w"}],
        "parallelism": [1],
        "repeats": 2,
    }


def test_the_digest_of_a_plain_job_is_its_files_sha256(library: Path) -> None:
    # `sha256sum w.fio` gives the digest `iofleet jobs -v` shows and a matrix pins
    assert get_job("w").text_sha256 == _sha(JOB)


def test_the_digest_covers_an_included_file_and_every_comment(library: Path) -> None:
    (library / "inc.fio").write_text(JOB.replace("size=64k\n", "include sizes.inc\n"))
    (library / "sizes.inc").write_text("size=64k\n")
    first = get_job("inc").text_sha256
    # the included lines are in the text fio is given, so they are in the digest
    assert first == _sha(JOB)
    (library / "sizes.inc").write_text("size=128k\n")
    assert get_job("inc").text_sha256 != first
    (library / "sizes.inc").write_text("size=64k\n; a comment\n")
    assert get_job("inc").text_sha256 not in (first, _sha(JOB.replace("size=64k", "size=128k")))


def test_the_plan_records_each_fio_workloads_digest_in_every_cell(
    library: Path, tmp_path: Path
) -> None:
    doc = _matrix(tmp_path, {"fio": "w"}, {"ioping": {"count": 2}}, {"fio": "w"})
    plan = build_plan(validate_matrix_dict(doc), "local").to_dict()
    for cell in plan["cells"]:
        digests = [w.get("job_sha256") for w in cell["workloads"]]
        assert digests == [_sha(JOB), None, _sha(JOB)]


def test_a_matching_pin_plans_and_is_the_digest_recorded(library: Path, tmp_path: Path) -> None:
    doc = _matrix(tmp_path, {"fio": "w", "job_sha256": _sha(JOB)})
    plan = build_plan(validate_matrix_dict(doc), "local")
    assert [c.workload_payloads()[0]["job_sha256"] for c in plan.cells] == [_sha(JOB)] * 2


def test_a_pin_of_another_text_is_refused_at_its_path(library: Path, tmp_path: Path) -> None:
    pinned = _sha(JOB.replace("64k", "32k"))  # the text before someone edited the job
    doc = _matrix(tmp_path, {"ioping": {}}, {"fio": "w", "job_sha256": pinned})
    with pytest.raises(ValidationFailed) as caught:
        validate_matrix_dict(doc)
    (line,) = caught.value.lines()
    assert line == (
        f"workloads[1].job_sha256: job 'w' is not the text this matrix pins: "
        f"{library / 'w.fio'} has sha256 {_sha(JOB)[:16]}..., the pin {pinned[:16]}... "
        "(run with the library it was pinned from, or pin this one: iofleet jobs -v)"
    )


@pytest.mark.parametrize("pin", ["ABC", "A" * 64, "0" * 63, "", 7, ["0" * 64]])
def test_a_pin_that_is_not_a_sha256_is_refused(library: Path, tmp_path: Path, pin: object) -> None:
    with pytest.raises(ValidationFailed) as caught:
        validate_matrix_dict(_matrix(tmp_path, {"fio": "w", "job_sha256": pin}))
    (line,) = caught.value.lines()
    assert line.startswith("workloads[0].job_sha256: ")


def test_a_pin_of_an_unknown_job_reports_the_job_only(library: Path, tmp_path: Path) -> None:
    with pytest.raises(ValidationFailed) as caught:
        validate_matrix_dict(_matrix(tmp_path, {"fio": "nope", "job_sha256": "0" * 64}))
    assert [line.split(":")[0] for line in caught.value.lines()] == ["workloads[0].fio"]


def test_iofleet_plan_refuses_a_stale_pin_in_one_line_and_exit_2(
    library: Path, tmp_path: Path
) -> None:
    matrix = tmp_path / "m.json"
    matrix.write_text(json.dumps(_matrix(tmp_path, {"fio": "w", "job_sha256": "0" * 64})))
    done = subprocess.run(
        [sys.executable, "-m", "iofleet", "plan", str(matrix), "--target", "local"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"{matrix}: workloads[0].job_sha256: job 'w' is not the text this matrix pins: "
        f"{library / 'w.fio'} has sha256 {_sha(JOB)[:16]}..., the pin 0000000000000000... "
        "(run with the library it was pinned from, or pin this one: iofleet jobs -v)"
    ]
    assert not (tmp_path / "a").exists()  # nothing made


def test_iofleet_jobs_shows_the_digest_to_pin(library: Path) -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "iofleet", "jobs", "-v"], capture_output=True, text=True, check=True
    ).stdout
    assert f"sha256 {_sha(JOB)}" in shown.splitlines()[1]
    listed = subprocess.run(
        [sys.executable, "-m", "iofleet", "jobs", "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert [j["sha256"] for j in json.loads(listed)] == [_sha(JOB)]


def test_render_command_runs_only_the_planned_text(library: Path) -> None:
    argv, text = render_command("w", {}, "/tmp/t", job_sha256=_sha(JOB))
    assert argv[-1] == "-" and "directory=/tmp/t" in text
    (library / "w.fio").write_text(JOB + "; edited\n")
    with pytest.raises(ValueError) as caught:
        render_command("w", {}, "/tmp/t", job_sha256=_sha(JOB))
    assert str(caught.value) == (
        f"fio job w: {library / 'w.fio'} changed since the run was planned (its text's "
        f"sha256 is {_sha(JOB + '; edited' + chr(10))[:16]}..., the plan's "
        f"{_sha(JOB)[:16]}...): not run"
    )
    render_command("w", {}, "/tmp/t")  # without a digest (a payload by hand): not checked


@pytest.mark.parametrize("digest", ["ABC", "A" * 64, 5, ""])
def test_the_agent_refuses_a_payload_digest_that_is_not_a_sha256(digest: object) -> None:
    doc = copy.deepcopy(PAYLOAD)
    doc["workloads"][0]["job_sha256"] = digest
    with pytest.raises(PayloadError) as caught:
        parse_payload(doc)
    assert "workloads[0].job_sha256: must be 64 lowercase hex digits" in str(caught.value)


def test_the_agent_reads_the_payload_digest() -> None:
    doc = copy.deepcopy(PAYLOAD)
    doc["workloads"][0]["job_sha256"] = "a" * 64
    assert parse_payload(doc).workloads[0].job_sha256 == "a" * 64
    assert parse_payload(PAYLOAD).workloads[0].job_sha256 is None
