"""Stop `iofleet import`, `report --html` and `compare` at random instants and check what
a stop must leave.

    .venv/bin/python scripts/command_sweep.py --trials 60 --seed 1

Once, under --work/base: a finished `iofleet local` run (ioping and a short fio, 1 and
2 slots) and an import of a few fixtures, in one --out; FILES copies of that run's
raw artifacts and of tests/fixtures (ioping, fio json and json+), the import's input;
and the result of each command run to its end (the rows an import of FILES adds per
table, the HTML report, compare's output).

Each trial copies that --out, starts one of

- `iofleet import FILES --out out --label tNNN`,
- `iofleet report --warehouse out/warehouse.duckdb --html out/report.html` (an
  earlier report.html there),
- `iofleet compare RUN_A RUN_B --warehouse out/warehouse.duckdb`,

with TMPDIR a folder of the trial, and at a random instant of its length sends SIGINT,
SIGTERM or SIGHUP to its process group (as Ctrl-C from a terminal does), sometimes a
second one soon after, or SIGKILL. Then it checks, where the effects land:

- the exit status: 0 (it ended first) or 128 + the first signal; one "interrupted"
  line; no traceback; no process of it left;
- import: the run is in the warehouse whole (each table's rows for it as the whole
  import gives them, the other runs' rows as before) and in raw/, or in neither (every
  table's row count and raw/ as before); what its line says matches;
- report and compare: the warehouse byte for byte as before; report.html the earlier
  one or the whole new one; what the line says matches;
- no temp file in --out or TMPDIR (after a SIGKILL: none after the next command);
- the same command run again to its end exits 0 and gives the whole result, and after
  it every run in raw/ is in the warehouse whole.

A trial whose checks fail keeps its folder under --work and prints what failed; the
script exits 1 if any did. As with scripts/signal_sweep.py, this is a search, not a
test: what a command does at an instant depends on the machine's load. Needs fio and
ioping (for the base run).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scripts.signal_sweep import HANDLED, draw_stop, say_trial, stop_at  # noqa: E402
from tests.integration.proctable import alive, files_under, tree  # noqa: E402
from tests.integration.test_command_signals import FIXTURES, _temp_files  # noqa: E402
from tests.integration.test_local_signals import IOPING, _matrix  # noqa: E402

FIO = {"fio": "randwrite-16k-psync-16jobs", "params": {"RUNTIME": 1, "SIZE": "4m", "NUM_JOBS": 2}}
INPUTS = [  # besides the base run's own artifacts
    FIXTURES / "fio" / "json-randread.json",
    FIXTURES / "fio" / "jsonplus-two-jobs.json",
    FIXTURES / "fio" / "jsonplus-numjobs-separate.json",
    FIXTURES / "ioping" / "read-c21.json",
    FIXTURES / "ioping" / "write-c11.json",
]
COMMANDS = ("import", "report", "compare")
OLD_HTML = "<p>the earlier report</p>\n"


def _iofleet(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """`iofleet ARGS` run to its end: exit 0, its stdout."""
    result = subprocess.run(
        [sys.executable, "-m", "iofleet", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert result.returncode == 0, f"iofleet {args[0]}: {result.returncode} {result.stderr[-500:]}"
    return result.stdout


def _con(out: Path) -> duckdb.DuckDBPyConnection:
    return duckdb.connect(str(out / "warehouse.duckdb"), read_only=True)


def counts(out: Path) -> dict[str, int]:
    """Every table's row count."""
    con = _con(out)
    try:
        tables = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()]
        return {t: con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables}  # type: ignore[index]
    finally:
        con.close()


