"""fio job text read the way fio reads it: the one reader and the one number parser of iofleet.

Every caller reads job files through this module: the option check (fioopts), the expected
ceilings and the job's files (expect.JobProfile: the room check, the EFS transfer cost), the
Mountpoint check and traffic, and the raw-device layout (fiojobs.raw_layout). Users bring job
files nobody here wrote, so the rules are fio's own, read from its source (init.c, parse.c,
options.c; the same in fio 3.28, 3.33 and 3.36) and checked against the fio binary
(tests/integration/test_jobtext_real.py: `fio --debug=parse` prints every value it parsed,
and real runs show the bytes it writes):

- Lines (init.c `__parse_jobs_ini`, parse.c `strip_blank_end`): a line whose first non-blank
  character is `;` or `#` is a comment, and the first `;` and then the first `#` anywhere in a
  line end it (`bs=4k ; note` is `bs=4k`). `[name]` opens a section; a name starting with
  `global` (`[global]`, `[global-x]`) is a global section. No option may come before the first
  section. A line starting with `include` pulls in a file of option lines (no sections in it),
  relative to the including file when that name does not exist relative to the directory fio
  runs in (iofleet resolves it against the including file: fio's run directory is not known
  at plan time).
- Options (parse.c `get_option`): the name ends at the first `=` and loses the blanks after
  it; the value is everything after the `=`, *blanks included*: `bs = 4k` is bs=" 4k", which
  fio reads as 4 bytes (the number parser stops at the blank before the unit). Names are
  case-sensitive; an alias (`blocksize`, `readwrite`) is the option it names.
- Inheritance (init.c `get_new_job`): a job section starts from the global options in force
  where it starts; a `[global]` after it does not change it.
- Order (parse.c `sort_options`): in a section fio applies `kb_base` (and `unit_base`,
  `lockfile`, `cpus_allowed_policy`) before everything else and `filename`/`filename_format`
  last, so a section's kb_base applies to all its sizes, wherever the line is; sizes already
  read in a [global] keep the kb_base of that [global].
- Variables (options.c `fio_option_dup_subs`): `${NAME}` is replaced from fio's environment
  after the comment is cut; an unset one becomes empty. `$pagesize`, `$mb_memory`, `$ncpus`
  are the host's figures (then `bc` computes a value with + - * /): unknown at plan time.
- Numbers (parse.c `str_to_decimal`, `get_mult_bytes`, `get_mult_time`): C `strtoll` in base
  10 (`010` is 10) unless the text holds `0x` anywhere (base 16; then no unit applies:
  `0x10k` is 16); then a unit read from the first character after the digits: `k m g t p`
  multiply by kb_base^n (1024 by default), `kib mib gib tib pib` (any case) by the *other*
  base (1000 with kb_base=1024: fio's compatibility rule), anything else (`4q`, `4b`, `4 k`,
  `1.5g`) by 1; `N%` is a percentage. Times: `us ms s m h d`, a bare number in the option's
  own unit (seconds for runtime), any other letter by 1.
- Lists (parse.c `handle_option`): a numeric value splits at `,` (else at `:`, else at `-`)
  into read, write and trim: `bs=4k,8k` reads 4k and writes and trims 8k, `bs=4k-8k` the same,
  `bs=,8k` keeps the read size it had, `bs=4k,` sets the read size only.

Stdlib only: the Plan Lambda and the agent import it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from iofleet.quote import quote

KEYWORDS = ("$pagesize", "$mb_memory", "$ncpus")  # options.c fio_keywords
MAX_INCLUDE_DEPTH = 16
LLONG_MAX = (1 << 63) - 1
_VAR_RE = re.compile(r"\$\{([^}]*)\}")
# parse.c sort_options: higher priority first, the rest in their order (glibc's stable sort)
_PRIO = {"kb_base": 1, "unit_base": 1, "lockfile": 1, "cpus_allowed_policy": 1}
_PRIO.update({"filename": -1, "filename_format": -1})
_DIGITS = "0123456789"
_ALPHA = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
_C_SPACE = " \t\n\v\f\r"


class JobTextError(ValueError):
    """A job file fio cannot read at all (the message is one line)."""


# --------------------------------------------------------------------------- lines


@dataclass(frozen=True)
class OptionLine:
    path: str  # the file the line is in (an include may be another file)
    number: int
    text: str  # stripped the way fio strips it, before ${VAR} substitution


@dataclass
class Section:
    name: str
    path: str
    line: int
    options: list[OptionLine]

    @property
    def is_global(self) -> bool:
        return self.name.startswith("global")


def strip_line(raw: str) -> str:
    """fio's strip_blank_front + strip_blank_end: the first ';', then the first '#', end the
    line; blanks and control characters around it go."""
    text = raw.lstrip(_C_SPACE)
    for mark in (";", "#"):
        cut = text.find(mark)
        if cut >= 0:
            text = text[:cut]
    return text.rstrip(_C_SPACE + "".join(map(chr, range(32))) + "\x7f")


# fio reads a job file with fgets(buf, 8192): a longer line is read as two, and its tail
# as an option line of its own that a reader splitting the file otherwise never sees. A
# job line is at most this many bytes (with its line break), well inside fio's buffer.
MAX_LINE_BYTES = 4096
# Characters Python's str.splitlines() breaks a line at and fio does not (fio breaks only
# at '\n'): one reader must see the lines the other sees, so they are refused
_OTHER_BREAKS = "\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"


def fio_lines(text: str, where: str) -> list[str]:
    """`text` split into lines as fio reads it (at '\n' only, a '\r' before it dropped);
    JobTextError (`WHERE:LINE: why`) for a line fio would read differently: longer than
    MAX_LINE_BYTES, a NUL (fio's strings end there) or another line-break character."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the file's last line break
    out = []
    for number, line in enumerate(lines, start=1):
        if line.endswith("\r"):
            line = line[:-1]
        if len(line.encode("utf-8")) + 1 > MAX_LINE_BYTES:
            raise JobTextError(
                f"{where}:{number}: a line of over {MAX_LINE_BYTES} bytes (fio reads a line "
                "in 8 KiB pieces: the rest would be read as a line of its own)"
            )
        bad = next((c for c in line if c == "\x00" or c in _OTHER_BREAKS), None)
        if bad is not None:
            raise JobTextError(
                f"{where}:{number}: character {bad!r} in a line (fio reads lines up to "
                "'\\n' and strings up to a NUL: write one option per line)"
            )
        out.append(line)
    return out


def _read(path: Path) -> list[str]:
    try:
        # bytes, not read_text: its universal newlines would turn a '\r' into a line break
        return fio_lines(path.read_bytes().decode("utf-8"), str(path))
    except OSError as exc:
        raise JobTextError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise JobTextError(f"{path} is not UTF-8 (byte offset {exc.start})") from None


def _include_path(including: Path, name: str) -> Path:
    target = Path(name)
    if target.is_absolute():
        return target
    return including.parent / target


# What a job file iofleet runs may include (read_sections `includes="beside"`): a file
# of the job's own directory. iofleet puts the included lines into the job text it gives
# fio (fiojobs.render_job), so fio looks nothing up; it would look in its working
# directory (the slot's target, which a workload writes) before the job file's.
_INCLUDE_NAME_RE = re.compile(r"[A-Za-z0-9_+-][A-Za-z0-9._+-]*\Z")
INCLUDE_BESIDE = (
    "must name a file beside the job file (letters, digits and . _ + -, not starting with '.')"
)


def _include_problem(target: Path, name: str, rule: str) -> str | None:
    if rule != "beside":
        return None
    if not _INCLUDE_NAME_RE.match(name):
        return INCLUDE_BESIDE
    if target.is_symlink():  # the file it names may be anywhere (a root-only one)
        return "a link: the included file must be a regular file beside the job file"
    if not target.is_file():  # a FIFO or a device would hang or never end the read
        return "no such regular file beside the job file"
    return None


def read_sections(
    path: Path,
    lines: list[str] | None = None,
    includes: str = "fio",
    flat: list[str] | None = None,
) -> list[Section]:
    """The sections of job file `path` (or of `lines`, read as that file) with their option
    lines, includes expanded. JobTextError for what fio refuses to read.

    `includes`: "fio" reads an include as fio would find it beside the job file (any
    path); "beside" takes only a file of the job's own directory (INCLUDE_BESIDE),
    checked before it is read. `flat` gets every line of the file as fio reads it, each
    include line replaced by the included file's lines: the one text the sections are."""
    sections: list[Section] = []

    def walk(file: Path, text_lines: list[str], depth: int, into: Section | None) -> None:
        for number, raw in enumerate(text_lines, start=1):
            text = strip_line(raw)
            if flat is not None and not text.startswith("include"):
                flat.append(raw)  # an include line: the included file's lines instead
            if not text:
                continue
            if text.startswith("["):
                if depth > 0:
                    raise JobTextError(f"{file}:{number}: no new sections in included files")
                if text == "[":  # sscanf("[%255[^\n]]") reads no name
                    raise JobTextError(f"{file}:{number}: a '[' without a section name")
                # sscanf("[%255[^\n]]"), then the last character dropped (the ']')
                into = Section(text[1:256][:-1], str(file), number, [])
                sections.append(into)
                continue
            if into is None:
                raise JobTextError(
                    f"{file}:{number}: option {quote(text)} outside of a [section] (fio refuses it)"
                )
            if text.startswith("include"):
                name = text[len("include") + 1 :]
                if depth >= MAX_INCLUDE_DEPTH:
                    raise JobTextError(f"{file}:{number}: includes nest too deep")
                target = _include_path(file, name)
                problem = _include_problem(target, name, includes)
                if problem:
                    raise JobTextError(f"{file}:{number}: include {quote(name)}: {problem}")
                try:
                    included = _read(target)
                except JobTextError as exc:
                    raise JobTextError(f"{file}:{number}: include {name}: {exc}") from None
                walk(target, included, depth + 1, into)
                continue
            into.options.append(OptionLine(str(file), number, text))

    walk(path, lines if lines is not None else _read(path), 0, None)
    return sections


def split_option(text: str) -> tuple[str, str | None]:
    """(name, value) as parse.c get_option splits a line: the name ends at the first '='
    and loses its trailing blanks; the value keeps its leading ones; no '=': no value."""
    name, eq, value = text.partition("=")
    return strip_line(name), (value if eq else None)


def substitute(text: str, env: Mapping[str, str]) -> tuple[str, bool, tuple[str, ...]]:
    """(text with ${VAR}s replaced from `env`, whether every one was in `env`, the VARs).
    A VAR not in `env` is left as written (fio would take it from its environment)."""
    used = tuple(_VAR_RE.findall(text))
    known = all(v in env for v in used)
    return _VAR_RE.sub(lambda m: env.get(m.group(1), m.group(0)), text), known, used


def has_keyword(text: str) -> bool:
    """The text uses one of the host's figures fio fills in ($ncpus, ...)."""
    return any(k in text for k in KEYWORDS)


# --------------------------------------------------------------------------- numbers


@dataclass(frozen=True)
class Percent:
    """`N%`: a share of the file's or device's size, known only where fio runs."""

    value: int


def _strtoll(text: str, base: int) -> tuple[int, int, bool]:
    """C strtoll: (value, characters used, out of range); (0, 0, False) when no number."""
    i, n = 0, len(text)
    while i < n and text[i] in _C_SPACE:
        i += 1
    sign = 1
    if i < n and text[i] in "+-":
        sign = -1 if text[i] == "-" else 1
        i += 1
    digits = "0123456789abcdef"[:base]
    if base == 16 and text[i : i + 2].lower() == "0x" and text[i + 2 : i + 3].lower() in digits:
        if text[i + 2 : i + 3]:
            i += 2
    start = i
    while i < n and text[i].lower() in digits:
        i += 1
    if i == start:
        return 0, 0, False
    value = sign * int(text[start:i], base)
    if value > LLONG_MAX:
        return LLONG_MAX, i, True
    if value < -LLONG_MAX - 1:
        return -LLONG_MAX - 1, i, True
    return value, i, False


def _mult_bytes(unit: str | None, kb_base: int) -> tuple[int, bool]:
    """parse.c __get_mult_bytes: (multiplier, is a percentage)."""
    if unit is None:
        return 1, False
    c = unit.lower()
    for i, ch in enumerate(c):
        if ch in ":-,/":
            c = c[:i]
            break
    other = 1000 if kb_base == 1024 else 1024
    for power, prefix in enumerate(("kib", "mib", "gib", "tib", "pib"), start=1):
        if c.startswith(prefix):
            return other**power, False
    for power, prefix in enumerate("kmgtp", start=1):
        if c.startswith(prefix):
            return kb_base**power, False
    return 1, c.startswith("%")


def _unit_after_digits(text: str, signs_once: bool) -> str | None:
    """What parse.c's get_mult_bytes / get_mult_time look at: the text from the first
    character that is neither a digit nor (before a digit, for sizes) a sign; None unless
    that character is a letter (or '%' for sizes)."""
    p, seen = 0, False
    while p < len(text):
        ch = text[p]
        if ch not in _DIGITS and (ch not in "+-" or (signs_once and seen)):
            break
        seen = seen or ch in _DIGITS
        p += 1
    ch = text[p : p + 1]
    if ch and (ch in _ALPHA or (signs_once and ch == "%")):
        return text[p:]
    return None


def fio_size(text: str, kb_base: int = 1024) -> int | Percent | None:
    """What fio reads from one size `text` (parse.c check_str_bytes), None where fio refuses
    it. `(...)` arithmetic is refused (Debian's fio 3.33 is built without it; iofleet never
    evaluates it)."""
    if not text or text.startswith("("):
        return None
    base = 16 if ("0x" in text or "0X" in text) else 10
    value, used, out_of_range = _strtoll(text, base)
    if used == 0 or (value == LLONG_MAX and out_of_range):
        return None
    unit = text if len(text) < 2 else _unit_after_digits(text, signs_once=True)
    mult, percent = _mult_bytes(unit, kb_base)
    if percent:
        return Percent(value)
    return value * mult


def fio_time_us(text: str, is_seconds: bool) -> int | None:
    """What fio reads from one time `text` in microseconds (parse.c check_str_time) for an
    option whose bare numbers are seconds (`is_seconds`) or microseconds; None if refused."""
    if not text or text.startswith("("):
        return None
    base = 16 if ("0x" in text or "0X" in text) else 10
    value, used, out_of_range = _strtoll(text, base)
    if used == 0 or (value == LLONG_MAX and out_of_range):
        return None
    unit = _unit_after_digits(text, signs_once=False)
    if unit is None:
        return value * (1_000_000 if is_seconds else 1)
    c = unit.lower()
    if c.startswith(("us", "usec")):
        mult = 1
    elif c.startswith(("ms", "msec")):
        mult = 1000
    else:
        mult = {"s": 1_000_000, "m": 60_000_000, "h": 3_600_000_000, "d": 86_400_000_000}.get(c, 1)
    return value * mult


def fio_int(text: str) -> int | None:
    """A boolean or set-flag value as parse.c check_int reads it (sscanf %u, %x with 0x)."""
    if not text:
        return None
    if "0x" in text or "0X" in text:
        m = re.match(r"[ \t\n\v\f\r]*([+-]?)(?:0[xX])?([0-9a-fA-F]+)", text)
        return None if not m else int(m[2], 16) * (-1 if m[1] == "-" else 1)
    m = re.match(r"[ \t\n\v\f\r]*([+-]?)([0-9]+)", text)
    return None if not m else int(m[2]) * (-1 if m[1] == "-" else 1)


_WRITTEN_SIZE = re.compile(r"\+?(?:0x[0-9a-f]+|[0-9]+(?:[kmgtp](?:ib|i|b)?|b)?)", re.I)


def size_bytes(text: str, kb_base: int = 1024, whole: int | None = None) -> int:
    """A size in bytes as fio reads it, for the callers that need a figure: `N%` is that
    share of `whole`. ValueError (one line) where fio refuses it, for a percentage with no
    `whole`, and for a negative size or a number past fio's 64 bits."""
    value = fio_size(text, kb_base)
    if value is None:
        raise ValueError(f"{quote(text)} is not a fio size")
    if isinstance(value, Percent):
        if whole is None or not 0 < value.value <= 100:
            raise ValueError(f"{quote(text)} is not a usable percentage here")
        return whole * value.value // 100
    if value < 0 or value > LLONG_MAX:
        raise ValueError(f"{quote(text)} is not a size iofleet can use")
    return value


def written_as_read(text: str) -> bool:
    """fio reads the size `text` as a reader would (no trailing junk, no blank before the
    unit, no unit after a hex number): `4k`, `010`, `4KiB`, `0x1000`, `+4k`."""
    return bool(_WRITTEN_SIZE.fullmatch(text))


# --------------------------------------------------------------------------- option values


def value_pieces(value: str, split_dash: bool = True) -> list[tuple[str, bool]]:
    """parse.c handle_option's split of a numeric value: [(text the piece's parser sees, more
    pieces follow)]. A piece's text runs to the end of the value (each parser stops at its
    own separator): `4k,8k` -> ("4k,8k", True), ("8k", False); `4k,` -> ("4k", True),
    ("", False)."""
    pieces: list[tuple[str, bool]] = []
    rest = value
    while True:
        cut = rest.find(",")
        text = rest
        if cut >= 0 and cut == len(rest) - 1:
            text = rest[:cut]  # a trailing comma is dropped, and the (empty) rest is parsed
        if cut < 0 and split_dash:
            cut = rest.find(":")
            if cut < 0:
                cut = rest.find("-")
        pieces.append((text, cut >= 0))
        if cut < 0:
            return pieces
        rest = rest[cut + 1 :]


@dataclass(frozen=True)
class Assignment:
    """One option line of a job as fio applies it."""

    name: str  # the option (an alias resolved)
    value: str | None  # after ${VAR} substitution; None: no '='
    line: OptionLine
    kb_base: int  # in force when fio parsed the line
    known: bool  # every ${VAR} it uses had a value and no $ncpus-like keyword
    variables: tuple[str, ...] = ()


@dataclass
class Job:
    """One job section of a file with every option line in force for it, in fio's order:
    the global ones it inherits, then its own."""

    section: Section
    assignments: list[Assignment] = field(default_factory=list)

    @property
    def name(self) -> str:
        """fio's job name: `name=` if set, else the section name."""
        last = self.last("name")
        return last.value if last is not None and last.value else self.section.name

    def last(self, name: str) -> Assignment | None:
        for a in reversed(self.assignments):
            if a.name == name:
                return a
        return None

    def given(self, name: str) -> list[Assignment]:
        return [a for a in self.assignments if a.name == name]

    def options(self) -> dict[str, str]:
        """option -> its last value (a flag without '=' is "")."""
        return {a.name: a.value or "" for a in self.assignments}

    def number(self, name: str, default: int | None, *, slot: int = 0) -> int | None:
        """An integer or size option as fio stores it (slot 0 read, 1 write, 2 trim for the
        per-direction options); None if a value in force is unknown or a percentage."""
        return self.numbers(name, (default, default, default))[slot]

    def numbers(
        self, name: str, default: tuple[int | None, int | None, int | None]
    ) -> tuple[int | None, int | None, int | None]:
        """A per-direction numeric option (bs, rate, rate_iops) replayed as fio stores it
        (parse.c __handle_option for FIO_OPT_INT / FIO_OPT_ULL): the first piece is the read
        value, the second the write value, the third the trim value, and the last piece
        given fills the directions after it."""
        slots = list(default)
        for a in self.given(name):
            if a.value is None:
                continue
            if not a.known:  # fio fills it in where it runs
                slots = [None, None, None]
                continue
            pieces = value_pieces(a.value)
            for curr, (text, more) in enumerate(pieces):
                parsed: int | Percent | None = fio_size(text.split(",", 1)[0][:127], a.kb_base)
                if parsed is None:
                    continue
                got = parsed if isinstance(parsed, int) else None
                if curr < 3:
                    slots[curr] = got
                if not more:
                    for later in range(curr + 1, 3):
                        slots[later] = got
        return slots[0], slots[1], slots[2]

    def last_number(self, name: str) -> int | Percent | None:
        """A numeric option fio hands to a callback piece by piece (size, io_size, offset):
        the last piece it could read; None when not given or known only where fio runs."""
        found: int | Percent | None = None
        for a in self.given(name):
            if a.value is None:
                continue
            if not a.known:
                found = None
                continue
            for text, _ in value_pieces(a.value):
                if text.endswith("z"):  # zones (FIO_OPT_STR_VAL_ZONE): a zoned device's
                    found = None
                    continue
                parsed = fio_size(text.split(",", 1)[0][:127], a.kb_base)
                if parsed is not None:
                    found = parsed
        return found

    def seconds(self, name: str, is_seconds: bool = True) -> float | None:
        """A time option in seconds; None if not given. Its bare numbers are seconds
        (runtime, ramp_time, startdelay) or, `is_seconds` False, microseconds
        (thinktime)."""
        last = self.last(name)
        if last is None or last.value is None or not last.known:
            return None
        us = fio_time_us(last.value.split(",", 1)[0][:127], is_seconds=is_seconds)
        return None if us is None else us / 1e6

    def flag(self, name: str) -> bool:
        """A set/boolean option (time_based, stonewall): given without a value, or non-zero."""
        last = self.last(name)
        if last is None:
            return False
        if last.value is None:
            return True
        value = fio_int(last.value)
        return bool(value)


def _kb_base(value: str | None) -> int | None:
    """parse.c's match of kb_base against its values "1024" and "1000" (up to ',' or ':')."""
    if value is None:
        return None
    head = re.split(r"[,:]", value, maxsplit=1)[0]
    return int(head) if head in ("1024", "1000") else None


def jobs(
    sections: Iterable[Section], env: Mapping[str, str], canonical: Mapping[str, str] | None = None
) -> list[Job]:
    """The job sections of `sections` with every option in force for each (fio's
    inheritance and order), `${VAR}`s from `env`. `canonical` maps an option name or alias
    to the option (fioopts.canonical_names(); default: the newest fio table's)."""
    if canonical is None:
        from iofleet.plan.fioopts import canonical_names

        canonical = canonical_names()
    inherited: list[Assignment] = []
    out: list[Job] = []
    for section in sections:
        own: list[tuple[str, str | None, OptionLine, bool, tuple[str, ...]]] = []
        for line in section.options:
            text, known, used = substitute(line.text, env)
            name, value = split_option(text)
            known = known and not has_keyword(text)
            own.append((canonical.get(name, name), value, line, known, used))
        own.sort(key=lambda o: -_PRIO.get(o[0], 0))
        kb_base = 1024  # fio's default, then the globals', then the section's own
        for name, value in [(a.name, a.value) for a in inherited] + [o[:2] for o in own]:
            if name == "kb_base":
                kb_base = _kb_base(value) or kb_base
        assigned = [
            Assignment(name, value, line, kb_base, known, used)
            for name, value, line, known, used in own
        ]
        if section.is_global:
            inherited = inherited + assigned
        else:
            out.append(Job(section, inherited + assigned))
    return out


def stonewall_groups(jobs: list[Job]) -> list[list[Job]]:
    """The sections of a job file in the groups fio runs one after the other: a section
    with `stonewall` (`wait_for_previous` is its alias), but the first, starts the next."""
    return _groups(jobs, ("stonewall",))


def reporting_groups(jobs: list[Job]) -> list[list[Job]]:
    """The sections of a job file in fio's reporting groups (its groupid): a section with
    `stonewall` or `new_group`, but the first, starts the next (init.c add_job)."""
    return _groups(jobs, ("stonewall", "new_group"))


def _groups(jobs: list[Job], starts: tuple[str, ...]) -> list[list[Job]]:
    groups: list[list[Job]] = []
    for index, section in enumerate(jobs):
        if not groups or (index and any(section.flag(s) for s in starts)):
            groups.append([])
        groups[-1].append(section)
    return groups


def read_jobs(path: Path, env: Mapping[str, str], lines: list[str] | None = None) -> list[Job]:
    """The jobs of job file `path` (or of `lines`, read as that file); JobTextError if fio
    cannot read it."""
    return jobs(read_sections(path, lines), env)
