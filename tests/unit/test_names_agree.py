"""The names a plan accepts are the names every slot's agent accepts (a job's name, a
parameter's name): before, `x+y.fio`, `-n.fio` and a 70-character parameter passed
`plan` and every slot then refused its payload (exit 2, nothing run)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from iofleet.agent.payload import SAFE_ID, PayloadError, parse_payload
from iofleet.errors import ValidationFailed
from iofleet.plan import fiojobs
from iofleet.plan.matrix import validate_matrix_dict
from tests.unit.test_agent_payload import PAYLOAD

CHARS = "aZ09._-+ /:$@"


def _names() -> list[str]:
    out = ["".join(p) for n in (1, 2, 3) for p in itertools.product(CHARS, repeat=n)]
    return out + ["a" * 128, "a" * 129, "x+y", "-n", "_n", ".n"]


def test_every_job_name_the_library_takes_is_one_the_agent_takes() -> None:
    taken = [n for n in _names() if fiojobs._job_name_problem(n) is None]
    assert "a" * 128 in taken
    assert taken and all(SAFE_ID.match(n) for n in taken)
    for refused in ("x+y", "-n", "_n", ".n", "a" * 129):
        assert fiojobs._job_name_problem(refused) is not None, refused


@pytest.mark.parametrize("name", ["x+y", "-n", "_n"])
def test_a_job_file_the_agent_could_not_run_is_refused_at_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setenv("IOFLEET_FIO_JOBS", str(tmp_path))
    (tmp_path / f"{name}.fio").write_text(
        "; d\n; @param TARGET=.\n[x]\ndirectory=${TARGET}\nsize=64k\n"
    )
    doc = {
        "name": "n",
        "storage": [{"label": "a", "type": "local", "path": str(tmp_path / "t")}],
        "workloads": [{"fio": name}],
        "parallelism": [1],
    }
    with pytest.raises(ValidationFailed) as caught:
        validate_matrix_dict(doc)
    (line,) = caught.value.lines()
    assert line.startswith(f"workloads[0].fio: fio job '{name}': a job's name (its file name")
    with pytest.raises(fiojobs.JobFileError):
        fiojobs.list_jobs()  # the library as a whole says which file


@pytest.mark.parametrize(("length", "taken"), [(64, True), (65, False)])
def test_a_parameter_name_is_taken_by_plan_exactly_when_the_agent_takes_it(
    length: int, taken: bool
) -> None:
    name = "P" * length
    doc = {
        "name": "n",
        "storage": [{"label": "a", "type": "local", "path": "/tmp/x"}],
        "workloads": [{"fio": "latency-4k-qd1-randread", "params": {name: 1}}],
        "parallelism": [1],
    }
    payload = {**PAYLOAD, "workloads": [{"kind": "fio", "name": "j", "params": {name: "1"}}]}
    if taken:
        parse_payload(payload)
        # the matrix takes the name's form (the job then says it declares no such one)
        lines = _lines(doc)
        assert not [ln for ln in lines if "a parameter name" in ln]
    else:
        with pytest.raises(PayloadError):
            parse_payload(payload)
        assert [ln for ln in _lines(doc) if "a parameter name (at most 64" in ln]


def _lines(doc: dict) -> list[str]:
    try:
        validate_matrix_dict(doc)
    except ValidationFailed as exc:
        return exc.lines()
    return []


def test_a_declared_parameter_name_longer_than_the_agent_takes_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("IOFLEET_FIO_JOBS", str(tmp_path))
    name = "R" * 65
    (tmp_path / "p.fio").write_text(
        f"; d\n; @param TARGET=.\n; @param {name}:duration=1  r\n[x]\ndirectory=${{TARGET}}\n"
        f"size=64k\nruntime=${{{name}}}\n"
    )
    with pytest.raises(fiojobs.JobFileError, match="at most 64 characters"):
        fiojobs.get_job("p")
