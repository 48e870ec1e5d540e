"""Matrices nobody here wrote: every example matrix mutated at random (hypothesis).

One mutation at a time, anywhere in the document: a value replaced by a JSON value of
any kind (null, bools, integers from zero to beyond 64 bits, floats with NaN and
Infinity, strings with path separators, shell metacharacters and any Unicode, arrays,
objects), a key added (a typo, `<<`, a key with odd characters), a key removed, a value
wrapped in an array. Whatever comes out, `iofleet plan`'s code either plans the matrix
or refuses it with ValidationFailed: one or more single lines `FILE: PATH: message`,
never another exception. A mutation that changes a value's JSON kind is refused at the
path it mutated, in exactly one line when the new value is a single one. The probe set (tests/data/probes/matrices) holds the exact lines for
chosen cases; this checks the rule over the cases nobody chose.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from iofleet.errors import ValidationFailed
from iofleet.plan.matrix import format_path, plan_matrix_file

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "examples").glob("*.json"))
BASES = {p.name: json.loads(p.read_text()) for p in EXAMPLES}


def _target(name: str) -> str:
    return "local" if "local" in name else "aws"


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every location in the document (the root excluded)."""
    out: list[tuple[Any, ...]] = []
    items = (
        doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    )
    for key, value in items:
        out.append((*prefix, key))
        out += _paths(value, (*prefix, key))
    return out


def _objects(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every object's location (the root included)."""
    out = [prefix] if isinstance(doc, dict) else []
    items = (
        doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    )
    for key, value in items:
        out += _objects(value, (*prefix, key))
    return out


def _at(doc: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        doc = doc[part]
    return doc


ODD_TEXT = st.sampled_from(
    [
        "",
        " ",
        "../../etc",
        "a/b",
        "$(reboot)",
        "`id`",
        "a;b",
        "x\n",
        "\x00",
        "~",
        "ü",
        "１",
        "C:\\x",
    ]
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 1, 2**63, 10**19, 10**20]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1.0, 1.5, 1e308]),
    ODD_TEXT,
    st.text(max_size=40),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)
KEYS = st.one_of(
    st.sampled_from(["nmae", "paralelism", "<<", "Storage", "type ", "params", "label", ""]),
    st.text(max_size=12),
)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):  # true and false are one kind: either is a bool setting's
        return "bool"
    if isinstance(value, int | float):
        return "number"
    return type(value).__name__


@st.composite
def mutations(draw: st.DrawFn) -> tuple[str, dict[str, Any], bool, tuple[Any, ...] | None]:
    """(base name, mutated document, whether the mutation is one value, the path whose
    value changed kind)."""
    name = draw(st.sampled_from(sorted(BASES)))
    doc = copy.deepcopy(BASES[name])
    kind = draw(st.sampled_from(["replace", "add-key", "remove-key", "wrap"]))
    if kind == "add-key":
        where = draw(st.sampled_from(_objects(doc)))
        _at(doc, where)[draw(KEYS)] = draw(VALUES)
        return name, doc, False, None
    path = draw(st.sampled_from(_paths(doc)))
    parent, key = _at(doc, path[:-1]), path[-1]
    if kind == "remove-key":
        if isinstance(parent, dict):
            del parent[key]
        else:
            parent.pop(key)
        return name, doc, False, None
    old = parent[key]
    parent[key] = [old] if kind == "wrap" else draw(VALUES)
    changed = _kind(parent[key]) != _kind(old)
    one_value = kind == "wrap" or not isinstance(parent[key], list | dict)
    return name, doc, one_value, path if changed else None


def _null_throughput_mode_beside_max_io() -> tuple[str, dict[str, Any], bool, tuple[Any, ...]]:
    """A case hypothesis found: null throughput_mode (elastic) beside maxIO is refused at
    performance_mode, the other field of the rule."""
    name = "seed003-latency-ioping.json"
    doc = copy.deepcopy(BASES[name])
    doc["storage"][1]["throughput_mode"] = None
    return name, doc, True, ("storage", 1, "throughput_mode")


def _write_true_made_false() -> tuple[str, dict[str, Any], bool, tuple[Any, ...] | None]:
    """A case hypothesis found: an ioping `write: true` made false is another valid
    matrix, planned; true and false are one JSON kind, so no refusal is expected."""
    name = "seed003-latency-ioping.json"
    doc = copy.deepcopy(BASES[name])
    path = ("workloads", 1, "ioping", "write")
    old = _at(doc, path)
    assert old is True
    doc["workloads"][1]["ioping"]["write"] = False
    return name, doc, True, path if _kind(False) != _kind(old) else None


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mutations")


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(mutations())
@example(_null_throughput_mode_beside_max_io())
@example(_write_true_made_false())
def test_a_mutated_matrix_is_planned_or_refused_with_lines_that_start_with_the_file(
    workdir: Path, case: tuple[str, dict[str, Any], bool, tuple[Any, ...] | None]
) -> None:
    name, doc, one_value, changed = case
    path = workdir / "m.json"
    path.write_text(json.dumps(doc, allow_nan=True))
    try:
        plan = plan_matrix_file(path, target=_target(name))
    except ValidationFailed as exc:
        lines = exc.lines()
        assert lines, "refused without a reason"
        for line in lines:
            assert line.startswith(f"{path}: ") and len(line) > len(f"{path}: ")
            assert "\n" not in line and "\r" not in line
        # a value of another kind is refused where it is, unless the field takes it (null
        # for "unset"): then a rule across fields may refuse it at the other field (null
        # throughput_mode is elastic, which maxIO performance_mode does not allow)
        if changed is not None and _at(doc, changed) is not None:
            where = format_path(changed)
            assert any(
                line.startswith(f"{path}: {where}") or line.startswith(f"{path}: line ")
                for line in lines
            ), (where, lines)
            if one_value:  # one bad value: one line
                assert len(lines) == 1, lines
        return
    assert changed is None or _accepts_either_kind(doc, changed), (format_path(changed), doc)
    assert plan.cells


def _accepts_either_kind(doc: dict[str, Any], path: tuple[Any, ...]) -> bool:
    """Places where a value of another JSON kind can be valid: null for an optional
    setting (its default), a fio parameter (a string or a number), an app (a preset name
    or an inline object)."""
    if _at(doc, path) is None:
        return True
    return len(path) >= 3 and path[0] == "workloads" and path[2] in ("params", "app")
