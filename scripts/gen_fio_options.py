#!/usr/bin/env python3
"""Generate iofleet/plan/data/fio-options-<release>.json from fio's own source.

    python scripts/gen_fio_options.py --fio-repo PATH/TO/fio.git [--release 3.36 ...]

PATH is a git clone of https://github.com/axboe/fio (bare is fine: files are read
with `git show fio-X.Y:FILE`). For each release the script reads the option table
`struct fio_option fio_options[]` of options.c and every ioengine's `options[]` in
engines/*.c, after running them through the C preprocessor (`cpp`), so macros such
as CMDPRIO_OPTIONS expand and `#ifdef` blocks resolve as in a Linux build that has
every optional library (see LINUX_OFF for the few switched off: other platforms and
CONFIG_NO_SHM). The result is one JSON file per release: every option's name, alias,
fio type, allowed values (posval), min/max, whether it takes a percentage or must be
a power of 2, and per ioengine the engine's own options.

Releases pinned here are the fio packages the agent runs on: Ubuntu 24.04 (the
default host) ships 3.36, Ubuntu 22.04 (the Yocto host) 3.28, Debian 12 (local runs
and this repository's tests) 3.33. See docs/decisions.md #42.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

RELEASES = ("3.28", "3.33", "3.36")
OUT_DIR = Path(__file__).resolve().parents[1] / "iofleet" / "plan" / "data"
# Conditions a Linux build does not have; every other #if identifier is taken as defined.
LINUX_OFF = {
    "CONFIG_NO_SHM",
    "CONFIG_WINDOWSAIO",
    "CONFIG_SOLARISAIO",
    "CONFIG_ESX",
    "WIN32",
    "_WIN32",
    "__sun__",
    "__APPLE__",
    "__FreeBSD__",
    "FIO_INTERNAL",
    "FIO_EXTERNAL_ENGINE",
}
# engine sources that do not build on Linux, and the template for external engines
ENGINE_FILES_OFF = {"windowsaio.c", "solarisaio.c", "skeleton_external.c"}
_IF_RE = re.compile(r"^\s*#\s*(?:if|ifdef|ifndef|elif)\b(.*)$", re.M)
_IDENT_RE = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*\b")
_CPP_KEYWORDS = {"defined"}


def git_show(repo: Path, rev: str, path: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "show", f"{rev}:{path}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def git_ls(repo: Path, rev: str, path: str) -> list[str]:
    out = subprocess.run(
        ["git", "-C", str(repo), "ls-tree", "--name-only", f"{rev}:{path}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return out.split()


def preprocess(text: str, prelude: str = "") -> str:
    """`text` through cpp with its #includes dropped and Linux's conditions defined."""
    source = prelude + "\n" + text
    source = re.sub(r"^\s*#\s*include\b.*$", "", source, flags=re.M)
    idents: set[str] = set()
    for cond in _IF_RE.findall(source):
        idents.update(i for i in _IDENT_RE.findall(cond) if i not in _CPP_KEYWORDS)
    # names starting with "_" are the compiler's own (__linux__, __cplusplus): cpp decides;
    # names the source #defines itself (include guards, local macros) stay its own
    own = set(re.findall(r"^\s*#\s*define\s+(\w+)", source, flags=re.M))
    defines = [f"-D{i}=1" for i in sorted(idents - LINUX_OFF - own) if i[0] != "_"]
    undefines = [f"-U{i}" for i in sorted(LINUX_OFF)]
    return subprocess.run(
        ["cpp", "-P", "-w", *defines, *undefines, "-"],
        input=source,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def _balanced(text: str, start: int) -> int:
    """Index just past the brace block opening at text[start] == '{' (strings skipped)."""
    depth = 0
    i = start
    while i < len(text):
        c = text[i]
        if c == '"':
            i += 1
            while text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif c == "'":
            i += 1
            while text[i] != "'":
                i += 2 if text[i] == "\\" else 1
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise ValueError("unbalanced braces")


def _top_level_blocks(body: str) -> list[str]:
    """The `{...}` blocks directly inside `body` (which excludes the outer braces)."""
    blocks = []
    i = 0
    while True:
        j = body.find("{", i)
        if j < 0:
            return blocks
        end = _balanced(body, j)
        blocks.append(body[j + 1 : end - 1])
        i = end


def _fields(block: str) -> dict[str, str]:
    """`.field = value` pairs at the top level of one initializer block."""
    out: dict[str, str] = {}
    i = 0
    n = len(block)
    while i < n:
        m = re.compile(r"\.\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*").match(block, i)
        if not m:
            i += 1
            continue
        name = m.group(1)
        j = m.end()
        depth = 0
        k = j
        while k < n:
            c = block[k]
            if c == '"':
                k += 1
                while block[k] != '"':
                    k += 2 if block[k] == "\\" else 1
            elif c in "({":
                depth += 1
            elif c in ")}":
                depth -= 1
            elif c == "," and depth == 0:
                break
            k += 1
        out[name] = block[j:k].strip()
        i = k + 1
    return out


def _c_string(value: str | None) -> str | None:
    if value is None:
        return None
    parts = re.findall(r'"((?:[^"\\]|\\.)*)"', value)
    if not parts:
        return None
    return "".join(parts).encode().decode("unicode_escape")


def _c_int(value: str | None) -> int | None:
    if value is None:
        return None
    text = value.strip().strip("()").replace("ULL", "").replace("UL", "").replace("U", "")
    try:
        return int(text, 0)
    except ValueError:
        return None


_PERCENT_CB_RE = re.compile(
    r"static int (\w+)\s*\([^)]*\)\s*\{(?:(?!\n\}).)*parse_is_percent", re.S
)


def parse_options(block_text: str, percent_cbs: set[str]) -> dict[str, dict[str, Any]]:
    options: dict[str, dict[str, Any]] = {}
    for block in _top_level_blocks(block_text):
        f = _fields(block)
        name = _c_string(f.get("name"))
        if not name:
            continue
        ftype = (f.get("type") or "").strip()
        entry: dict[str, Any] = {"fio_type": ftype}
        alias = _c_string(f.get("alias"))
        if alias:
            entry["alias"] = alias
        if "posval" in f:
            values = []
            for pv in _top_level_blocks(f["posval"].strip()[1:-1]):
                ival = _c_string(_fields(pv).get("ival"))
                if ival:
                    values.append(ival)
            if values:
                entry["values"] = values
        for key in ("minval", "maxval"):
            number = _c_int(f.get(key))
            if number is not None and number != 0:
                entry[key.removesuffix("val")] = number
        for key in ("minfp", "maxfp"):
            if key in f:
                try:
                    entry[key] = float(f[key].rstrip("fF"))
                except ValueError:
                    pass
        if _c_int(f.get("maxlen")):
            entry["maxlen"] = _c_int(f.get("maxlen"))
        for key in ("is_time", "is_seconds", "pow2"):
            if _c_int(f.get(key)):
                entry[key] = True
        cb = (f.get("cb") or "").strip()
        if cb in percent_cbs:
            entry["percent"] = True
        if cb:
            entry["callback"] = True
        if ftype == "FIO_OPT_BOOL":
            entry.setdefault("min", 0)
            entry["max"] = 1
        if ftype == "FIO_OPT_UNSUPPORTED" or ftype == "FIO_OPT_DEPRECATED":
            entry["help"] = _c_string(f.get("help")) or ""
        options[name] = entry
    return options


def _array(text: str, pattern: str) -> str:
    m = re.search(pattern, text)
    if not m:
        raise ValueError(f"no match for {pattern}")
    start = text.index("{", m.end() - 1)
    return text[start + 1 : _balanced(text, start) - 1]


def release_table(repo: Path, release: str) -> dict[str, Any]:
    tag = f"fio-{release}"
    commit = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", f"{tag}^{{commit}}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    options_c = preprocess(git_show(repo, tag, "options.c"))
    percent_cbs = set(_PERCENT_CB_RE.findall(options_c))
    options = parse_options(
        _array(options_c, r"struct fio_option fio_options\[[^\]]*\]\s*=\s*\{"), percent_cbs
    )
    # header macros engines use in their option tables (CMDPRIO_OPTIONS, ...)
    headers = "\n".join(
        git_show(repo, tag, f"engines/{h}")
        for h in git_ls(repo, tag, "engines/")
        if h.endswith(".h") and "pb-c" not in h
    )
    # option arrays may live in another file than the engine using them (gfapi_options)
    arrays: dict[str, dict[str, dict[str, Any]]] = {}
    ops: list[tuple[str, dict[str, str]]] = []
    for name in git_ls(repo, tag, "engines/"):
        if not name.endswith(".c") or name in ENGINE_FILES_OFF or "pb-c" in name:
            continue
        text = preprocess(git_show(repo, tag, f"engines/{name}"), headers)
        for m in re.finditer(r"struct fio_option (\w+)\[\]\s*=\s*\{", text):
            start = m.end() - 1
            body = text[start + 1 : _balanced(text, start) - 1]
            arrays[f"{name}:{m.group(1)}"] = arrays[m.group(1)] = parse_options(body, set())
        for m in re.finditer(r"struct ioengine_ops (\w+)\s*=\s*\{", text):
            start = m.end() - 1
            ops.append((name, _fields(text[start + 1 : _balanced(text, start) - 1])))
    engines: dict[str, dict[str, Any]] = {}
    for name, f in ops:
        engine = _c_string(f.get("name"))
        if not engine:
            continue
        array = (f.get("options") or "").strip()
        opts = arrays.get(f"{name}:{array}", arrays.get(array, {})) if array else {}
        engines[engine] = {"file": f"engines/{name}", "options": opts}
    return {
        "fio": release,
        "tag": tag,
        "commit": commit,
        "source": "https://github.com/axboe/fio",
        "generated_by": "scripts/gen_fio_options.py",
        "options": dict(sorted(options.items())),
        "engines": dict(sorted(engines.items())),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fio-repo", type=Path, required=True)
    parser.add_argument("--release", action="append", help=f"default: {', '.join(RELEASES)}")
    parser.add_argument("--out-dir", type=Path, default=OUT_DIR)
    args = parser.parse_args(argv)
    for release in args.release or RELEASES:
        table = release_table(args.fio_repo, release)
        out = args.out_dir / f"fio-options-{release}.json"
        out.write_text(json.dumps(table, indent=1, sort_keys=False) + "\n", encoding="utf-8")
        print(f"{out}: {len(table['options'])} options, {len(table['engines'])} engines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
