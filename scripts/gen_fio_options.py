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

The option tables are read with their #includes dropped, so a limit written with a
macro of one of fio's headers (`.maxval = IOPRIO_MAX_PRIO`, `.minval = DEF_LOG_ENTRIES`,
`.maxlen = FIO_IO_U_LIST_MAX_LEN`) or with `sizeof(struct verify_header)` is evaluated
afterwards: cpp runs on the file's own `#include "..."` lines over the release's headers
(same Linux conditions, so os/os.h picks os/os-linux.h, not its fallbacks), and a
`sizeof(struct ...)` is the struct's size from its fields on x86_64 Linux (LP64). A
limit that still does not evaluate to a number is reported on stderr and left out.

Releases pinned here are the fio packages the agent runs on: Ubuntu 24.04 (the
default host) ships 3.36, Ubuntu 22.04 (the Yocto host) 3.28, Debian 12 (local runs
and this repository's tests) 3.33. See docs/decisions.md #42.
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import re
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
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


def _linux_flags(texts: list[str]) -> list[str]:
    """cpp's -D/-U flags for a Linux build of `texts` (every #if identifier defined,
    but LINUX_OFF's)."""
    idents: set[str] = set()
    own: set[str] = set()
    for text in texts:
        for cond in _IF_RE.findall(text):
            idents.update(i for i in _IDENT_RE.findall(cond) if i not in _CPP_KEYWORDS)
        own.update(re.findall(r"^\s*#\s*define\s+(\w+)", text, flags=re.M))
    # names starting with "_" are the compiler's own (__linux__, __cplusplus): cpp decides;
    # names the source #defines itself (include guards, local macros) stay its own
    defines = [f"-D{i}=1" for i in sorted(idents - LINUX_OFF - own) if i[0] != "_"]
    return defines + [f"-U{i}" for i in sorted(LINUX_OFF)]


def preprocess(text: str, prelude: str = "") -> str:
    """`text` through cpp with its #includes dropped and Linux's conditions defined."""
    source = prelude + "\n" + text
    source = re.sub(r"^\s*#\s*include\b.*$", "", source, flags=re.M)
    return subprocess.run(
        ["cpp", "-P", "-w", *_linux_flags([source]), "-"],
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
    blocks: list[str] = []
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


# ------------------------------------------------------------ limits written with macros

_INT_SUFFIX_RE = re.compile(
    r"\b((?:0[xX][0-9a-fA-F]+)|[0-9]+)(?:[uU](?:ll|LL|l|L)?|(?:ll|LL|l|L)[uU]?)\b"
)
_SIZEOF_RE = re.compile(r"\bsizeof\s*\(\s*([^()]*?)\s*\)")
# sizes (= alignments) of C's scalar types on x86_64 Linux (LP64): the ABI, not fio's source
_C_SIZES = {
    "char": 1,
    "signed char": 1,
    "unsigned char": 1,
    "bool": 1,
    "_Bool": 1,
    "int8_t": 1,
    "uint8_t": 1,
    "short": 2,
    "unsigned short": 2,
    "int16_t": 2,
    "uint16_t": 2,
    "int": 4,
    "unsigned": 4,
    "unsigned int": 4,
    "int32_t": 4,
    "uint32_t": 4,
    "float": 4,
    "long": 8,
    "unsigned long": 8,
    "long long": 8,
    "unsigned long long": 8,
    "int64_t": 8,
    "uint64_t": 8,
    "size_t": 8,
    "ssize_t": 8,
    "off_t": 8,
    "double": 8,
}
_BIN_OPS: dict[type, Callable[[int, int], int]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: int(a / b),  # C's integer division truncates
    ast.LShift: lambda a, b: a << b,
    ast.RShift: lambda a, b: a >> b,
    ast.BitOr: lambda a, b: a | b,
    ast.BitAnd: lambda a, b: a & b,
    ast.BitXor: lambda a, b: a ^ b,
}


def _eval_int(expr: str) -> int | None:
    """A C integer constant expression of numbers, + - * / << >> | & ^ ~ and
    parentheses (no identifiers left): its value, or None."""
    text = _INT_SUFFIX_RE.sub(r"\1", expr.strip()).replace("/", "//")
    text = re.sub(r"\b0([0-7]+)\b", r"0o\1", text)  # C octal
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        return None

    def walk(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd | ast.Invert):
            v = walk(node.operand)
            if isinstance(node.op, ast.USub):
                return -v
            return ~v if isinstance(node.op, ast.Invert) else v
        if isinstance(node, ast.BinOp) and type(node.op) in _BIN_OPS:
            return _BIN_OPS[type(node.op)](walk(node.left), walk(node.right))
        raise ValueError(ast.dump(node))

    try:
        return walk(tree.body)
    except (ValueError, ZeroDivisionError):
        return None


def _struct_layout(code: str, name: str) -> tuple[int, int]:
    """(size, alignment) of `struct name` as defined in preprocessed `code`, laid out
    as on x86_64 Linux: each field at its alignment, the end padded to the largest."""
    m = re.search(r"\bstruct\s+" + re.escape(name) + r"\s*\{", code)
    if not m:
        raise ValueError(f"struct {name} is not defined")
    start = m.end() - 1
    end = _balanced(code, start)
    body = code[start + 1 : end - 1]
    if "{" in body or ":" in body or "__attribute__" in body + code[end : code.find(";", end)]:
        raise ValueError(f"struct {name}: nested, bit-field or packed/aligned members")
    offset = 0
    align = 1
    for decl in body.split(";"):
        decl = " ".join(decl.split())
        if not decl:
            continue
        fm = re.fullmatch(
            r"((?:const |volatile )*(?:struct )?[A-Za-z_][\w ]*?)\s*(\**)\s*(\w+)((?:\s*\[[^\]]*\])*)",
            decl,
        )
        if not fm:
            raise ValueError(f"struct {name}: cannot read field {decl!r}")
        ctype, stars, _field, dims = fm.groups()
        ctype = re.sub(r"\b(?:const|volatile)\s+", "", ctype).strip()
        if stars:
            size = al = 8
        elif ctype.startswith("struct "):
            size, al = _struct_layout(code, ctype.split()[1])
        elif ctype in _C_SIZES:
            size = al = _C_SIZES[ctype]
        else:
            raise ValueError(f"struct {name}: unknown type {ctype!r}")
        for dim in re.findall(r"\[([^\]]*)\]", dims):
            count = _eval_int(dim)
            if count is None:
                raise ValueError(f"struct {name}: array size {dim!r}")
            size *= count
        offset = -(-offset // al) * al + size
        align = max(align, al)
    return -(-offset // align) * align, align


class Headers:
    """fio's own headers of one release, to evaluate the limits an option table writes
    with their macros (`IOPRIO_MAX_PRIO`, `2 * sizeof(struct verify_header)`).

    One limit is not fio's: options.c `filename` has `.maxlen = PATH_MAX`, a macro of the
    system's <limits.h> (<linux/limits.h>), which is not read here (as for the option
    tables); it stays out of the table (reported on stderr), so a filename's length is
    not checked."""

    def __init__(self, repo: Path, tag: str, root: Path) -> None:
        archive = subprocess.run(
            ["git", "-C", str(repo), "archive", "--format=tar", tag],
            check=True,
            capture_output=True,
        ).stdout
        texts = []
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            for member in tar.getmembers():
                if not member.isfile() or not member.name.endswith(".h"):
                    continue
                raw = tar.extractfile(member)
                assert raw is not None
                text = raw.read().decode("utf-8", "replace")
                # the system's headers are not read (as for the option tables), and an
                # #error of another platform's branch is no concern of a macro's value
                text = re.sub(r"^\s*#\s*(?:include\s*<|error\b).*$", "", text, flags=re.M)
                out = root / member.name
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_text(text, encoding="utf-8")
                texts.append(text)
        self.root = root
        self.flags = _linux_flags(texts)
        self._cache: dict[tuple[str, str], int | None] = {}

    def limit(self, path: str, source: str, expr: str) -> int | None:
        """The value of `expr` (a limit of an option table of file `path`, whose text is
        `source`, after cpp) with the macros of the headers `source` includes."""
        key = (path, expr)
        if key not in self._cache:
            try:
                self._cache[key] = self._evaluate(path, source, expr)
            except (ValueError, subprocess.CalledProcessError) as exc:
                print(f"{path}: cannot evaluate {expr!r}: {exc}", file=sys.stderr)
                self._cache[key] = None
        return self._cache[key]

    def _evaluate(self, path: str, source: str, expr: str) -> int | None:
        includes = re.findall(r'^\s*#\s*include\s*"[^"]+"', source, flags=re.M)
        marker = "@@iofleet_limit@@"
        unit = self.root / Path(path).parent / "iofleet-limit.c"
        unit.write_text("\n".join([*includes, f"{marker} {expr}", ""]), encoding="utf-8")
        code = subprocess.run(
            ["cpp", "-P", "-w", "-nostdinc", f"-I{self.root}", *self.flags, str(unit)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        value = code[code.rindex(marker) + len(marker) :].strip()

        def size_of(m: re.Match[str]) -> str:
            ctype = " ".join(m.group(1).split())
            if ctype.startswith("struct "):
                return str(_struct_layout(code, ctype.split()[1])[0])
            if ctype in _C_SIZES:
                return str(_C_SIZES[ctype])
            raise ValueError(f"sizeof({ctype})")

        value = _SIZEOF_RE.sub(size_of, value)
        number = _eval_int(value)
        if number is None:
            raise ValueError(f"not an integer expression: {value!r}")
        return number


_PERCENT_CB_RE = re.compile(
    r"static int (\w+)\s*\([^)]*\)\s*\{(?:(?!\n\}).)*parse_is_percent", re.S
)


def parse_options(
    block_text: str,
    percent_cbs: set[str],
    limit: Callable[[str], int | None] = lambda expr: None,
) -> dict[str, dict[str, Any]]:
    """The options of one `struct fio_option` array; `limit` evaluates a min/max/maxlen
    that is not a number after cpp (a macro of a header the file includes)."""

    def number(f: dict[str, str], key: str) -> int | None:
        expr = f.get(key)
        if expr is None:
            return None
        value = _c_int(expr)
        return limit(expr) if value is None else value

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
            value = number(f, key)
            if value is not None and value != 0:
                entry[key.removesuffix("val")] = value
        for key in ("minfp", "maxfp"):
            if key in f:
                try:
                    entry[key] = float(f[key].rstrip("fF"))
                except ValueError:
                    pass
        maxlen = number(f, "maxlen")
        if maxlen:
            entry["maxlen"] = maxlen
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
    with tempfile.TemporaryDirectory(prefix="fio-headers-") as tmp:
        return _release_table(repo, release, tag, commit, Headers(repo, tag, Path(tmp)))


def _release_table(
    repo: Path, release: str, tag: str, commit: str, headers: Headers
) -> dict[str, Any]:
    def limits(path: str, source: str) -> Callable[[str], int | None]:
        return lambda expr: headers.limit(path, source, expr)

    options_src = git_show(repo, tag, "options.c")
    options_c = preprocess(options_src)
    percent_cbs = set(_PERCENT_CB_RE.findall(options_c))
    options = parse_options(
        _array(options_c, r"struct fio_option fio_options\[[^\]]*\]\s*=\s*\{"),
        percent_cbs,
        limits("options.c", options_src),
    )
    # header macros engines use in their option tables (CMDPRIO_OPTIONS, ...)
    engine_headers = "\n".join(
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
        source = git_show(repo, tag, f"engines/{name}")
        text = preprocess(source, engine_headers)
        for m in re.finditer(r"struct fio_option (\w+)\[\]\s*=\s*\{", text):
            start = m.end() - 1
            body = text[start + 1 : _balanced(text, start) - 1]
            arrays[f"{name}:{m.group(1)}"] = arrays[m.group(1)] = parse_options(
                body, set(), limits(f"engines/{name}", source)
            )
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
