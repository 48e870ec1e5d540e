"""The README's checkable lists against the code they describe, so they cannot drift.

Each test reads one clearly delimited part of README.md (a table found by its header
line, a bash block, the `--view` paragraph) and compares it with what the code does:
exit statuses, the matrix fields with their bounds and defaults, storage types and
their fields, results tables, report views and target metrics, the fio job library,
deploy context keys, and every `iofleet` and `make` command the docs show. Prose is
not compared.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text(encoding="utf-8")
DOCS = {"README.md": README} | {
    f"docs/{p.name}": p.read_text(encoding="utf-8") for p in sorted((REPO / "docs").glob("*.md"))
}


def _cells(line: str) -> list[str]:
    """A Markdown table row's cells (`\\|` inside a cell is not a separator)."""
    parts = re.split(r"(?<!\\)\|", line.strip())[1:-1]
    return [p.strip().replace("\\|", "|") for p in parts]


def md_table(header: str, text: str = README) -> list[list[str]]:
    """The rows of the one table whose header line is `header`."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() == header]
    assert len(starts) == 1, f"expected one table headed {header!r}, found {len(starts)}"
    rows = []
    for line in lines[starts[0] + 2 :]:
        if not line.startswith("|"):
            break
        rows.append(_cells(line))
    assert rows, header
    return rows


def _ticked(text: str) -> list[str]:
    return re.findall(r"`([^`]+)`", text)


def _name(cell: str) -> str:
    return cell.strip("`")


# --- exit statuses ------------------------------------------------------------------


def test_the_exit_status_table_names_every_status_iofleet_exits_with() -> None:
    from iofleet import errors
    from iofleet.local.stopping import STOP_SIGNALS

    documented = {int(n) for row in md_table("| status | meaning |") for n in row[0].split(",")}
    constants = {
        value
        for name, value in vars(errors).items()
        if name.startswith("EXIT_") and isinstance(value, int)
    }
    interrupted = {128 + int(s) for s in STOP_SIGNALS}
    assert documented == constants | interrupted


# --- matrix reference ---------------------------------------------------------------


def _matrix_fields() -> dict[str, Any]:
    from iofleet.plan.matrix import Limits, Matrix

    fields: dict[str, Any] = {}
    for name, info in Matrix.model_fields.items():
        if name == "limits":
            fields |= {f"limits.{n}": i for n, i in Limits.model_fields.items()}
        else:
            fields[name] = info
    return fields


MATRIX_TABLE = "| field | type | meaning |"


def test_the_matrix_reference_lists_every_matrix_field() -> None:
    documented = [_name(row[0]) for row in md_table(MATRIX_TABLE)]
    assert len(documented) == len(set(documented))
    assert set(documented) == set(_matrix_fields())


def _bounds(info: Any) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in info.metadata:
        for attr in ("ge", "gt", "le", "min_length", "max_length"):
            if getattr(item, attr, None) is not None:
                out[attr] = getattr(item, attr)
    return out


def _number(text: str) -> int:
    return int(text.replace(",", ""))


@pytest.mark.parametrize("row", md_table(MATRIX_TABLE), ids=lambda row: _name(row[0]))
def test_a_matrix_fields_documented_bounds_and_default_are_the_validators(row: list[str]) -> None:
    name, kind = _name(row[0]), row[1]
    info = _matrix_fields()[name]
    bounds = _bounds(info)
    if m := re.match(r"int ([\d,]+)–([\d,]+)", kind):  # `int 1–1000, default 1`
        assert (bounds.get("ge"), bounds.get("le")) == (_number(m[1]), _number(m[2]))
    if m := re.match(r"list(?: of|,) (\d+)–(\d+)", kind):  # `list, 1–100`
        assert (bounds.get("min_length"), bounds.get("max_length")) == (int(m[1]), int(m[2]))
    if m := re.match(r"list of at most (\d+)", kind):
        assert (bounds.get("min_length"), bounds.get("max_length")) == (None, int(m[1]))
    if m := re.match(r"string, ≤ (\d+)", kind):
        assert bounds.get("max_length") == int(m[1])
    if m := re.match(r"number, > (\d+) and ≤ (\d+)", kind):
        assert (bounds.get("gt"), bounds.get("le")) == (int(m[1]), int(m[2]))
    if m := re.search(r"default (\w+)", kind):  # `int 1–40, default 1`, `bool, default false`
        assert str(info.default).lower() == m[1]
    if m := re.search(r"`([^`]+)` \(default\)", kind):  # `as-is` (default) | ...
        assert info.default == m[1]


def test_the_storage_types_table_lists_every_type_and_its_fields() -> None:
    from iofleet.plan.matrix import _STORAGE_CLASSES

    rows = {_name(row[0]): row[1] for row in md_table("| `type` | fields | notes |")}
    assert set(rows) == set(_STORAGE_CLASSES)
    for kind, fields in rows.items():
        documented = {t for t in _ticked(fields) if re.fullmatch(r"[a-z_]+", t)}
        model = set(_STORAGE_CLASSES[kind].model_fields) - {"type", "label"}
        assert documented == model, kind


# --- results, report ----------------------------------------------------------------


def test_the_results_schema_table_lists_every_table() -> None:
    from iofleet.results.schema import TABLES

    documented = [_name(row[0]) for row in md_table("| table | one row per |")]
    assert sorted(documented) == sorted(t.name for t in TABLES)


def test_the_views_report_takes_are_the_ones_listed() -> None:
    from iofleet.report.machine import VIEWS

    [paragraph] = [p for p in README.split("\n\n") if p.startswith("**Views** (`--view`")]
    listed = _ticked(paragraph.split("):", 1)[1])
    assert listed == list(VIEWS)


def test_the_target_metric_table_is_the_codes() -> None:
    from iofleet.results.decide import TARGET_METRICS

    documented: dict[str, set[str] | None] = {}
    for names, _what, unit in md_table("| METRIC | what | unit |"):
        units = set(_ticked(unit)) if unit.startswith("required") else None
        for name in _ticked(names):
            documented[name] = units
    assert documented == {
        name: set(m.units) if m.units is not None else None for name, m in TARGET_METRICS.items()
    }


def test_the_job_tables_list_every_job_of_the_library() -> None:
    library = sorted(p.stem for p in (REPO / "fio-jobs").glob("*.fio"))
    readme = [n for row in md_table("| job | from |") for n in _ticked(row[0])]
    jobs_readme = (REPO / "fio-jobs" / "README.md").read_text(encoding="utf-8")
    own = [_name(row[0]) for row in md_table("| name | what | seed |", jobs_readme)]
    assert sorted(readme) == library
    assert sorted(own) == library


# --- deploy context keys ------------------------------------------------------------


def test_the_context_keys_table_lists_every_key_with_its_default() -> None:
    from infra.config import KEYS, DeployConfig

    rows = {_name(row[0]): row[1] for row in md_table("| key | default | meaning |")}
    assert set(rows) == set(KEYS)
    defaults = DeployConfig()
    for key, default in rows.items():
        value = getattr(defaults, key)
        assert default == ("(none)" if value is None else str(value)), key


# --- commands -----------------------------------------------------------------------


def _bash_lines() -> list[tuple[str, str]]:
    """(where, line) of each command line in the docs' ```bash blocks."""
    out = []
    for doc, text in DOCS.items():
        for block in re.findall(r"^```bash\n(.*?)^```", text, flags=re.M | re.S):
            for line in block.splitlines():
                if line.strip() and not line.lstrip().startswith("#"):
                    out.append((doc, line.strip()))
    return out


