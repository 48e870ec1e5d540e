"""fio job options checked at plan time, against fio's own option table.

`iofleet/plan/data/fio-options-<release>.json` is generated from fio's source
(options.c `fio_options[]`, engines/*.c) by `scripts/gen_fio_options.py`, one file per
fio release the agent runs on (docs/decisions.md #42). No fio binary is needed, so the
Plan Lambda makes the same check as `iofleet plan`.

The job file is read by iofleet/plan/jobtext.py, fio's own rules (init.c
`__parse_jobs_ini`, parse.c, options.c `fio_option_dup_subs`), the one reader every part
of iofleet uses: comments, sections, includes, `key = value` spacing, `${VAR}`s. The
caller gives the variables it knows; a value using any other is not checked (fio may find
it in the environment it runs with). `$pagesize`, `$mb_memory` and `$ncpus` make fio
compute the value with bc: such values are not checked either.

Values follow parse.c: option names are case-sensitive, a list value is cut at `,`
(and, for numbers, at `:` or `-`), sizes take `k m g t p` (+ `i`/`b`/`ib`), times
`us ms s m h d`, an enum value is matched exactly up to its first `,` or `:`. Where fio
silently reads less than what was written (`bs=4q` is 4 bytes, `bs = 4k` is 4 bytes,
`0x10k` is 16, `runtime=10x` is 16 microseconds, `direct=1yes` is 1, `iodepth=1.5` is 1)
the check refuses what fio would misread. One rule fio applies only when a job starts
(not in `--parse-only`) is checked too: fio 3.36's steady-state duration
(`_steadystate_problems`).

Stdlib only (the Plan Lambda imports it).
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from iofleet.plan.jobtext import JobTextError as JobTextError  # raised by check_job_file
from iofleet.plan.jobtext import OptionLine, Section, fio_size, read_sections
from iofleet.plan.jobtext import substitute as _substitute
from iofleet.quote import clip, quote

DATA_DIR = Path(__file__).resolve().parent / "data"
RELEASES = ("3.28", "3.33", "3.36")  # the pinned tables, oldest first
NEWEST = RELEASES[-1]
# fio from the distribution of the host the agent runs on (iofleet/plan/hosts.py)
UBUNTU_FIO = {"22.04": "3.28", "24.04": "3.36"}
DEFAULT_ENGINE = "psync"  # fio's FIO_PREFERRED_ENGINE on Linux
_KEYWORDS = ("$pagesize", "$mb_memory", "$ncpus")
_NUM = r"[+-]?(?:0x[0-9a-f]+|[0-9]+)"
# a size as fio reads it (jobtext.fio_size): no unit after a hex number (`0x10k` is 16)
_SIZE_RE = re.compile(r"[+-]?(?:0x[0-9a-f]+|[0-9]+(?:[kmgtp](?:ib|i|b)?|b)?)", re.I)
_TIME_RE = re.compile(
    r"[+-]?[0-9]+(?:(?:us|ms)[a-z]*|s|m|h|d)?", re.I
)  # fio reads no unit after hex
_INT_RE = re.compile(r"\s*(?:0x[0-9a-f]+|[0-9]+)", re.I)
_FLOAT_RE = re.compile(r"\s*[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:e[+-]?[0-9]+)?", re.I)
_NUMERIC = {
    "FIO_OPT_INT",
    "FIO_OPT_ULL",
    "FIO_OPT_STR_VAL",
    "FIO_OPT_STR_VAL_ZONE",
    "FIO_OPT_STR_VAL_TIME",
}


@dataclass(frozen=True)
class OptionProblem:
    path: str  # the file the line is in (an include may be another file)
    line: int
    section: str
    message: str
    variables: tuple[str, ...] = ()  # the ${VAR}s the line uses

    def text(self) -> str:
        where = f"[{self.section}] " if self.section else ""
        return f"{self.path}:{self.line}: {where}{self.message}"


@cache
def table(release: str) -> dict[str, Any]:
    """The option table of fio `release` (one of RELEASES)."""
    path = DATA_DIR / f"fio-options-{release}.json"
    doc: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return doc


@cache
def _names(release: str) -> dict[str, str]:
    """name or alias -> option name."""
    out: dict[str, str] = {}
    for name, opt in table(release)["options"].items():
        out[name] = name
        if opt.get("alias"):
            out.setdefault(opt["alias"], name)
    return out


def release_for_version(version: str | None) -> str:
    """The pinned table for a `fio --version` text (`fio-3.33`): the newest pinned release
    not newer than it (the oldest for an older fio, the newest when unknown)."""
    m = re.search(r"(\d+)\.(\d+)", version or "")
    if not m:
        return NEWEST
    have = (int(m[1]), int(m[2]))
    older = [r for r in RELEASES if tuple(int(x) for x in r.split(".")) <= have]
    return older[-1] if older else RELEASES[0]


def installed_version(fio: str | None) -> str | None:
    """`fio --version` of the fio at path `fio` (None: not installed or not answering)."""
    return start_version(fio)()


def _version_probe(fio: str) -> Any:
    import subprocess

    return subprocess.Popen(  # noqa: S603 - the fio found on PATH, argv list
        [fio, "--version"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


_ahead: dict[str, Any] = {}  # start_version_ahead: fio path -> its `fio --version` run
_asked: set[Any] = set()  # start_version's runs whose answer has not been read yet


def start_version_ahead(fio: str) -> None:
    """Start `fio --version` now, for the next `start_version(fio)` to take."""
    from iofleet.local.stopping import held

    if fio not in _ahead:
        try:
            with held():  # recorded before a stop signal can end the command
                _ahead[fio] = _version_probe(fio)
        except OSError:
            pass


def stop_version() -> None:
    """Kill and reap what `start_version_ahead` and `start_version` started and nothing
    read (a command stopped before it asked, or between the start and the answer)."""
    while _ahead or _asked:
        proc = _ahead.popitem()[1] if _ahead else _asked.pop()
        proc.kill()
        proc.communicate()


def start_version(fio: str | None) -> Callable[[], str | None]:
    """Start `fio --version` of the fio at path `fio` (or take the run
    `start_version_ahead` started) and return what waits for its answer
    (`installed_version`'s), so that the caller can do other work while fio loads its
    libraries. Call the result once, on every path: it reaps the process."""
    if fio is None:
        return lambda: None
    import subprocess

    from iofleet.local.stopping import held

    with held():  # recorded before a stop signal can end the command (stop_version)
        proc = _ahead.pop(fio, None)
        if proc is None:
            try:
                proc = _version_probe(fio)
            except OSError:
                return lambda: None
        _asked.add(proc)

    def answer() -> str | None:
        try:
            out, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            return None
        except BaseException:  # interrupted while waiting: leave no process behind
            proc.kill()
            proc.wait()
            raise
        finally:
            _asked.discard(proc)
        return out.strip() or None

    return answer


def release_for_host(ubuntu_release: str | None) -> str:
    """The fio an AWS host installs from its distribution (None: an AMI of unknown
    release, checked against the newest table)."""
    return UBUNTU_FIO.get(ubuntu_release or "", NEWEST)


# --------------------------------------------------------------------------- reading

# The job-file reader is fio's, shared with every other reader of job text (jobtext.py).
_Line = OptionLine
_Section = Section


@cache
def canonical_names(release: str = NEWEST) -> dict[str, str]:
    """option name or alias -> option name, fio `release`'s options and every engine's."""
    out = dict(_names(release))
    for spec in table(release)["engines"].values():
        for name in spec["options"]:
            out.setdefault(name, name)
    return out


# --------------------------------------------------------------------------- values


def _suggest(word: str, candidates: list[str]) -> str:
    close = difflib.get_close_matches(word, candidates, n=1, cutoff=0.6)
    return f" (did you mean {quote(close[0])}?)" if close else ""


def _int(text: str) -> int:
    """A C strtoll/sscanf number: hex with 0x, else decimal (leading zeros allowed)."""
    text = text.strip()
    sign = -1 if text.startswith("-") else 1
    digits = text.lstrip("+-")
    return sign * (int(digits, 16) if digits[:2].lower() == "0x" else int(digits, 10))


def _piece_problem(opt: dict[str, Any], piece: str) -> str | None:
    """Why one number of a numeric option's value is not one fio reads as written."""
    ftype = opt["fio_type"]
    text = piece.strip()
    if piece[:1].isspace() and re.search(r"[0-9][a-z%]", text, re.I):
        # parse.c looks for the unit from the value's first character: " 4k" is 4
        return (
            f"{quote(piece)}: fio reads the number without its unit after a space; remove the space"
        )
    if ftype == "FIO_OPT_STR_VAL_ZONE" and re.fullmatch(r"[0-9]+z", text):
        return None
    if text.startswith("("):
        return "fio's arithmetic expressions are not checked by iofleet; write the number"
    if ftype == "FIO_OPT_STR_VAL_TIME" or opt.get("is_time"):
        if not _TIME_RE.fullmatch(text):
            return (
                f"{quote(piece)} is not a time (a whole number, optionally with us, ms, s, m, h, d)"
            )
        return None
    if opt.get("percent") and re.fullmatch(r"[0-9]+%", text):
        return None
    if not _SIZE_RE.fullmatch(text):
        what = "a number or a size (k, m, g, t, p"
        what += ", or N%)" if opt.get("percent") else ")"
        if re.fullmatch(r"[+-]?0x[0-9a-f]+[a-z]+", text, re.I):
            return f"{quote(piece)}: fio reads a hex number without a unit ({fio_size(text)})"
        return f"{quote(piece)} is not {what}"
    value = fio_size(text)
    if not isinstance(value, int):  # strtoll's ERANGE: fio refuses the option
        return f"{quote(piece)} is past the largest number fio reads (64 bits)"
    if opt.get("pow2") and (value <= 0 or value & (value - 1)):
        return f"{quote(piece)} must be a power of 2"
    lo, hi = opt.get("min"), opt.get("max")
    if lo is not None and value < lo:
        return f"{quote(piece)} is below fio's minimum {lo}"
    if hi is not None and value > hi:
        return f"{quote(piece)} is above fio's maximum {hi}"
    return None


_RANDOM_RW = {"randread", "randwrite", "randrw", "randtrim", "randtrimwrite"}


def _rw_postfix_problem(value: str, release: str) -> str | None:
    """fio's reading of the number after `rw=MODE:` (options.c str_rw_cb, which
    `--parse-only` skips; parse.c str_to_decimal reads a leading number, with a unit, and
    fails only without one or on an expression): for a sequential mode the offset added
    after each I/O; for a random mode, from fio 3.36, the I/Os per new random offset,
    1 to 2^32-1 (fio 3.28 and 3.33 read it with atoi, unchecked)."""
    head, _, text = value.partition(":")
    text = text.strip()
    number = re.match(r"[+-]?(?:0x[0-9a-f]+|[0-9]+)", text, re.I)
    random = head.strip() in _RANDOM_RW
    if random and release in RELEASES and RELEASES.index(release) < RELEASES.index("3.36"):
        return None
    if number is None:
        kind = "a number of I/Os" if random else "a number"
        return (
            f"{quote(text)} after ':' is not {kind} (fio {release} fails: "
            f"'{'randrw' if random else 'rw'} postfix parsing failed')"
        )
    if random:
        whole = _SIZE_RE.match(text)
        amount = fio_size(whole.group()) if whole else None
        if not isinstance(amount, int) or not 0 < amount <= 2**32 - 1:
            return (
                f"{quote(text)} after ':' is out of range (1 to 4294967295 I/Os per random "
                f"offset; fio {release} fails: 'randrw postfix parsing out of range')"
            )
    return None


def _value_problem(
    name: str, opt: dict[str, Any], value: str | None, release: str, canonical: str = ""
) -> str | None:
    """Why fio `release` refuses (or misreads) `name=value`; `canonical` is the option's
    own name when `name` is an alias (an enum value a newer fio takes is named so)."""
    canonical = canonical or name
    ftype = opt["fio_type"]
    if ftype == "FIO_OPT_DEPRECATED":
        why = f" ({opt['help']})" if opt.get("help") else ""
        return f"{name} is deprecated and fio {release} refuses it{why}"
    if ftype == "FIO_OPT_UNSUPPORTED":
        why = f" ({opt['help']})" if opt.get("help") else ""
        return f"{name} is not supported by fio on Linux{why}"
    if ftype == "FIO_OPT_SOFT_DEPRECATED":
        return None
    if value is None:
        if ftype == "FIO_OPT_STR_SET" or (ftype == "FIO_OPT_STR" and not opt.get("values")):
            return None
        return f"{name} needs a value ({name}=...)"
    if ftype in _NUMERIC:
        pieces = [p for p in re.split(r"[,:-]" if "," not in value else ",", value)]
        if not any(p.strip() for p in pieces):
            return f"{name} needs a value"
        for piece in pieces:
            if piece.strip():
                problem = _piece_problem(opt, piece)
                if problem:
                    return f"{name}={clip(value)}: {problem}"
        return None
    if ftype in ("FIO_OPT_BOOL", "FIO_OPT_STR_SET"):
        if not _INT_RE.fullmatch(value):
            return f"{name}={clip(value)}: expected " + (
                "0 or 1" if ftype == "FIO_OPT_BOOL" else "a number"
            )
        number = _int(value)
        lo, hi = opt.get("min"), opt.get("max")
        if (lo is not None and number < lo) or (hi is not None and number > hi):
            return f"{name}={clip(value)}: expected {lo if lo is not None else 0} to {hi}"
        return None
    if ftype in ("FIO_OPT_STR", "FIO_OPT_STR_ULL", "FIO_OPT_STR_MULTI"):
        values = opt.get("values")
        if not values:
            return None
        pieces = value.split(",") if ftype == "FIO_OPT_STR_MULTI" else [value]
        for piece in pieces:
            head = re.split(r"[,:]", piece, maxsplit=1)[0]
            if head not in values:
                newer = next((r for r in _after(release) if head in _values(r, canonical)), None)
                if newer:
                    return (
                        f"{name}={clip(value)}: {quote(head)} needs fio {newer} or newer "
                        f"(this run has fio {release})"
                    )
                hint = _suggest(head, values)
                if head != head.strip():
                    hint = " (fio keeps the space after '=')"
                return (
                    f"{name}={clip(value)}: {quote(head)} is not one of {', '.join(values)}{hint}"
                )
        if canonical == "rw" and ":" in value:
            problem = _rw_postfix_problem(value, release)
            if problem:
                return f"{name}={clip(value)}: {problem}"
        return None
    if ftype == "FIO_OPT_STR_STORE":
        if not value:
            return f"{name} needs a value"
        return None
    if ftype == "FIO_OPT_RANGE":
        for piece in value.split(","):
            if not piece:
                continue
            ends = re.split(r"[-:]", piece, maxsplit=1)
            if len(ends) != 2 or not all(_SIZE_RE.fullmatch(e.strip()) for e in ends):
                return f"{name}={clip(value)}: {quote(piece)} is not a range LOW-HIGH of sizes (4k-64k)"
        return None
    if ftype == "FIO_OPT_FLOAT_LIST":
        items = value.split(":")
        limit = opt.get("maxlen")
        if limit and len(items) > limit:
            # parse.c: 'the list exceeding max length N', and fio goes on with the first N
            return (
                f"{name}={clip(value)}: {len(items)} values, fio {release} takes at most "
                f"{limit} (it keeps the first {limit} and drops the rest)"
            )
        for item in items:
            if not _FLOAT_RE.fullmatch(item):
                return f"{name}={clip(value)}: {quote(item)} is not a number"
            fnum = float(item)
            if ("minfp" in opt or "maxfp" in opt) and not (
                opt.get("minfp", float("-inf")) <= fnum <= opt.get("maxfp", float("inf"))
            ):
                return f"{name}={clip(value)}: {clip(item)} is outside {opt.get('minfp')}..{opt.get('maxfp')}"
        return None
    return None


def _engine_problem(value: str, release: str) -> str | None:
    engines = table(release)["engines"]
    if value in engines or value.startswith("external:") or "/" in value:
        return None
    hint = _suggest(value, sorted(engines))
    newer = [r for r in _after(release) if value in table(r)["engines"]]
    if newer:
        return f"ioengine {quote(value)} needs fio {newer[0]} or newer (this run has fio {release})"
    return f"ioengine={clip(value)}: unknown ioengine {quote(value)}{hint}"


def _after(release: str) -> list[str]:
    """The pinned releases newer than `release`, oldest first."""
    return [r for r in RELEASES if r > release]


def _values(release: str, name: str) -> list[str]:
    """The values (posval) option `name` of fio `release` takes ([] for none listed)."""
    return list(table(release)["options"].get(name, {}).get("values") or ())


def _unknown_option(key: str, engine: str, release: str) -> str:
    newer = next(
        (
            r
            for r in _after(release)
            if key in _names(r) or key in table(r)["engines"].get(engine, {}).get("options", {})
        ),
        None,
    )
    if newer:
        return f"{key} needs fio {newer} or newer (this run has fio {release})"
    owners = [
        e for e, spec in table(release)["engines"].items() if key in spec["options"] and e != engine
    ]
    if owners:
        named = " or ".join(owners[:3]) + (" (...)" if len(owners) > 3 else "")
        return f"{key} is an option of ioengine {named}, not of this job's ioengine {engine}"
    candidates = list(_names(release)) + list(
        table(release)["engines"].get(engine, {"options": {}})["options"]
    )
    if key.lower() in candidates:
        return f"unknown fio option {quote(key)} (option names are case-sensitive: {quote(key.lower())})"
    return f"unknown fio option {quote(key)}{_suggest(key, candidates)}"


def check_sections(
    sections: list[_Section], env: Mapping[str, str], release: str = NEWEST
) -> list[OptionProblem]:
    """Every option fio `release` would refuse (or misread) in `sections`."""
    problems: list[OptionProblem] = []
    global_engine: str | None = None
    options = table(release)["options"]
    for section in sections:
        parsed: list[tuple[_Line, str, str | None, bool, tuple[str, ...]]] = []
        own_engine: str | None = None
        for line in section.options:
            text, known, used = _substitute(line.text, env)
            key, eq, value = text.partition("=")
            key = key.rstrip()
            parsed.append((line, key, value if eq else None, known, used))
            if key == "ioengine" and eq and known:
                own_engine = value
        engine = own_engine or global_engine or DEFAULT_ENGINE
        engine_opts = table(release)["engines"].get(engine, {"options": {}})["options"]
        for line, key, given, known, used in parsed:

            def add(
                message: str,
                line: _Line = line,
                used: tuple[str, ...] = used,
                sec: str = section.name,
            ) -> None:
                problems.append(OptionProblem(line.path, line.number, sec, message, used))

            if "${" in key and not known:
                continue  # the name itself comes from the environment at run time
            name = _names(release).get(key)
            opt = options.get(name) if name else engine_opts.get(key)
            if opt is None:
                if engine not in table(release)["engines"] and (
                    engine.startswith("external:") or "/" in engine
                ):
                    continue  # an external engine's own options: not in fio's tables
                add(_unknown_option(key, engine, release))
                continue
            if not known or (given is not None and any(k in given for k in _KEYWORDS)):
                continue  # fio fills the value at run time
            if name == "ioengine" and given is not None:
                problem = _engine_problem(given, release)
            else:
                problem = _value_problem(key, opt, given, release, name or key)
            if problem:
                add(problem)
        if section.is_global and own_engine:
            global_engine = own_engine
    if not problems:  # the rules below read values the option check passed
        problems += _steadystate_problems(sections, env, release)
    return problems


_SS_INTERVAL_DEFAULT_US = 1_000_000  # options.c steadystate_check_interval .def = "1" (s)


def _steadystate_problems(
    sections: list[_Section], env: Mapping[str, str], release: str
) -> list[OptionProblem]:
    """A steady-state duration fio `release` refuses when the job starts (init.c
    fixup_options; `--parse-only` does not get there). From fio 3.36, which added
    steadystate_check_interval (default 1 s, at least 1 s), the duration must be a whole
    multiple of the interval and longer than it: `ss_dur=1` fails on every run. Older fio
    checks once a second and takes any duration."""
    if "steadystate_check_interval" not in table(release)["options"]:
        return []
    from iofleet.plan.jobtext import fio_time_us, jobs

    problems: list[OptionProblem] = []
    every = list(jobs(sections, env, canonical_names(release)))
    problems += _ss_interval_conflicts(every, release)
    for job in every:
        dur = job.last("steadystate_duration")
        if dur is None or dur.value is None or not dur.known:
            continue
        dur_us = fio_time_us(dur.value, is_seconds=True)
        known = _ss_interval(job)
        if known is None:
            continue
        interval, interval_us = known
        if not dur_us or not interval_us:
            continue
        at, shown = dur, f"{dur.line.text.partition('=')[0].rstrip()}={dur.value}"
        if interval_us < 1_000_000:
            at = interval or dur
            message = f"steadystate_check_interval must be at least 1s in fio {release}"
        elif dur_us % interval_us or dur_us <= interval_us:
            message = (
                f"{shown}: fio {release} needs a steady-state duration that is a whole "
                f"multiple of steadystate_check_interval ({interval_us / 1e6:g}s) and longer "
                "than it; it refuses the job when it starts"
            )
        else:
            continue
        problems.append(
            OptionProblem(at.line.path, at.line.number, job.section.name, message, at.variables)
        )
    return problems


def _ss_interval(job: Any) -> tuple[Any, int] | None:
    """(the job's steadystate_check_interval line, None for fio's default; the interval
    in us), or None when it is not known: a value from fio's environment, or one that is
    not a time (the option check refuses it already)."""
    from iofleet.plan.jobtext import fio_time_us

    interval = job.last("steadystate_check_interval")
    if interval is None:
        return None, _SS_INTERVAL_DEFAULT_US
    if interval.value is None or not interval.known:
        return None
    us = fio_time_us(interval.value or "", is_seconds=True)
    return None if us is None else (interval, us)


def _ss_interval_conflicts(every: list[Any], release: str) -> list[OptionProblem]:
    """fio 3.36 refuses, when the jobs start, a job file whose jobs have different steady-
    state check intervals, whether or not they use steady state (init.c fixup_options:
    'conflicting ss_check_interval ... must be globally equal'): named at the first job
    whose interval differs from the first job's (at its line, or the first job's when it
    takes the default). Not judged when an interval is not known."""
    first: tuple[Any, int, Any] | None = None  # (job, interval us, its line or None)
    for job in every:
        known = _ss_interval(job)
        if known is None:
            return []
        interval, us = known
        if first is None:
            first = (job, us, interval)
            continue
        if us == first[1]:
            continue
        at = interval if interval is not None else first[2]
        message = (
            f"steadystate_check_interval: job {quote(job.section.name)} checks every "
            f"{us / 1e6:g}s and job {quote(first[0].section.name)} every {first[1] / 1e6:g}s; "
            f"fio {release} needs one interval for every job of a run and refuses the jobs "
            "when they start"
        )
        return [
            OptionProblem(at.line.path, at.line.number, job.section.name, message, at.variables)
        ]
    return []


def check_job_file(
    path: Path, env: Mapping[str, str], release: str = NEWEST
) -> list[OptionProblem]:
    """Problems of job file `path` for fio `release`; JobTextError if fio cannot read it."""
    sections = read_sections(path)
    if not any(not s.is_global for s in sections):
        return [
            OptionProblem(
                str(path),
                1,
                "",
                "no job section, only [global] (fio runs nothing: 'No job(s) defined')",
            )
        ]
    return check_sections(sections, env, release)
