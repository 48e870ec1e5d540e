"""iofleet/quote.py: how a refusal quotes what the user wrote (docs/decisions.md, 63)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from iofleet.errors import MAX_PROBLEM, Problem
from iofleet.quote import clip, quote, quote_json

BOUND = 80  # the longest a quoted value gets (head, tail, quotes and its length)
BREAKS = {"\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"}


def test_a_short_string_is_quoted_as_repr_quotes_it() -> None:
    assert quote("gp9") == "'gp9'"
    assert quote("it's") == '"it\'s"'
    assert quote("a\nb") == "'a\\nb'"
    assert quote("p" * 49) == repr("p" * 49)  # a name one over its rule's 48
    assert quote("x" * 78) == repr("x" * 78)


def test_a_long_string_keeps_its_head_its_tail_and_its_length() -> None:
    assert quote("q" * 5000) == f"'{'q' * 20}...{'q' * 8}' (5000 characters)"
    assert quote("a" * 100 + "TAIL") == f"'{'a' * 20}...aaaaTAIL' (104 characters)"


def test_a_key_is_quoted_as_json_and_clipped_the_same_way() -> None:
    assert quote_json('a"b') == '"a\\"b"'
    assert quote_json("k" * 5000) == f'"{"k" * 20}...{"k" * 8}" (5000 characters)'


def test_a_number_literal_is_clipped_unquoted() -> None:
    assert clip("1e400") == "1e400"
    assert clip("9" * 5000) == f"{'9' * 20}...{'9' * 8} (5000 characters)"
    # a tool's message keeps more of itself
    assert clip("e" * 1000, 160) == f"{'e' * 40}...{'e' * 16} (1000 characters)"


def test_an_integer_past_pythons_int_to_str_limit_is_named_by_its_width() -> None:
    # str(10**5000) raises ValueError (sys.int_info.default_max_str_digits is 4300)
    assert quote(10**5000) == f"an integer of {(10**5000).bit_length()} bits"
    assert quote(2**63) == str(2**63)
    assert quote([10**5000]) == "a value of type list"


@given(st.text(max_size=6000), st.booleans())
def test_any_string_is_one_short_line(text: str, ascii_only: bool) -> None:
    for shown in (quote(text, ascii_only=ascii_only), quote_json(text), clip(text)):
        assert len(shown) <= BOUND, shown
        assert not set(shown) & BREAKS, shown
        assert shown.isprintable(), shown


@given(st.text(min_size=1, max_size=78).filter(lambda t: len(repr(t)) <= 80))
def test_a_short_string_reads_as_before(text: str) -> None:
    assert quote(text) == repr(text)


def test_a_problem_line_is_clipped_even_when_its_message_was_not() -> None:
    # the last guard in errors.Problem, for a message that quoted something whole
    line = str(Problem("storage[0].type", "x" * 5000 + "\n"))
    assert len(line) < MAX_PROBLEM
    assert line.startswith("storage[0].type: xxx") and line.endswith("x\\n (5019 characters)")
