"""Fuzz the raw-output parsers and `iofleet import` with output nobody here wrote.

Mutates the real fio JSON/JSON+ and ioping -J outputs under tests/fixtures (every fio
release and ioping version there) at the JSON level (any value replaced by one of
another kind or range, a key removed, renamed or added, a list entry removed, doubled
or emptied) and at the text level (lines dropped or doubled, text before, inside and
after the document, NaN and Infinity tokens, a byte-order mark, NUL bytes), and checks
the promise:

- `inproc`: `parse_file` gives records or a ParseError (one line naming the file),
  never another exception; every record of fio or ioping fits its warehouse columns
  (iofleet.results.schema.value_problem), so a parsed artifact never breaks a load.
- `cli`: `iofleet import` of a good file and a mutated one into a fresh --out exits 0
  (the warehouse has the rows of both files, as the parser reads them) or 1 (the
  mutated file refused by name, the good file's rows there); never a traceback,
  another status, an `ingest_errors` row or a file left in TMPDIR.
- `ingest`: one artifact of a real finished run (made once by `iofleet local`: fio,
  ioping, an app with a populate step, run.json, manifests, slot.json) mutated, the tree
  loaded into a fresh warehouse: no exception, no ingest error that is a parser bug
  (`unexpected ...`), every table holding what each artifact's own rows say
  (`ingest.rows_and_bin_blocks`: the mutated one's rows or its one error row).

    PYTHONPATH=$PWD .venv/bin/python scripts/fuzz_parse.py inproc 20000 --seed 1
    PYTHONPATH=$PWD .venv/bin/python scripts/fuzz_parse.py cli 200 --seed 1
    PYTHONPATH=$PWD .venv/bin/python scripts/fuzz_parse.py ingest 1000 --seed 1

Prints each failure (its input saved under the tmp root's `failures/`) and a count; exits
1 if any. Not part of the test suite (random, and `cli` is slow); what it finds becomes
a unit test of the parser.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from iofleet.results.parsers import ParseError, decode_text, parse_file  # noqa: E402
from iofleet.results.parsers.ioping import parse_ioping  # noqa: E402
from iofleet.results.schema import FIO_RESULTS, IOPING_REQUESTS, value_problem  # noqa: E402

FIXTURES = REPO / "tests" / "fixtures"
SKIP = {"truncated.json"}  # bases must parse; a cut document is already its own test


def _bases() -> dict[str, tuple[str, Any]]:
    found: dict[str, tuple[str, Any]] = {}
    for path in sorted(FIXTURES.glob("fio/**/*.json")) + sorted(FIXTURES.glob("ioping/**/*.json")):
        if path.name in SKIP:
            continue
        kind = "ioping" if "/ioping/" in str(path) else "fio"
        try:
            list(parse_file(path, warn=lambda _: None))
            doc = json.loads(path.read_text())
        except (ParseError, ValueError):
            continue  # a fixture of a refusal (or text around its JSON)
        found[str(path.relative_to(FIXTURES))] = (kind, doc)
    return found


ODD_VALUES: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    1,
    2**31,
    2**63 - 1,
    2**63,
    2**64,
    -(2**63) - 1,
    10**400,
    1.5,
    -0.0,
    1e308,
    -1e-320,
    "",
    "0",
    "12",
    "-nan",
    "inf",
    "x" * 5000,
    "\ud800",
    "line\nbreak",
    "\u2028",
    [],
    {},
    [1, 2],
    {"a": 1},
    [[0, 1]],
]


def _odd(rng: random.Random) -> Any:
    """One of ODD_VALUES, a copy: a list or dict put in a document is mutated later."""
    return copy.deepcopy(rng.choice(ODD_VALUES))


def _paths(node: Any, here: tuple = ()) -> list[tuple]:
    out = [here]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, here + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, here + (i,))
    return out


def _get(node: Any, path: tuple) -> Any:
    for step in path:
        node = node[step]
    return node


def _near(rng: random.Random, value: Any) -> Any:
    """A value of the same kind but another range: what another fio might print."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return rng.choice([value * 1000, -value, value + 1, 0, 2**63 - 1 - value, value // 7])
    if isinstance(value, float):
        return rng.choice([value * 1e6, -value, float(int(value)), value / 3])
    if isinstance(value, str):
        return rng.choice([value.upper(), value + " ", "", value[::-1], value * 3])
    return _odd(rng)