def _argv(line: str) -> list[str]:
    line = re.sub(r"<[^>]+>", "x", line)  # <run_a>, <AthenaWorkGroup>
    argv = shlex.split(line, comments=True)
    return argv[: argv.index(">")] if ">" in argv else argv


IOFLEET_LINES = [(d, line) for d, line in _bash_lines() if line.startswith(".venv/bin/iofleet ")]


@pytest.mark.parametrize(("doc", "line"), IOFLEET_LINES, ids=[ln for _, ln in IOFLEET_LINES])
def test_every_iofleet_command_the_docs_show_parses(doc: str, line: str) -> None:
    from iofleet.cli import build_parser

    argv = _argv(line)[1:]
    try:
        build_parser().parse_args(argv)
    except SystemExit as exc:
        pytest.fail(f"{doc}: {line!r} does not parse (exit {exc.code})")
    for arg in argv:  # the repo's own files it names exist
        if re.match(r"(examples|tests)/", arg) and "*" not in arg:
            assert (REPO / arg).exists(), f"{doc}: {line!r}: no {arg}"


def test_every_make_target_the_docs_show_exists() -> None:
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([a-z][a-z-]*):", makefile, flags=re.M))
    shown = {
        (doc, _argv(line)[1])
        for doc, line in _bash_lines()
        if line.startswith("make ") and len(_argv(line)) > 1
    }
    assert shown
    assert {(doc, t) for doc, t in shown if t not in targets} == set()
