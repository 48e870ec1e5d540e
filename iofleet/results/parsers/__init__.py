"""Parsers for raw artifacts: fio JSON/JSON+, ioping -J, app timing.

Stdlib only (the ingest Lambda and `iofleet parse` share them).
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path


class ParseError(Exception):
    """A raw artifact that cannot be parsed; the message is one line."""


# Where fio's JSON document starts: fio's printer writes "{" on a line of its own and
# "fio version" as its first key (a carriage return ends the last --eta progress line
# before it). A job's name starts the lines of fio's normal report and layout messages,
# which may come first, so a "{" or "[" earlier in the text says nothing: a job named
# "x{1}" or "[4k]".
FIO_DOCUMENT = re.compile(r'(?:^|(?<=\r))\{\s*"fio version"', re.MULTILINE)


# a byte-order mark names the encoding: fio's output saved by Windows PowerShell 5.1
# (`fio ... > out.json`) is UTF-16 LE with a BOM. UTF-32 LE's BOM starts with UTF-16
# LE's: it is looked for first.
_BOMS = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def decode_text(raw: bytes, errors: str = "strict") -> str:
    """An output file's text: the encoding its byte-order mark names, else UTF-8.

    UnicodeDecodeError (with errors="strict") when the bytes are not that encoding.
    """
    for bom, codec in _BOMS:
        if raw.startswith(bom):
            return raw.decode(codec, errors)
    return raw.decode("utf-8", errors)


def detect_kind(text: str) -> str:
    """Guess the artifact kind from its content: fio, ioping or app."""
    stripped = text.lstrip()
    if FIO_DOCUMENT.search(text):  # first: fio's report may start "[4k]: (g=0)"
        return "fio"
    if stripped.startswith("["):
        return "ioping"
    if '"fio version"' in text:
        return "fio"
    if not stripped.startswith("{"):
        from iofleet.results.parsers.ioping import non_json_kind

        # ioping's -B, human-readable or error output: refused by its parser
        if non_json_kind(text):
            return "ioping"
    if stripped.startswith("{"):
        try:
            doc = json.loads(stripped)
        except (ValueError, RecursionError):
            return "fio"
        if isinstance(doc, dict) and "wall_seconds" in doc:
            return "app"
    return "fio"


def parse_file(
    path: Path, kind: str = "auto", warn: Callable[[str], None] | None = None
) -> Iterator[dict]:
    """Records for `iofleet parse`: one dict per record.

    fio's notes and error lines printed before its JSON go to `warn`.
    """
    try:
        text = decode_text(path.read_bytes(), errors="replace")
    except OSError as exc:
        raise ParseError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    if kind == "auto":
        if not text or text.isspace():  # a failed run's stdout: fio's or ioping's alike
            raise ParseError(f"{path}: empty file (no fio or ioping output)")
        kind = detect_kind(text)
    try:
        if kind == "fio":
            from iofleet.results.parsers.fio import parse_fio

            parsed = parse_fio(text)
            for warning in parsed.warnings:
                if warn:
                    warn(warning)
            yield from parsed.records
        elif kind == "ioping":
            from iofleet.results.parsers.ioping import no_timed_request, parse_ioping

            parsed_ioping = parse_ioping(text)
            if not parsed_ioping.requests and warn:  # `import` refuses such a file
                warn(f"{path}: {no_timed_request(parsed_ioping)}")
            yield parsed_ioping.summary()
        elif kind == "app":
            from iofleet.results.parsers.app import parse_app

            yield parse_app(text)
        else:
            raise ParseError(f"unknown kind {kind!r}")
    except ParseError as exc:
        raise ParseError(f"{path}: {exc}") from None
