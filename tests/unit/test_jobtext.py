"""The one reader of fio job text and the one number parser (iofleet/plan/jobtext.py).

The expected values are fio 3.33's own (`fio --debug=parse --parse-only` and real runs:
tests/integration/test_jobtext_real.py checks the same texts against the fio binary).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from iofleet.plan.jobtext import (
    JobTextError,
    Percent,
    fio_size,
    fio_time_us,
    read_jobs,
    read_sections,
    size_bytes,
    split_option,
    value_pieces,
)


def _jobs(text: str, env: dict[str, str] | None = None, path: Path = Path("job.fio")):  # type: ignore[no-untyped-def]
    return read_jobs(path, env or {}, text.splitlines())


@pytest.mark.parametrize(
    ("text", "kb_base", "expected"),
    [
        ("4k", 1024, 4096),
        ("4K", 1024, 4096),
        ("4kb", 1024, 4096),
        ("4ki", 1024, 4096),  # not "kib": the k alone
        ("4kib", 1024, 4000),  # fio's compatibility rule: IEC is the other base
        ("4KiB", 1000, 4096),
        ("4k", 1000, 4000),
        ("010", 1024, 10),  # strtoll base 10: not octal
        ("010k", 1024, 10240),
        ("0x1000", 1024, 4096),
        ("0x10k", 1024, 16),  # hex: no unit
        ("10x", 1024, 16),  # "0x" anywhere makes it hex
        ("4q", 1024, 4),  # an unknown unit multiplies by 1
        ("4 k", 1024, 4),
        (" 4k", 1024, 4),  # a blank before the number: the unit is not looked for
        ("1.5g", 1024, 1),
        ("4k-8k", 1024, 4096),  # the first piece of a list
        ("+4k", 1024, 4096),
        ("50%", 1024, Percent(50)),
        ("4e3", 1024, 4),
        ("k", 1024, None),
        ("", 1024, None),
        ("(4*1024)", 1024, None),  # arithmetic: Debian's fio 3.33 has none
        ("18446744073709551616", 1024, None),
    ],
)
def test_a_size_is_what_fio_reads(text: str, kb_base: int, expected: object) -> None:
    assert fio_size(text, kb_base) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("10", 10_000_000), ("500ms", 500_000), ("1m", 60_000_000), ("10x", 16), ("1.5", 1_000_000)],
)
def test_a_runtime_is_what_fio_reads(text: str, expected: int) -> None:
    assert fio_time_us(text, is_seconds=True) == expected


def test_size_bytes_refuses_what_it_cannot_use() -> None:
    assert size_bytes("25%", whole=1000) == 250
    for text in ("x", "-1m", "25%", "0%"):
        with pytest.raises(ValueError):
            size_bytes(text, whole=None if text == "25%" else 1000)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("bs=4k", ("bs", "4k")),
        ("bs = 4k", ("bs", " 4k")),  # the value keeps its blank (fio reads 4 bytes)
        ("time_based", ("time_based", None)),
        ("a=b=c", ("a", "b=c")),
    ],
)
def test_an_option_line_splits_as_fio_splits_it(line: str, expected: tuple[str, str]) -> None:
    assert split_option(line) == expected


def test_value_pieces_follow_fios_list_split() -> None:
    assert value_pieces("4k,8k") == [("4k,8k", True), ("8k", False)]
    assert value_pieces("4k,") == [("4k", True), ("", False)]
    assert value_pieces("4k-8k") == [("4k-8k", True), ("8k", False)]
    assert value_pieces("1m:2m") == [("1m:2m", True), ("2m", False)]


def test_comments_sections_and_includes(tmp_path: Path) -> None:
    (tmp_path / "more.inc").write_text("; options only\niodepth=4 # four\n")
    job = tmp_path / "job.fio"
    job.write_text(
        "# a comment\n  ; another\n[global-x]\nbs=4k ; note\n[ j ]\ninclude more.inc\nsize=1m#x\n"
    )
    sections = read_sections(job)
    assert [(s.name, s.is_global) for s in sections] == [("global-x", True), (" j ", False)]
    assert [o.text for o in sections[1].options] == ["iodepth=4", "size=1m"]
    assert sections[1].options[0].path == str(tmp_path / "more.inc")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("bs=4k\n[j]\n", r"outside of a \[section\]"),
        ("[j]\ninclude missing.inc\n", "cannot read"),
        ("[\n", "without a section name"),
    ],
)
def test_what_fio_cannot_read_is_one_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(JobTextError, match=message):
        read_sections(tmp_path / "job.fio", text.splitlines())


def test_an_include_holds_no_sections(tmp_path: Path) -> None:
    (tmp_path / "sec.inc").write_text("[other]\n")
    with pytest.raises(JobTextError, match="no new sections"):
        read_sections(tmp_path / "job.fio", ["[j]", "include sec.inc"])


def test_a_job_inherits_the_globals_in_force_where_it_starts() -> None:
    first, second = _jobs("[global]\nbs=8k\n[a]\n[global]\nbs=16k\n[b]\n")
    assert (first.number("bs", 4096), second.number("bs", 4096)) == (8192, 16384)


def test_kb_base_applies_to_its_own_section_only_and_before_its_sizes() -> None:
    inherits, own = _jobs("[global]\nsize=4k\n[a]\nkb_base=1000\n[b]\nsize=4k\nkb_base=1000\n")
    assert (inherits.last_number("size"), own.last_number("size")) == (4096, 4000)


def test_an_alias_is_the_option_it_names() -> None:
    (job,) = _jobs("[j]\nblocksize=8k\nreadwrite=randread\nnr_files=3\nwait_for_previous\n")
    assert job.options() == {"bs": "8k", "rw": "randread", "nrfiles": "3", "stonewall": ""}
    assert job.flag("stonewall")


def test_per_direction_values_fill_as_fio_stores_them() -> None:
    jobs = _jobs("[global]\nbs=2k\n[a]\nbs=4k,8k\n[b]\nbs=,8k\n[c]\nbs=16k,\n[d]\nbs=1k,2k,3k\n")
    assert [j.numbers("bs", (4096, 4096, 4096)) for j in jobs] == [
        (4096, 8192, 8192),
        (2048, 8192, 8192),
        (16384, 2048, 2048),
        (1024, 2048, 3072),
    ]


def test_variables_and_host_keywords() -> None:
    (job,) = _jobs("[j]\nsize=${SIZE}\nnumjobs=$ncpus\nbs=${BS}\n", {"SIZE": "1m"})
    assert job.last_number("size") == 1 << 20
    assert job.number("numjobs", 1) is None  # the host's figure: unknown here
    assert job.number("bs", 4096) is None  # ${BS} is not known: fio's environment has it
    assert job.last("bs") is not None and job.last("bs").variables == ("BS",)  # type: ignore[union-attr]


def test_name_option_names_the_job() -> None:
    (job,) = _jobs("[section]\nname=renamed\n")
    assert job.name == "renamed"