def mutate_doc(rng: random.Random, doc: Any) -> Any:
    doc = copy.deepcopy(doc)
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        paths = _paths(doc)
        path = rng.choice(paths[1:] or paths)
        if not path:
            return _odd(rng)
        parent, last = _get(doc, path[:-1]), path[-1]
        op = rng.random()
        if op < 0.35:
            parent[last] = _odd(rng)
        elif op < 0.6:
            parent[last] = _near(rng, parent[last])
        elif op < 0.75:
            del parent[last]
        elif op < 0.82 and isinstance(parent, dict):
            parent[str(last) + rng.choice(["_x", "", " "]).strip() or "k"] = parent.pop(last)
        elif op < 0.9 and isinstance(parent, list):
            parent.insert(last, copy.deepcopy(parent[last]))
        elif op < 0.95 and isinstance(parent[last], list | dict):
            parent[last] = type(parent[last])()
        elif isinstance(parent, dict):
            parent[rng.choice(["extra", "1", "", "percentile", "bins"])] = _odd(rng)
    return doc


def mutate_text(rng: random.Random, text: str) -> str:
    lines = text.split("\n")
    op = rng.random()
    if op < 0.2 and len(lines) > 3:
        i = rng.randrange(len(lines))
        del lines[i : i + rng.choice([1, 1, 2, 5])]
    elif op < 0.35:
        i = rng.randrange(len(lines))
        lines.insert(i, lines[i])
    elif op < 0.5:
        i = rng.randrange(len(lines))
        lines.insert(
            i,
            rng.choice(
                [
                    "fio: pid=1234, err=5/file:io_u.c:1841, func=io_u error, error=Input/output error",
                    "ioping: request returned less than expected: 0",
                    "note: both iodepth >= 1 and synchronous I/O engine are selected",
                    "<host> ",
                    "",
                ]
            ),
        )
    elif op < 0.65:
        i = rng.randrange(len(lines))
        lines[i] = lines[i].replace("0", rng.choice(["NaN", "Infinity", "-Infinity", "nan"]), 1)
    elif op < 0.75:
        return "\ufeff" + text
    elif op < 0.85:
        i = rng.randrange(len(text) + 1)
        return text[:i] + "\x00" + text[i:]
    else:
        i = rng.randrange(len(lines))
        lines[i] = (
            lines[i][: rng.randrange(len(lines[i]) + 1)]
            + lines[i][rng.randrange(len(lines[i]) + 1) :]
        )
    return "\n".join(lines)


def make_input(rng: random.Random, bases: dict) -> tuple[str, str, str]:
    name = rng.choice(sorted(bases))
    kind, doc = bases[name]
    if rng.random() < 0.7:
        text = json.dumps(mutate_doc(rng, doc), indent=2, ensure_ascii=rng.random() < 0.5)
    else:
        text = mutate_text(rng, json.dumps(doc, indent=2))
    return name, kind, text


def record_problems(kind: str, records: list[dict]) -> list[str]:
    problems = []
    table = FIO_RESULTS if kind == "fio" else IOPING_REQUESTS
    types = {c.name: c.type for c in table.columns}
    for record in records:
        for key, value in record.items():
            if value is None:
                continue
            type_ = types.get(key)
            if type_ is None:
                problems.append(f"record key {key!r} is no column")
                continue
            problem = value_problem(type_, value)
            if problem:
                problems.append(f"{key}={value!r:.60}: {problem}")
    return problems


def check_inproc(path: Path, kind: str) -> str | None:
    try:
        records = list(parse_file(path, kind=kind, warn=lambda _: None))
        if kind == "ioping":  # the warehouse keeps its requests, one row each
            records = parse_ioping(decode_text(path.read_bytes(), "replace")).requests
    except ParseError as exc:
        message = str(exc)
        if "\n" in message or not message.startswith(f"{path}: "):
            return f"ParseError not one line naming the file: {message[:300]!r}"
        return None
    except Exception:  # what the fuzzer looks for
        return "exception: " + traceback.format_exc(limit=3).strip().splitlines()[-1][:300]
    problems = record_problems(kind, records)
    return "; ".join(problems[:3]) if problems else None


def _rows_of(path: Path, kind: str) -> int:
    text = decode_text(path.read_bytes(), "replace")
    if kind == "ioping":
        return len(parse_ioping(text).requests)
    from iofleet.results.parsers.fio import parse_fio

    try:  # fio --client: import leaves the "All clients" sum out (and does not read it)
        doc = json.loads(text)
        clients = doc["client_stats"]
        doc["client_stats"] = [c for c in clients if c.get("jobname") != "All clients"]
        text = json.dumps(doc) if len(doc["client_stats"]) < len(clients) else text
    except (ValueError, KeyError, TypeError, AttributeError):
        pass
    records = parse_fio(text).records
    return len([r for r in records if r.get("host")] or records)


