"""The fio parser gives the same results and the same errors with orjson (the fast
decoder, when installed) as with the stdlib decoder alone (the agent, the Lambdas):
every fio fixture, every held-out version fixture and every fio probe artifact."""

from __future__ import annotations

from pathlib import Path

import pytest

from iofleet.results.parsers import ParseError
from iofleet.results.parsers import fio as fio_parser

TESTS = Path(__file__).resolve().parents[1]
FILES = sorted(
    [
        *(TESTS / "fixtures" / "fio").glob("*.json"),
        *(TESTS / "fixtures" / "fio" / "versions").glob("*.json"),
        *(TESTS / "data" / "probes" / "artifacts").glob("fio-*"),
    ]
)


def _outcome(text: str) -> object:
    try:
        out = fio_parser.parse_fio(text)
    except ParseError as exc:
        return ("ParseError", str(exc))
    return (
        out.records,
        [(j, i, d, list(h)) for j, i, d, h in out.histograms],
        out.warnings,
        out.fio_version,
    )


def test_orjson_is_installed_for_the_warehouse() -> None:
    assert fio_parser._orjson is not None, "orjson (pyproject dependencies) is not installed"


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_same_outcome_with_and_without_orjson(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = path.read_bytes().decode("utf-8", errors="replace")
    fast = _outcome(text)
    monkeypatch.setattr(fio_parser, "_orjson", None)
    stdlib = _outcome(text)
    assert fast == stdlib
    # and every float is the same double (== would take -0.0 for 0.0)
    assert repr(fast) == repr(stdlib)


def test_fast_path_is_taken_for_plain_fio_output(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plain json+ output never reaches the stdlib decoder when orjson is there."""
    text = (TESTS / "fixtures" / "fio" / "jsonplus-two-jobs.json").read_text()

    class Refuse:
        def __init__(self, *args: object, **kwargs: object) -> None:
            raise AssertionError("the stdlib decoder was used")

    monkeypatch.setattr(fio_parser.json, "JSONDecoder", Refuse)
    assert fio_parser.parse_fio(text).records


def test_progress_lines_ending_in_carriage_returns_before_the_document(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # fio --eta=always --output-format=json,normal: its progress lines end in "\r", the
    # last one right before the "{" (as real fio 3.33 prints it; see
    # tests/integration/test_fio_real_output.py)
    text = (TESTS / "fixtures" / "fio" / "jsonplus-two-jobs.json").read_text()
    with_eta = "Starting 1 process\nJobs: 1 (f=1)\rJobs: 1 (f=1)\r" + text
    expected = fio_parser.parse_fio(text).records
    for decoder in (fio_parser._orjson, None):
        monkeypatch.setattr(fio_parser, "_orjson", decoder)
        out = fio_parser.parse_fio(with_eta)
        assert out.records == expected
        assert out.warnings == ["Starting 1 process"]


@pytest.mark.parametrize(
    "keys",
    [
        ["1", "2", "300"],
        ["+5", "6"],  # int() takes a sign, JSON does not
        ["05", "6"],  # int() takes leading zeros, JSON does not
        ["1_000", "2"],  # int() takes underscores
        [" 7", "8 "],  # int() strips spaces; JSON skips them too
        ["\u0661\u0662", "3"],  # Arabic-Indic digits: int() reads 12
        ["1e3", "4"],  # JSON reads a float
        ["1,2", "3"],  # a comma inside a key
        ["true", "1"],
        ["-0", "1"],
        ["9" * 30, "1"],  # beyond 64 bits
        ["x", "1"],
    ],
)
def test_bin_keys_decode_as_int_would(keys: list[str]) -> None:
    from iofleet.results.parsers.fio import _int_keys

    try:
        want = list(map(int, keys))
    except ValueError:
        want = []
    raw = dict.fromkeys(keys, 1)
    assert _int_keys(raw) == want
