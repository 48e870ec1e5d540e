"""Fuzz `iofleet plan` / `iofleet local` with matrices nobody here wrote.

Mutates the shipped examples (examples/*.json) at the JSON level (a value of any kind
at any path, a key added or removed, README fields where they do not belong, deep
nesting, 5,000-character and longer values and keys with line breaks in them,
thousands of keys added to one object) and at the text level (duplicate keys, BOM,
invalid UTF-8, NUL bytes, truncation, top-level non-objects, empty file), and checks the
promise for bad input: exit 0 or 2 only; on 2 every stderr line starts with `FILE: `
and is at most MAX_LINE characters after it, at most MAX_LINES lines, no traceback;
nothing created under the tmp root.

    PYTHONPATH=$PWD .venv/bin/python scripts/fuzz_matrix.py inproc 5000
    PYTHONPATH=$PWD .venv/bin/python scripts/fuzz_matrix.py cli 300
    PYTHONPATH=$PWD .venv/bin/python scripts/fuzz_matrix.py local 300

Prints each failure (with the input saved under the tmp root's `failures/`) and a count.
Not part of the test suite (it is slow and random); the regressions it found are unit
tests (tests/unit/test_matrix_document.py and friends).
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((REPO / "examples").glob("*.json"))
BASES = {p.name: json.loads(p.read_text()) for p in EXAMPLES}
# two more bases, valid for AWS, with what no example has: FSx for Lustre, Mountpoint,
# provisioned EFS, io2, an inline app, ioping writes, prices, every top-level setting
shipped = json.loads((REPO / "iofleet/plan/data/prices.json").read_text())
every = {
    "name": "every-field",
    "description": "all of it",
    "instance_types": ["m6i.large", "c6gd.xlarge"],
    "storage": [
        {
            "label": "lu",
            "type": "fsx-lustre",
            "storage_capacity_gib": 1200,
            "deployment_type": "PERSISTENT_2",
            "per_unit_storage_throughput": 125,
        },
        {"label": "lu-id", "type": "fsx-lustre", "file_system_id": "fs-0123456789abcdef0"},
        {
            "label": "zfs",
            "type": "fsx-openzfs",
            "storage_capacity_gib": 64,
            "throughput_capacity": 128,
        },
        {"label": "s3", "type": "s3-mountpoint"},
        {"label": "s3x", "type": "s3express-mountpoint", "az_id": "use1-az4"},
        {
            "label": "efs-p",
            "type": "efs",
            "throughput_mode": "provisioned",
            "provisioned_mibps": 100,
        },
        {
            "label": "io2",
            "type": "ebs",
            "volume_type": "io2",
            "size_gib": 100,
            "iops": 5000,
            "filesystem": "ext4",
        },
    ],
    "workloads": [{"fio": "mountpoint-seq-write-read-1m"}],
    "parallelism": [1, 2],
    "repeats": 2,
    "limits": {"max_instances": 1000},
    "burst_policy": "refill",
    "ubuntu_release": "22.04",
    "stop_on_failure": True,
    "cell_concurrency": 4,
    "slot_timeout_s": 3600,
    "prices": {
        "as_of": "2026-11-20",
        "source": "mine",
        "regions": {"us-east-1": shipped["regions"]["us-east-1"]},
    },
}
apps = {
    "name": "apps",
    "instance_types": ["m6i.large"],
    "storage": [
        {
            "label": "gp3",
            "type": "ebs",
            "volume_type": "gp3",
            "size_gib": 100,
            "iops": 3000,
            "throughput_mibps": 125,
        }
    ],
    "workloads": [
        {"app": {"name": "mybuild", "populate": "echo hi", "run": "true"}},
        {"app": "c-build"},
        {"ioping": {"count": 10, "interval_ms": 10, "write": True}},
        {"fio": "randwrite-16k-psync-16jobs", "params": {"RUNTIME": 60}},
    ],
    "parallelism": [3],
    "ami_id": "ami-0123456789abcdef0",
}
BASES["every-field"] = every
BASES["apps"] = apps
README_KEYS = [
    "name", "description", "instance_types", "storage", "workloads", "parallelism",
    "repeats", "limits", "max_instances", "budget_usd", "burst_policy", "ami_id",
    "ubuntu_release", "stop_on_failure", "cell_concurrency", "slot_timeout_s", "prices",
    "as_of", "source", "regions", "label", "type", "volume_type", "size_gib", "iops",
    "throughput_mibps", "filesystem", "file_system_id", "performance_mode",
    "throughput_mode", "provisioned_mibps", "storage_capacity_gib", "throughput_capacity",
    "deployment_type", "per_unit_storage_throughput", "path", "az_id", "fio", "params",
    "ioping", "count", "interval_ms", "write", "app", "populate", "run", "mountpoint",
    "RUNTIME", "SIZE", "BS", "IODEPTH", "NUMJOBS",
]  # fmt: skip
NAMES = ["ebs", "efs", "fsx-openzfs", "fsx-lustre", "instance-store", "local",
         "s3-mountpoint", "s3express-mountpoint", "c-build", "yocto-core-image-minimal",
         "randwrite-16k-psync-16jobs", "gp3", "io2", "maxIO", "provisioned", "PERSISTENT_2",
         "SCRATCH_2", "22.04", "24.04", "refill", "drain", "as-is", "m6i.4xlarge",
         "ami-0123456789abcdef0", "fs-0123456789abcdef0", "use1-az4", "/tmp", "2026-01-01"]  # fmt: skip


LONG_TEXTS = [
    "q" * 5000, "q" * 2500 + "\n" + "q" * 2500, "\r\n" * 3000, "\u2028" * 5000, "é" * 5000,
    "🙂" * 3000, "\x01" * 5000, "'\"" * 2500, "/tmp/" + "p" * 5000, "9" * 5000, "1e" + "9" * 5000,
    "gp3" + "x" * 900_000,
]  # fmt: skip


def _scalar(r: random.Random) -> Any:
    pick = r.randrange(24)
    if pick >= 22:  # a long value, some with line breaks in it
        return r.choice(LONG_TEXTS)
    if pick == 0:
        return None
    if pick == 1:
        return r.choice([True, False])
    if pick == 2:
        return r.choice([0, -1, 1, 2, 10**30, -(10**30), 2**63, 2**63 - 1, -(2**63) - 1, 10**19])
    if pick == 3:
        return r.randint(-(2**70), 2**70)
    if pick == 4:
        return r.choice([float("nan"), float("inf"), float("-inf"), 1e308, -0.0, 0.5, 1.5, 1e-300])
    if pick == 5:
        return r.choice(["NaN", "Infinity", "-1", "1e400", "0x10", " 1", "1 ", "1_000", "١"])
    if pick == 6:
        return r.choice(["", " ", "\x00", "a\x00b", "x\n", "\t", "\u2028", "\ud800", "\udfff"])
    if pick == 7:
        return "a" * r.choice([49, 100, 4097, 70000, 300000])
    if pick == 8:
        return r.choice(["ü", "１", "𝟙", "Ⅷ", "ǅ", "ß", "İ", "\u0301", "🙂", "\ufeff", "‮"])
    if pick == 9:
        return r.choice(NAMES) + r.choice(["", "\n", " ", "x", "-", "."])
    if pick == 10:
        return r.choice(["../../etc", "/", "a/b", "$(reboot)", "`id`", "a;b", "~", "C:\\x", "a:b"])
    if pick == 11:
        return r.choice([[], {}])
    if pick == 12:
        return r.choice(NAMES)
    if pick == 13:
        return r.randint(-5, 200000)
    if pick == 14:
        return r.choice(["${RUNTIME}", "$RUNTIME", "${", "}", "%", "{}", "[]", "null"])
    if pick == 15:
        return r.uniform(-1e6, 1e6)
    if pick == 16:
        return "".join(chr(r.randrange(1, 0x2FFFF)) for _ in range(r.randrange(1, 12)))
    if pick == 17:
        return r.choice(["1k", "4q", "10x", "yes", "60s", "1m", "0", "-0", "+1", "1.0"])
    if pick == 18:
        return str(r.randint(-(10**25), 10**25))
    if pick == 19:
        return r.choice([10**6, 10**9, 604801, 100001, 501, 1001, 40, 41, 524289, 63])
    if pick == 20:
        return r.choice([1, 2, 3, 10, 100, 7200, 604800])
    return r.choice(README_KEYS)


def _value(r: random.Random, depth: int = 0) -> Any:
    if depth < 3 and r.random() < 0.2:
        if r.random() < 0.5:
            return [_value(r, depth + 1) for _ in range(r.randrange(4))]
        return {_key(r): _value(r, depth + 1) for _ in range(r.randrange(4))}
    return _scalar(r)


def _key(r: random.Random) -> str:
    if r.random() < 0.05:  # a long key, some with line breaks in it
        return r.choice(LONG_TEXTS[:8])
    return r.choice(
        README_KEYS
        + ["nmae", "<<", "Storage", "type ", "", " ", "\x00", "a.b", "0", "[0]", "ü", "\ud800"]
    )


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    items = (
        doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    )
    for k, v in items:
        out.append((*prefix, k))
        out += _paths(v, (*prefix, k))
    return out


def _objects(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if isinstance(doc, dict) else []
    items = (
        doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    )
    for k, v in items:
        out += _objects(v, (*prefix, k))
    return out


def _at(doc: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        doc = doc[p]
    return doc


def _dumps(doc: Any) -> bytes:
    return json.dumps(doc, allow_nan=True, ensure_ascii=False).encode("utf-8", "surrogatepass")


def _json_mutation(r: random.Random, doc: Any) -> Any:
    kind = r.choice(
        ["replace", "replace", "replace", "add", "remove", "wrap", "deep", "swap", "many"]
    )
    if kind == "add":
        _at(doc, r.choice(_objects(doc)))[_key(r)] = _value(r)
        return doc
    if kind == "many":  # thousands of keys added to one object, all the same kind of bad
        value = _scalar(r)
        prefix = r.choice(["k", "x", "P", "us-east-", "\x00", "a\nb"])
        _at(doc, r.choice(_objects(doc))).update(
            {f"{prefix}{i}": value for i in range(r.choice([11, 64, 3000]))}
        )
        return doc
    paths = _paths(doc)
    if not paths:
        return doc
    path = r.choice(paths)
    parent, key = _at(doc, path[:-1]), path[-1]
    if kind == "remove":
        del parent[key]
    elif kind == "wrap":
        parent[key] = [parent[key]] if r.random() < 0.5 else {"x": parent[key]}
    elif kind == "deep":
        v: Any = parent[key]
        for _ in range(r.choice([5, 15, 16, 17, 30, 200])):
            v = [v] if r.random() < 0.5 else {"a": v}
        parent[key] = v
    elif kind == "swap":  # a value from elsewhere in the same or another example
        other = copy.deepcopy(r.choice(list(BASES.values())))
        parent[key] = copy.deepcopy(_at(other, r.choice(_paths(other))))
    else:
        parent[key] = _value(r)
    return doc


def _text_mutation(r: random.Random, data: bytes) -> bytes:
    kind = r.randrange(14)
    if kind == 0:
        return b"\xef\xbb\xbf" + data
    if kind == 1:  # invalid UTF-8 somewhere
        i = r.randrange(len(data) + 1)
        return (
            data[:i]
            + r.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80", b"\xf8\x88"])
            + data[i:]
        )
    if kind == 2:  # truncated
        return data[: r.randrange(len(data) + 1)]
    if kind == 3:  # a duplicate key right after an opening brace
        i = data.find(b"{", r.randrange(len(data)))
        if i < 0:
            i = data.find(b"{")
        k = r.choice(README_KEYS).encode()
        return data[: i + 1] + b'"' + k + b'": ' + _dumps(_scalar(r)) + b", " + data[i + 1 :]
    if kind == 4:
        return r.choice(
            [b"", b" ", b"\n", b"null", b"[]", b"1", b'"x"', b"true", b"[{}]", b"{}", b"NaN",
             b"\x00", b"{\x00}", b"\xff\xfe{\x00}\x00", b"\xfe\xff\x00{\x00}", b"{}{}", b"{} x",
             b"// c\n{}", b"name: x\n", b"{'a': 1}", b"[" * 100000, b"{\"a\":" * 50000,
             b"9" * 5000, b"1e99999", b"-", b'"\\ud800"', b'{"\\u0000": 1}']
        )  # fmt: skip
    if kind == 5:  # a NUL or control byte in the text
        i = r.randrange(len(data) + 1)
        return data[:i] + r.choice([b"\x00", b"\x01", b"\x1f", b"\r", b"\t"]) + data[i:]
    if kind == 6:  # escapes in a string
        i = data.find(b'": "')
        if i < 0:
            return data
        i += 4
        return (
            data[:i]
            + r.choice([b"\\u0000", b"\\ud800", b"\\udc00x", b"\\n", b"\\u2028"])
            + data[i:]
        )
    if kind == 7:  # a number literal replaced
        return data.replace(
            b"1", r.choice([b"1e400", b"-0", b"1.0", b"1" * 25, b"0.1e1", b"01"]), 1
        )
    if kind == 8:  # too big
        return data[:-1] + b', "description": "' + b"x" * (1024 * 1024) + b'"}'
    if kind == 9:  # CRLF / trailing stuff
        return data.replace(b"\n", b"\r\n") + r.choice([b"", b"\x00", b" ", b"\x1a"])
    if kind == 10:  # a whole matrix as a list or under a key
        return r.choice([b"[" + data + b"]", b'{"matrix": ' + data + b"}"])
    if kind == 11:  # a key with a NUL or surrogate escape
        return data.replace(b'"name"', r.choice([b'"na\\u0000me"', b'"\\ud800"', b'"name\\n"']), 1)
    if kind == 12:  # duplicate keys deep: repeat the first key of the last object
        j = data.rfind(b"{")
        end = data.find(b",", j)
        if j < 0 or end < 0:
            return data
        return data[: end + 1] + data[j + 1 : end] + b"," + data[end + 1 :]
    return data  # unchanged (a valid one now and then)


def generate(r: random.Random) -> tuple[str, bytes]:
    """(target, bytes of a matrix)."""
    name = r.choice(sorted(BASES))
    target = (
        r.choice(["local", "aws"]) if r.random() < 0.2 else ("local" if "local" in name else "aws")
    )
    doc = copy.deepcopy(BASES[name])
    for _ in range(r.choice([1, 1, 1, 2, 3, 5])):
        doc = _json_mutation(r, doc)
    data = _dumps(doc)
    if r.random() < 0.3:
        data = _text_mutation(r, data)
    return target, data


# --------------------------------------------------------------------------- checks


def _snapshot(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


MAX_LINE = 300  # characters of a refusal after `FILE: ` (docs/decisions.md 63)
MAX_LINES = 100  # iofleet.plan.matrix.MAX_LINES


def check_lines(code: int, err: str, file: str) -> str | None:
    if code not in (0, 2):
        return f"exit {code}"
    if "Traceback" in err:
        return "traceback"
    if code == 2:
        lines = err.splitlines()
        if not lines:
            return "exit 2 without a line"
        if len(lines) > MAX_LINES:
            return f"{len(lines)} lines (at most {MAX_LINES})"
        for line in lines:
            if not line.startswith(f"{file}: ") or len(line) <= len(file) + 2:
                return f"line not `FILE: message`: {line[:200]!r}"
            if len(line) - len(file) - 2 > MAX_LINE:
                return f"a line of {len(line)} characters: {line[:200]!r}"
    return None


def run_inproc(
    n: int, seed: int, root: Path, cases: list[tuple[str, bytes]] | None = None
) -> list[tuple[str, bytes, str]]:
    from iofleet import cli
    from iofleet.errors import ValidationFailed
    from iofleet.plan.matrix import plan_matrix_file

    failures = []
    work = root / "work"
    work.mkdir()
    os.chdir(work)
    r = random.Random(seed)
    for i in range(n):
        target, data = cases[i] if cases is not None else generate(r)
        path = work / "m.json"
        path.write_bytes(data)
        before = _snapshot(root)
        problem = None
        for t in {target, "aws" if target == "local" else "local"}:
            try:
                plan_matrix_file(path, target=t)
            except ValidationFailed as exc:
                lines = exc.lines()
                bad = [
                    x
                    for x in lines
                    if not x.startswith(f"{path}: ")
                    or "\n" in x
                    or len(x) - len(str(path)) - 2 > MAX_LINE
                ]
                if not lines or bad:
                    problem = f"{t}: bad lines {bad[:2]!r}"
            except Exception as exc:  # noqa: BLE001
                problem = f"{t}: {type(exc).__name__}: {exc}"[:300]
            if problem:
                break
            for fmt in ("table", "json"):
                out, err = io.StringIO(), io.StringIO()
                with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                    code = cli.main(["plan", str(path), "--target", t, "--format", fmt])
                why = check_lines(code, err.getvalue(), str(path))
                if why:
                    problem = f"cli.main {t} {fmt}: {why}: {err.getvalue()[:300]!r}"
                    break
            if problem:
                break
        if _snapshot(root) != before:
            problem = (problem or "") + f" created {sorted(_snapshot(root) - before)[:5]}"
        if problem:
            failures.append((target, data, problem))
            print(f"FAIL {target} {data[:300]!r}: {problem}", file=sys.stderr, flush=True)
        if i % 500 == 0:
            print(f"inproc {i}/{n} failures {len(failures)}", file=sys.stderr, flush=True)
    return failures


SWEEP_VALUES: list[Any] = [
    None, True, False, 0, -1, 1, 2**63 - 1, -(2**63), 2**63, 10**30, 0.5, -0.0, 1e308,
    float("nan"), "", " ", "NaN", "\x00", "a" * 5000, "ü", "1", "x\n", [], {}, [1], {"a": 1},
    "${RUNTIME}", "../x", "/", "a:b",
]  # fmt: skip


def sweep_cases() -> list[tuple[str, bytes]]:
    """Every path of every base, each value of SWEEP_VALUES there; plus each object's keys
    removed one by one and an unknown key added to each object."""
    cases = []
    for name, base in sorted(BASES.items()):
        target = "local" if "local" in name else "aws"
        for path in _paths(base):
            for value in SWEEP_VALUES:
                doc = copy.deepcopy(base)
                _at(doc, path[:-1])[path[-1]] = value
                cases.append((target, _dumps(doc)))
            doc = copy.deepcopy(base)
            del _at(doc, path[:-1])[path[-1]]
            cases.append((target, _dumps(doc)))
        for where in _objects(base):
            doc = copy.deepcopy(base)
            _at(doc, where)["unknown_field"] = 1
            cases.append((target, _dumps(doc)))
    return cases


def _cli(args: list[str], cwd: Path, timeout: float = 60) -> tuple[int, str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("IOFLEET_DEBUG", None)
    try:
        p = subprocess.run(
            [str(REPO / ".venv/bin/iofleet"), *args],
            cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env, errors="replace",
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return -1, "timeout (a hang)"
    return p.returncode, p.stderr


def run_cli(n: int, seed: int, root: Path, local: bool) -> list[tuple[str, bytes, str]]:
    failures = []
    r = random.Random(seed)
    work = root / "work"
    work.mkdir()
    done = 0
    while done < n:
        target, data = generate(r)
        if local:  # only refused matrices; a valid one would run fio for real
            from iofleet.errors import ValidationFailed
            from iofleet.plan.matrix import plan_matrix_file

            tmp = root / "probe.json"
            tmp.write_bytes(data)
            try:
                plan_matrix_file(tmp, target="local")
                tmp.unlink()
                continue
            except ValidationFailed:
                pass
            except Exception:  # noqa: BLE001 - the in-process run reports it; run the CLI
                pass
            tmp.unlink()
        done += 1
        path = work / "m.json"
        path.write_bytes(data)
        before = _snapshot(root)
        if local:
            code, err = _cli(["local", "m.json", "--out", "outdir", "--quiet"], work)
        else:
            code, err = _cli(["plan", "m.json", "--target", target], work)
        why = check_lines(code, err, "m.json")
        if local and code == 0:
            why = "refused in-process, ran under local"
        created = _snapshot(root) - before
        if created:
            why = (why or "") + f" created {sorted(created)[:5]}"
        if why:
            failures.append((target, data, f"{why}: {err[:300]!r}"))
            print(f"FAIL {target} {data[:300]!r}: {why}", file=sys.stderr, flush=True)
        for extra in created:  # leave the next case a clean tree
            p = root / extra
            if p.is_file():
                p.unlink()
        for extra in sorted(created, reverse=True):
            p = root / extra
            if p.is_dir():
                p.rmdir()
    return failures


def main() -> int:
    mode, n = sys.argv[1], int(sys.argv[2])
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    root = Path(tempfile.mkdtemp(prefix=f"fuzz-{mode}-"))
    os.environ["TMPDIR"] = str(root / "tmp")
    (root / "tmp").mkdir()
    tempfile.tempdir = None
    if mode == "inproc":
        failures = run_inproc(n, seed, root)
    elif mode == "sweep":
        cases = sweep_cases()[seed::n]  # every n-th from seed: shards run side by side
        n = len(cases)
        failures = run_inproc(n, seed, root, cases)
    else:
        failures = run_cli(n, seed, root, local=mode == "local")
    fails = root.parent / f"{root.name}-failures"
    fails.mkdir()
    for i, (target, data, why) in enumerate(failures):
        (fails / f"{i:04d}-{target}.json").write_bytes(data)
        print(f"FAIL {i:04d} target={target}: {why}")
    print(f"{mode}: {n} inputs, {len(failures)} failures (inputs in {fails})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