def check_cli(path: Path, kind: str, root: Path, good: Path) -> str | None:
    """`iofleet import GOOD MUTATED`: the good file's rows always land; the mutated one's
    land whole (exit 0) or it is refused by name (exit 1); nothing else."""
    out = root / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "iofleet.cli", "import", "--out", str(out), "--label", "fz"]
        + [str(good), str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(root / "tmp")},
    )
    err = proc.stderr.strip()
    if "Traceback" in err or "internal error" in err:
        return f"crash (exit {proc.returncode}): {err.splitlines()[-1][:300]}"
    if proc.returncode not in (0, 1):
        return f"exit {proc.returncode}: {err[:300]!r}"
    stray = [line for line in err.splitlines() if not line.startswith(f"{path}: ")]
    if stray:
        return f"stderr line not naming the mutated file: {stray[0][:300]!r}"
    if proc.returncode == 1 and not err:
        return "exit 1 with nothing said"
    try:
        want = _rows_of(good, kind)
        if proc.returncode == 0:
            want += _rows_of(path, kind)
    except ParseError:
        return "imported a file the parser refuses"
    import duckdb

    db = duckdb.connect(str(out / "warehouse.duckdb"), read_only=True)
    try:
        table = "ioping_requests" if kind == "ioping" else "fio_results"
        got = db.execute(f"select count(*) from {table}").fetchone()[0]
        errors = db.execute("select count(*) from ingest_errors").fetchone()[0]
    finally:
        db.close()
    if errors:
        return f"{errors} ingest errors: a file was imported that its load refused"
    if got != want:
        return f"warehouse has {got} rows, expected {want} (exit {proc.returncode})"
    leftovers = list((root / "tmp").rglob("*"))
    if leftovers:
        return f"left in TMPDIR: {leftovers[:3]}"
    return None


INGEST_MATRIX = {
    "name": "fz",
    "storage": [{"label": "disk", "type": "local", "path": "TARGET"}],
    "workloads": [
        {
            "fio": "randwrite-16k-psync-16jobs",
            "params": {"RUNTIME": 1, "SIZE": "4m", "NUM_JOBS": 2},
        },
        {"ioping": {"count": 5, "interval_ms": 0, "write": False}},
        {
            "app": {
                "name": "pop",
                "populate": 'dd if=/dev/zero of="$IOFLEET_SHARED/d" bs=1M count=4 status=none',
                "run": 'cat "$IOFLEET_SHARED/d" > /dev/null',
            }
        },
    ],
    "parallelism": [1, 2],
}


def make_run(root: Path) -> Path:
    """A real finished run (fio, ioping, an app with a populate step; 1 and 2 slots): its
    raw/ root. Every artifact kind the ingest reads is in it."""
    matrix = json.loads(json.dumps(INGEST_MATRIX).replace("TARGET", str(root / "target")))
    (root / "m.json").write_text(json.dumps(matrix))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "iofleet.cli",
            "local",
            str(root / "m.json"),
            "--out",
            str(root / "run"),
        ],
        check=True,
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    return root / "run" / "raw"


def _expected(raw: Path) -> dict[str, int]:
    """Rows per table as each artifact's own rows say (ingest.rows_and_bin_blocks)."""
    from iofleet.results.ingest import merge_slot_rows, rows_and_bin_blocks

    want: dict[str, int] = {}
    slots: list[dict] = []  # a slot's manifest.json and slot.json rows are folded into one
    for path in sorted(raw.rglob("*.json")):
        if path.name.startswith("."):
            continue
        text = decode_text(path.read_bytes(), "replace")
        rows, blocks = rows_and_bin_blocks(str(path.relative_to(raw)), text)
        slots += rows.pop("slots", [])
        for table, found in rows.items():
            want[table] = want.get(table, 0) + len(found)
        if blocks:
            want["fio_latency_histograms"] = want.get("fio_latency_histograms", 0) + sum(
                1 for b in blocks if b.bins
            )
    want["slots"] = len(merge_slot_rows(slots))
    return want


