"""Matrices nobody here wrote, at the level of their bytes (hypothesis, derandomized).

test_matrix_mutations.py changes the parsed document; this changes the file's bytes: a
byte order mark, bytes that are not UTF-8, a NUL or control byte, the text cut short, a
key written twice, a number literal JSON or int64 cannot hold, escapes of NUL and lone
surrogates. Whatever comes out, `iofleet plan`'s code plans it or refuses it with
ValidationFailed whose every line is `FILE: message` on one line, never another
exception. scripts/fuzz_matrix.py runs the same kinds of mutation (and more) through
the command line for many more examples.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from iofleet.errors import ValidationFailed
from iofleet.plan.matrix import plan_matrix_file

REPO = Path(__file__).resolve().parents[2]
BASES = {p.name: p.read_bytes() for p in sorted((REPO / "examples").glob("*.json"))}

INSERTS = st.sampled_from(
    [
        b"\xef\xbb\xbf",
        b"\xff",
        b"\xc3",
        b"\xed\xa0\x80",
        b"\x80",
        b"\x00",
        b"\x01",
        b"\r",
        b"\\u0000",
        b"\\ud800",
        b"1e400",
        b"9" * 25,
        b"NaN",
        b"-Infinity",
        b"[",
        b"{",
        b'"',
        b",",
        b"\\",
    ]
)


@st.composite
def text_mutations(draw: st.DrawFn) -> tuple[str, bytes]:
    name = draw(st.sampled_from(sorted(BASES)))
    data = BASES[name]
    kind = draw(st.sampled_from(["bom", "insert", "cut", "duplicate", "number"]))
    at = draw(st.integers(min_value=0, max_value=len(data)))
    if kind == "bom":
        data = b"\xef\xbb\xbf" + data
    elif kind == "insert":
        data = data[:at] + draw(INSERTS) + data[at:]
    elif kind == "cut":
        data = data[:at]
    elif kind == "duplicate":  # the first key of an object written twice
        brace = data.find(b"{", at)
        brace = brace if brace >= 0 else 0
        end = data.find(b",", brace)
        if end > brace:
            data = data[: end + 1] + data[brace + 1 : end] + b"," + data[end + 1 :]
    else:  # a digit replaced by a literal JSON or int64 cannot hold
        digit = next((i for i in range(at, len(data)) if data[i : i + 1].isdigit()), None)
        if digit is not None:
            literal = draw(st.sampled_from([b"1e400", b"9" * 20, b"-9" * 20, b"NaN", b"1.0e-400"]))
            data = data[:digit] + literal + data[digit + 1 :]
    return ("local" if "local" in name else "aws"), data


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("text-mutations")


@settings(
    max_examples=150,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(text_mutations())
def test_a_matrix_with_mutated_bytes_is_planned_or_refused_in_lines_naming_the_file(
    workdir: Path, case: tuple[str, bytes]
) -> None:
    target, data = case
    path = workdir / "m.json"
    path.write_bytes(data)
    try:
        plan = plan_matrix_file(path, target=target)
    except ValidationFailed as exc:
        lines = exc.lines()
        assert lines, "refused without a reason"
        for line in lines:
            assert line.startswith(f"{path}: ") and len(line) > len(f"{path}: ")
            assert len(line.splitlines()) == 1, line
        return
    assert plan.cells