def run_counts(out: Path, run_id: str) -> dict[str, int]:
    """Each table with a run_id column: its rows of `run_id`."""
    con = _con(out)
    try:
        tables = [
            r[0]
            for r in con.execute(
                "SELECT DISTINCT table_name FROM duckdb_columns() WHERE column_name = 'run_id' "
                "AND table_name IN (SELECT table_name FROM duckdb_tables())"
            ).fetchall()
        ]
        return {
            t: con.execute(f'SELECT count(*) FROM "{t}" WHERE run_id = ?', [run_id]).fetchone()[0]  # type: ignore[index]
            for t in sorted(tables)
        }
    finally:
        con.close()


def warehouse_runs(out: Path) -> set[str]:
    con = _con(out)
    try:
        return {r[0] for r in con.execute("SELECT run_id FROM runs").fetchall()}
    finally:
        con.close()


def raw_runs(out: Path) -> set[str]:
    return {p.name for p in (out / "raw").iterdir()}


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass
class Base:
    """What every trial starts from, and the whole results to compare with."""

    out: Path  # copied per trial
    files: list[Path]  # the import's input
    runs: list[str]  # compare's two runs
    imported: dict[str, int]  # rows per table an import of `files` adds for its run
    base_runs: dict[str, dict[str, int]]  # the rows of each run already in `out`
    html: str  # the whole report of `out`'s latest run
    compared: str  # compare's whole output


def prepare(work: Path, n_files: int) -> Base:
    base = work / "base"
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    matrix = _matrix(base, [IOPING, FIO], [1, 2], name="base")
    for _ in range(2):  # compare's two runs
        _iofleet(base, "local", str(matrix), "--out", "out", "-q")
    out = base / "out"
    _iofleet(base, "import", *map(str, INPUTS), "--out", "out", "--label", "first")
    (out / "report.html").unlink(missing_ok=True)
    sources = sorted(out.glob("raw/base-*/*/slot-*/w*.json")) + INPUTS
    files = base / "files"
    files.mkdir()
    paths = []
    for i in range(n_files):
        path = files / f"f{i:04d}.json"
        shutil.copyfile(sources[i % len(sources)], path)
        paths.append(path)
    runs = sorted(r for r in raw_runs(out) if r.startswith("base-"))
    ref = work / "reference"
    shutil.rmtree(ref, ignore_errors=True)
    shutil.copytree(out, ref / "out")
    _iofleet(ref, "import", *map(str, paths), "--out", "out", "--label", "whole")
    (new,) = raw_runs(ref / "out") - raw_runs(out)
    imported = run_counts(ref / "out", new)
    html = ref / "report.html"
    _iofleet(base, "report", "--warehouse", str(out / "warehouse.duckdb"), "--html", str(html))
    compared = _iofleet(base, "compare", *runs, "--warehouse", str(out / "warehouse.duckdb"))
    return Base(
        out,
        paths,
        runs,
        imported,
        {r: run_counts(out, r) for r in raw_runs(out)},
        html.read_text(),
        compared,
    )


def command(kind: str, label: str, base: Base) -> list[str]:
    if kind == "import":
        return ["import", *map(str, base.files), "--out", "out", "--label", label]
    if kind == "report":
        return ["report", "--warehouse", "out/warehouse.duckdb", "--html", "out/report.html"]
    return ["compare", *base.runs, "--warehouse", "out/warehouse.duckdb"]


def check_runs(out: Path, base: Base) -> list[str]:
    """Every run in raw/ is in the warehouse whole, and the reverse."""
    found = []
    raw, have = raw_runs(out), warehouse_runs(out)
    if raw != have:
        found.append(
            f"runs in raw/ only: {sorted(raw - have)}; in the warehouse only: {sorted(have - raw)}"
        )
    for run_id in sorted(raw & have):
        want = base.base_runs.get(run_id, base.imported)
        got = run_counts(out, run_id)
        if got != want:
            diff = {t: (got.get(t), n) for t, n in want.items() if got.get(t) != n}
            found.append(f"run {run_id}: rows (got, whole) {diff}")
    return found


