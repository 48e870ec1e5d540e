"""However long the bad input, every refusal of `iofleet plan` is one short line.

Each case puts a 5,000-character value, key or number literal (some with line breaks
in them) where a shipped example has a good one, or thousands of bad keys where it has
a few, and runs the real command (cli.main, in this process): exit 2, one stderr line
per problem, each at most MAX_LINE characters and none split across lines, and nothing
created in the working directory. docs/decisions.md record 63.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from iofleet import cli
from iofleet.errors import ValidationFailed
from iofleet.plan.matrix import plan_matrix_file, validate_matrix_dict

REPO = Path(__file__).resolve().parents[2]
LOCAL = json.loads((REPO / "examples/local-demo.json").read_text())
AWS = json.loads((REPO / "examples/seed000-ebs-optimized-ceiling.json").read_text())
SHIPPED = json.loads((REPO / "iofleet/plan/data/prices.json").read_text())
MAX_LINE = 300
LONG = "q" * 5000
BROKEN = "q" * 2500 + "\n" + "q" * 2500 + "\r\u2028x"  # line breaks inside a long value


def _set(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        node: Any = doc
        for step in path[:-1]:
            node = node[step]
        node[path[-1]] = value

    return change


def _prices(**fields: Any) -> dict[str, Any]:
    good = {"as_of": "2026-01-01", "source": "mine", "regions": {"us-east-1": {}}}
    good["regions"]["us-east-1"] = SHIPPED["regions"]["us-east-1"]
    return {**good, **fields}


def _deep(depth: int, leaf: Any) -> Any:
    for i in range(depth):
        leaf = {f"k{i}" + "k" * 60: leaf}
    return leaf


# (id, base, target, change of the parsed document or None, text change, problems)
CASES: list[tuple[str, dict[str, Any], str, Any, Any, int]] = [
    ("storage-type", LOCAL, "local", _set(("storage", 0, "type"), LONG), None, 1),
    ("storage-type-newlines", LOCAL, "local", _set(("storage", 0, "type"), BROKEN), None, 1),
    ("storage-path", LOCAL, "local", _set(("storage", 0, "path"), "/tmp/" + LONG), None, 1),
    ("storage-path-newlines", LOCAL, "local", _set(("storage", 0, "path"), BROKEN), None, 1),
    ("storage-label", LOCAL, "local", _set(("storage", 0, "label"), LONG), None, 1),
    ("storage-key", LOCAL, "local", _set(("storage", 0, LONG), 1), None, 1),
    ("storage-key-newlines", LOCAL, "local", _set(("storage", 0, BROKEN), 1), None, 1),
    ("top-key", LOCAL, "local", _set((LONG,), 1), None, 1),
    ("top-key-newlines", LOCAL, "local", _set((BROKEN,), 1), None, 1),
    ("name", LOCAL, "local", _set(("name",), LONG), None, 1),
    ("fio-job", LOCAL, "local", _set(("workloads", 0, "fio"), LONG), None, 1),
    ("fio-size", LOCAL, "local", _set(("workloads", 0, "params", "SIZE"), "9" * 5000), None, 1),
    ("fio-runtime", LOCAL, "local", _set(("workloads", 0, "params", "RUNTIME"), BROKEN), None, 1),
    ("fio-param-key", LOCAL, "local", _set(("workloads", 0, "params", LONG), 1), None, 1),
    ("workload-key", LOCAL, "local", _set(("workloads", 0, LONG), 1), None, 1),
    (
        "workload-long-keys-only",
        LOCAL,
        "local",
        _set(("workloads", 0), {f"{i}{BROKEN}": 1 for i in range(5)}),
        None,
        1,
    ),
    ("ioping-count", LOCAL, "local", _set(("workloads", 1, "ioping", "count"), LONG), None, 1),
    ("app-preset", LOCAL, "local", _set(("workloads", 2, "app"), LONG), None, 1),
    ("app-preset-newlines", LOCAL, "local", _set(("workloads", 2, "app"), BROKEN), None, 1),
    ("parallelism", LOCAL, "local", _set(("parallelism", 1), LONG), None, 1),
    ("instance-type", AWS, "aws", _set(("instance_types", 0), LONG), None, 1),
    ("volume-type", AWS, "aws", _set(("storage", 0, "volume_type"), LONG), None, 1),
    ("filesystem", AWS, "aws", _set(("storage", 0, "filesystem"), BROKEN), None, 1),
    ("ami-id", AWS, "aws", _set(("ami_id",), LONG), None, 1),
    ("burst-policy", AWS, "aws", _set(("burst_policy",), LONG), None, 1),
    ("ubuntu-release", AWS, "aws", _set(("ubuntu_release",), LONG), None, 1),
    ("prices-as-of", AWS, "aws", _set(("prices",), _prices(as_of=LONG)), None, 1),
    ("prices-region", AWS, "aws", _set(("prices",), _prices(regions={LONG: {}})), None, 1),
    (
        "prices-rate",
        AWS,
        "aws",
        _set(("prices",), _prices(regions={"us-east-1": {"ec2_hourly": {"m6i.large": LONG}}})),
        None,
        1,
    ),
    ("nul-deep", LOCAL, "local", _set(("workloads", 0, "params"), _deep(14, "a\x00b")), None, 1),
    (
        "many-top-keys",
        LOCAL,
        "local",
        lambda d: d.update({f"x{i}": 1 for i in range(3000)}),
        None,
        1,
    ),
    (
        "many-regions",
        AWS,
        "aws",
        _set(("prices",), _prices(regions={f"bad{i}": {} for i in range(3000)})),
        None,
        1,
    ),
    (
        "many-price-keys",
        AWS,
        "aws",
        _set(("prices",), {**_prices(), **{f"k{i}": 1 for i in range(3000)}}),
        None,
        1,
    ),
    (
        "many-params",
        LOCAL,
        "local",
        _set(("workloads", 0, "params"), {f"P{i}": 1 for i in range(60)}),
        None,
        1,
    ),
    (
        "many-nul-strings",
        LOCAL,
        "local",
        _set(("description",), {f"d{i}": "\x00" for i in range(3000)}),
        None,
        1,
    ),
    (
        "many-nul-keys",
        LOCAL,
        "local",
        _set(("storage", 0), {**LOCAL["storage"][0], **{f"a\x00{i}": 1 for i in range(3000)}}),
        None,
        1,
    ),
    # number literals no JSON parser keeps
    ("long-integer", LOCAL, "local", None, (b'"RUNTIME": 15', b'"RUNTIME": ' + b"9" * 5000), 1),
    ("long-float", LOCAL, "local", None, (b'"RUNTIME": 15', b'"RUNTIME": 1e' + b"9" * 5000), 1),
]


def _problems(path: Path, target: str) -> list[str]:
    with pytest.raises(ValidationFailed) as caught:
        plan_matrix_file(path, target=target)
    return caught.value.lines()


@pytest.mark.parametrize(
    ("base", "target", "change", "text", "expected"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_a_long_bad_input_is_refused_in_short_lines(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    base: dict[str, Any],
    target: str,
    change: Any,
    text: Any,
    expected: int,
) -> None:
    # given: a shipped example with one long or repeated bad thing in it
    doc = copy.deepcopy(base)
    if change is not None:
        change(doc)
    data = json.dumps(doc, ensure_ascii=False).encode("utf-8")
    if text is not None:
        assert text[0] in data
        data = data.replace(text[0], text[1], 1)
    path = tmp_path / "m.json"
    path.write_bytes(data)
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()

    # when
    code = cli.main(["plan", "m.json", "--target", target])
    out, err = capsys.readouterr()

    # then: refused, one short line per problem, nothing made
    assert code == 2
    lines = err.split("\n")
    assert lines[-1] == ""  # every line ends with a newline, and only there
    lines = lines[:-1]
    assert len(lines) == expected, lines
    assert lines == _problems(Path("m.json"), target)
    for line in lines:
        assert line.startswith("m.json: "), line[:200]
        assert len(line) <= MAX_LINE, line[:400]
        assert not set(line) & {"\r", "\x0b", "\x0c", "\x85", "\u2028", "\u2029", "\x00"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json"]


def test_an_event_with_thousands_of_non_string_keys_is_one_line() -> None:
    # the Plan Lambda's event is parsed already: its keys need not be strings
    doc = copy.deepcopy(AWS)
    doc["storage"][0].update({i: 1 for i in range(3000)})
    with pytest.raises(ValidationFailed) as caught:
        validate_matrix_dict(doc)
    assert caught.value.lines() == ["storage[0]: keys must be strings, got int"]
