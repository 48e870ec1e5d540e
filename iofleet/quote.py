"""A user's value as a refusal quotes it: whole when short, clipped when long.

One helper for every message that names what the user wrote (a value, a key, a
number literal), so a refusal stays one short line however long the input is
(docs/decisions.md, record 63). Stdlib only: the stdlib-only readers (jobtext, the
results schema) import it.

- a string whose quoted form is at most LIMIT characters is quoted as `repr` quotes it
  (`'gp9'`), so short refusals read as they always did;
- a long one keeps a head and a tail and says how long it was:
  `'qqqqqqqqqqqqqqqqqqqq...qqqqqqqq' (5000 characters)`;
- a character that is not printable (a newline, a NUL, U+2028) is written as its
  escape, so no quote can break the line;
- an integer too long for `str()` (Python refuses past sys.int_info digits) is
  named by its size: `an integer of 16610 bits`.
"""

from __future__ import annotations

import json
from collections.abc import Callable

# A value whose quoted form is longer than this is clipped (a 49-character name, one
# over its rule's 48, is still shown whole).
LIMIT = 80
# What a clipped string keeps of its head and of its tail (escaped characters).
HEAD = 20
TAIL = 8
# An integer wider than this many bits is named by its width, not written out.
MAX_INT_BITS = 128


def quote(value: object, *, ascii_only: bool = False) -> str:
    """`value` for a message: a string quoted like `repr`, anything else as `repr`
    writes it; clipped to a head, `...`, a tail and its length when long.

    `ascii_only`: non-ASCII characters are escaped too (as `ascii()` does)."""
    if isinstance(value, str):
        return _quote_str(value, ascii_only)
    if isinstance(value, int) and not isinstance(value, bool):
        return _int_text(value)
    try:
        text = ascii(value) if ascii_only else repr(value)
    except ValueError:  # a container holding an integer past the int-to-str limit
        return f"a value of type {type(value).__name__}"
    return clip(text)


def quote_json(text: str) -> str:
    """`text` as a JSON string (`json.dumps`), clipped when long (a key in a path)."""
    if len(text) <= LIMIT:
        whole = json.dumps(text)
        if len(whole) <= LIMIT:
            return whole
    return _clipped(text, '"', lambda ch: json.dumps(ch)[1:-1])


def clip(text: str, limit: int = LIMIT) -> str:
    """Text (a number literal, a path, a tool's message) unquoted; clipped when longer
    than `limit` (head and tail in proportion). Line breaks and other unprintable
    characters are escaped."""
    escape = _escaper("", ascii_only=False)
    if len(text) <= limit:
        whole = text if text.isprintable() else "".join(map(escape, text))
        if len(whole) <= limit:
            return whole
    return _clipped(text, "", escape, HEAD * limit // LIMIT, TAIL * limit // LIMIT)


def _int_text(value: int) -> str:
    if value.bit_length() > MAX_INT_BITS:
        return f"an integer of {value.bit_length()} bits"
    return repr(value)


def _quote_str(value: str, ascii_only: bool) -> str:
    if len(value) <= LIMIT:
        whole = ascii(value) if ascii_only else repr(value)
        if len(whole) <= LIMIT:
            return whole
    # the quote `repr` would choose for the kept characters
    piece = value[:HEAD] + value[-TAIL:]
    q = '"' if "'" in piece and '"' not in piece else "'"
    return _clipped(value, q, _escaper(q, ascii_only))


def _escaper(q: str, ascii_only: bool) -> Callable[[str], str]:
    def escape(ch: str) -> str:
        if ch == "\\":
            return "\\\\"
        if ch == q:
            return "\\" + q
        if ch.isprintable() and not (ascii_only and ord(ch) > 0x7F):
            return ch
        return ascii(ch)[1:-1] if ascii_only else repr(ch)[1:-1]

    return escape


def _clipped(
    value: str, q: str, escape: Callable[[str], str], head_max: int = HEAD, tail_max: int = TAIL
) -> str:
    """`q head ... tail q (N characters)`, head and tail at most HEAD and TAIL escaped
    characters (fewer when a character's escape would cross that budget)."""
    head: list[str] = []
    used = 0
    end = 0
    for ch in value:
        text = escape(ch)
        if used + len(text) > head_max:
            break
        head.append(text)
        used += len(text)
        end += 1
    tail: list[str] = []
    used = 0
    start = len(value)
    while start > end:
        text = escape(value[start - 1])
        if used + len(text) > tail_max:
            break
        tail.append(text)
        used += len(text)
        start -= 1
    return f"{q}{''.join(head)}...{''.join(reversed(tail))}{q} ({len(value)} characters)"