def catches(pid: int, signum: int) -> bool:
    """Whether the process has a handler for `signum` (SigCgt in /proc)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    masks = [int(line.split()[1], 16) for line in status.splitlines() if line[:6] == "SigCgt"]
    return any(mask >> (signum - 1) & 1 for mask in masks)


def trial(
    root: Path,
    kind: str,
    base: Base,
    delay: float,
    signals: list[tuple[float, int]],
) -> tuple[list[str], float, str]:
    """One stopped command in `root`: what went wrong (empty: nothing), how long the
    command ran, and how it ended. A first signal sent before iofleet's handlers were
    in place (Python's start: /proc shows no SIGTERM handler yet) has Python's default
    action: that ending is counted apart and only its effects are checked."""
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    out = root / "out"
    shutil.copytree(base.out, out)
    html = out / "report.html"
    html.write_text(OLD_HTML)
    tmp = root / "tmp"
    tmp.mkdir()
    before_counts, before_raw = counts(out), raw_runs(out)
    before_digest = digest(out / "warehouse.duckdb")
    env = dict(os.environ, TMPDIR=str(tmp))
    label = f"t{root.name}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "iofleet", *command(kind, label, base)],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    started = time.monotonic()
    seen: dict[int, int] = {}
    sent: list[int] = []
    caught: list[bool] = []  # before the first signal: does it catch them yet?

    def send(signum: int) -> None:
        if not caught:
            caught.append(catches(proc.pid, signal.SIGTERM))  # StopSignals takes all three
        os.killpg(proc.pid, signum)

    try:
        sent = stop_at(proc, delay, signals, lambda: seen.update(tree(proc.pid)), send, 0.002)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    code = proc.returncode
    handled = caught[0] if caught else True
    elapsed = time.monotonic() - started
    (root / "stderr").write_text(stderr)
    problems: list[str] = []
    killed = signal.SIGKILL in sent and code == -signal.SIGKILL
    # SIGTERM, SIGHUP, SIGINT: killed (-signal), SIGINT silently since decision 74 (a
    # KeyboardInterrupt traceback through `-m iofleet.cli`); in Python's own start (its
    # site module), 1 and "Fatal Python error"
    early = (
        bool(sent)
        and not handled
        and code not in (0, 128 + sent[0])
        and (not stderr or stderr.rstrip().endswith("KeyboardInterrupt"))
    )
    if early:
        killed = True  # as after a SIGKILL: the next command must clean up
        ending = "died in Python's start"
    else:
        ending = "SIGKILL" if killed else ("0" if code == 0 else "128+signal")
        # 128 + the first signal; or a later one the line names: two signals that both
        # came while the process was in C code (DuckDB's library being loaded) have their
        # handlers run together, in signal-number order (Python's rule)
        named = [s for s in sent[1:] if f"interrupted by {signal.Signals(s).name}" in stderr]
        if not killed and code not in {0} | {128 + s for s in sent[:1] + named}:
            problems.append(f"exit status {code}, signals {sent}")
        if "Traceback" in stderr:
            problems.append("a traceback on stderr")
    lines = [line for line in stderr.splitlines() if "interrupted" in line]
    line = lines[0] if lines else ""
    if not killed and code > 0 and len(lines) != 1:
        problems.append(f"{len(lines)} 'interrupted' lines")
    if alive(seen):
        problems.append(f"processes left: {alive(seen)}")
    if not killed:
        if _temp_files(out):
            problems.append(f"temp files in --out: {_temp_files(out)[:5]}")
        if files_under(tmp):
            problems.append(f"files in TMPDIR: {files_under(tmp)[:5]}")
    # where the effects landed
    if kind == "import":
        new = raw_runs(out) - before_raw
        landed = warehouse_runs(out) - before_raw
        if not killed and new != landed:
            problems.append(f"run in raw/ {sorted(new)}, in the warehouse {sorted(landed)}")
        if landed:
            problems.extend(check_runs(out, base) if not killed or new == landed else [])
            if "nothing imported" in line:
                problems.append(f"says nothing imported, run {sorted(landed)} is in the warehouse")
            if code == 0 and not stdout.startswith("imported "):
                problems.append(f"exit 0, stdout {stdout[:100]!r}")
        else:
            if counts(out) != before_counts:
                problems.append(
                    f"nothing imported, yet row counts {counts(out)} != {before_counts}"
                )
            if "imported whole" in line:
                problems.append("says imported whole, no run of it in the warehouse")
            if code == 0:
                problems.append("exit 0 and no run imported")
    else:
        if digest(out / "warehouse.duckdb") != before_digest:
            problems.append("the warehouse changed")
        if (out / "warehouse.duckdb.wal").exists():
            problems.append("a warehouse.duckdb.wal appeared")
        text = html.read_text()
        if kind == "report":
            if text not in (OLD_HTML, base.html):
                problems.append(
                    f"report.html neither the old nor the whole new one ({len(text)} chars)"
                )
            if "not written" in line and text != OLD_HTML:
                problems.append("says --html not written, it was")
            if code == 0 and text != base.html:
                problems.append("exit 0, report.html not the new one")
        elif text != OLD_HTML:
            problems.append("compare changed report.html")
        if kind == "compare" and code == 0 and stdout != base.compared:
            problems.append("exit 0, compare's output not the whole one")
    # the same command again, to its end
    try:
        again = _iofleet(root, *command(kind, f"{label}-again", base), env=env)
    except AssertionError as exc:
        problems.append(f"the next {kind}: {exc}")
        return problems, elapsed, ending
    if _temp_files(out):
        problems.append(f"temp files in --out after the next {kind}: {_temp_files(out)[:5]}")
    if files_under(tmp):
        problems.append(f"files in TMPDIR after the next {kind}: {files_under(tmp)[:5]}")
    if kind == "report" and html.read_text() != base.html:
        problems.append("the next report's HTML is not the whole one")
    if kind == "compare" and again != base.compared:
        problems.append("the next compare's output is not the whole one")
    problems.extend(check_runs(out, base))
    return problems, elapsed, ending


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=60)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--work", type=Path, default=Path("/tmp/iofleet-command-sweep"))
    parser.add_argument("--files", type=int, default=240, help="files the import reads")
    parser.add_argument("--kill-share", type=float, default=0.15, help="trials with SIGKILL")
    parser.add_argument("--commands", nargs="+", choices=COMMANDS, default=list(COMMANDS))
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    base = prepare(args.work, args.files)
    whole = {}
    for kind in args.commands:  # how long each takes here, whole
        clean, whole[kind], _ = trial(args.work / f"clean-{kind}", kind, base, 1e9, [])
        print(
            f"{kind} whole: {whole[kind]:.2f} s{'; ' + '; '.join(clean) if clean else ''}",
            flush=True,
        )
    failed = 0
    endings: dict[str, int] = {}
    for i in range(args.trials):
        kind = args.commands[i % len(args.commands)]
        delay, signals = draw_stop(
            rng, (0, whole[kind]), args.kill_share, 0.05, (*HANDLED, signal.SIGKILL)
        )
        root = args.work / f"{i:03d}"
        try:
            problems, _, ending = trial(root, kind, base, delay, signals)
        except Exception:  # noqa: BLE001 - a search reports and goes on
            problems, ending = ["script error: " + traceback.format_exc()[-800:]], "?"
        endings[f"{kind} {ending}"] = endings.get(f"{kind} {ending}", 0) + 1
        tail = f", {ending}: {'; '.join(problems) or 'ok'}"
        failed += say_trial(f"{i} {kind}", delay, signals, tail, bool(problems), root)
    print("how they ended: " + ", ".join(f"{k}: {n}" for k, n in sorted(endings.items())))
    print(f"{failed} of {args.trials} trials left something wrong (kept in {args.work})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