def check_ingest(raw: Path) -> str | None:
    """Load the mutated tree into a fresh warehouse: no exception, no parser bug behind
    an ingest error, and every artifact's rows there (the bad one's or its error row)."""
    from iofleet.results.warehouse import Warehouse

    try:
        want = _expected(raw)
        wh = Warehouse(":memory:")
        try:
            wh.ingest_dir(raw)
            got = {t: wh.con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in want}
            reasons = [r[0] for r in wh.con.execute("SELECT reason FROM ingest_errors").fetchall()]
        finally:
            wh.con.close()
    except Exception:  # what the fuzzer looks for
        return "exception: " + traceback.format_exc(limit=3).strip().splitlines()[-1][:300]
    unexpected = [r for r in reasons if "unexpected" in r]
    if unexpected:
        return f"a parser bug behind an ingest error: {unexpected[0][:300]}"
    lost = {t: (want[t], got[t]) for t in want if want[t] != got[t]}
    return f"rows per table (artifacts say, warehouse has): {lost}" if lost else None


def mutate_artifact(rng: random.Random, raw: Path) -> str:
    files = sorted(p for p in raw.rglob("*.json") if not p.name.startswith("."))
    # run, slot, manifest and app records more often: the fio and ioping parsers have
    # their own mode
    weights = [1 if p.name.startswith(("w0", "w1")) and "app" not in p.name else 4 for p in files]
    path = rng.choices(files, weights)[0]
    if rng.random() < 0.08:  # an empty file or bytes that are no text at all
        path.write_bytes(b"" if rng.random() < 0.5 else rng.randbytes(rng.randrange(1, 4096)))
        return str(path.relative_to(raw))
    text = path.read_text(encoding="utf-8", errors="surrogateescape")
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    if doc is not None and rng.random() < 0.75:
        new = json.dumps(mutate_doc(rng, doc), indent=2, ensure_ascii=rng.random() < 0.5)
    else:
        new = mutate_text(rng, text)
    path.write_text(new, encoding="utf-8", errors="surrogatepass")
    return str(path.relative_to(raw))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["inproc", "cli", "ingest"])
    parser.add_argument("count", type=int)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    bases = _bases()
    print(f"{len(bases)} bases", file=sys.stderr)
    root = Path(tempfile.mkdtemp(prefix="fuzz-parse-"))
    failures = root / "failures"
    failed = 0
    seen: set[str] = set()
    if args.mode == "ingest":
        return fuzz_ingest(rng, args.count, root)
    for n in range(args.count):
        name, kind, text = make_input(rng, bases)
        case = root / f"case-{n}"
        case.mkdir()
        (case / "tmp").mkdir()
        path = case / "out.json"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        if args.mode == "inproc":
            problem = check_inproc(path, kind)
        else:
            good = FIXTURES / (
                "ioping/read-c21.json" if kind == "ioping" else "fio/json-randread.json"
            )
            problem = check_cli(path, kind, case, good)
        if problem:
            failed += 1
            failures.mkdir(exist_ok=True)
            saved = failures / f"{n}-{Path(name).name}"
            saved.write_bytes(path.read_bytes())
            key = problem[:80]
            if key not in seen:
                seen.add(key)
                print(f"{saved} (from {name}): {problem}")
        for p in sorted(case.rglob("*"), reverse=True):
            p.rmdir() if p.is_dir() else p.unlink()
        case.rmdir()
        if (n + 1) % 500 == 0:
            print(f"{n + 1} inputs, {failed} failed", file=sys.stderr)
    print(f"{args.count} inputs, {failed} failed ({len(seen)} kinds); failures under {failures}")
    return 1 if failed else 0


def fuzz_ingest(rng: random.Random, count: int, root: Path) -> int:
    import shutil

    made = root / "made"
    made.mkdir()
    raw = make_run(made)
    problem = check_ingest(raw)
    if problem:
        print(f"the unmutated run already fails: {problem}")
        return 1
    failures = root / "failures"
    failed, seen = 0, set()
    for n in range(count):
        case = root / f"case-{n}"
        shutil.copytree(raw, case)
        name = mutate_artifact(rng, case)
        problem = check_ingest(case)
        if problem:
            failed += 1
            failures.mkdir(exist_ok=True)
            shutil.copytree(case, failures / str(n))
            if problem[:80] not in seen:
                seen.add(problem[:80])
                print(f"{failures / str(n)} ({name} mutated): {problem}")
        shutil.rmtree(case)
        if (n + 1) % 200 == 0:
            print(f"{n + 1} inputs, {failed} failed", file=sys.stderr)
    print(f"{count} inputs, {failed} failed ({len(seen)} kinds); failures under {failures}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
