"""Stop `iofleet local` at random instants and check what a stop must leave.

    .venv/bin/python scripts/signal_sweep.py --trials 40 --seed 3

Each trial runs a two-cell matrix (1 and 2 slots: ioping, a short fio, the c-build
preset; with --populate also an app whose cell data is written once) into a fresh --out and, at a random instant of the run, sends SIGINT, SIGTERM
or SIGHUP to its process group (as Ctrl-C from a terminal does), sometimes a second
signal soon after, or SIGKILL to the runner alone. Sometimes a finished run is in the
--out first. Then it checks, where the effects land:

- the exit status: 0 (the run ended first) or 128 + a signal sent, and one
  "interrupted" line;
- for a signal the run could handle: no process of the run, mount or loop device
  left, nothing on the target, no temp file in TMPDIR or --out
  (tests/integration/test_local_signals.assert_nothing_left);
- a next run into the same --out exits 0; after it (and after a SIGKILL, only then)
  the same is true, every run folder in raw/ has its row in `runs`, and each ioping
  and fio artifact in raw/ has its rows in the warehouse (nothing lost).

A trial whose checks fail keeps its folder under --work and prints what failed; the
script exits 1 if any did. The instants are drawn from a seeded generator, but what
the run is doing at an instant depends on the machine's load: this is a search for
problems, not a test (the tests of each awkward moment are in
tests/integration/test_local_signals.py). Runs only where fio and ioping are
installed, as root for nothing in particular.
"""

from __future__ import annotations

import argparse
import random
import shutil
import signal
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.integration.proctable import alive, wait_for  # noqa: E402
from tests.integration.test_local_signals import (  # noqa: E402
    Run,
    _matrix,
    _next_run,
    _query,
    _run_ids,
    assert_nothing_left,
)

FIO = {"fio": "randwrite-16k-psync-16jobs", "params": {"RUNTIME": 1, "SIZE": "4m", "NUM_JOBS": 2}}
IOPING = {"ioping": {"count": 3, "interval_ms": 0, "write": False}}
WORKLOADS = [IOPING, FIO, {"app": "c-build"}]
POPULATE = {  # --populate: an app whose cell data is written once, before the slots
    "app": {
        "name": "pop",
        "populate": 'dd if=/dev/zero of="$IOFLEET_SHARED/data" bs=1M count=16 status=none',
        "run": 'cat "$IOFLEET_SHARED/data" > /dev/null',
    }
}
HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _problem(check: object) -> str:
    """What a check that raised AssertionError found (bare asserts carry no message)."""
    try:
        check() if callable(check) else None
    except AssertionError as exc:
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        return f"{frame.line} {str(exc)[:300]}".strip()
    return ""


def _lost(root: Path, run_ids: list[str]) -> list[str]:
    """What of the given runs' raw folders is missing from the warehouse."""
    found = []
    have = {r[0] for r in _query(root, "SELECT run_id FROM runs")}
    for run_id in run_ids:
        raw = root / "out" / "raw" / run_id
        if run_id not in have:
            found.append(f"run {run_id} in raw/, not in runs")
        iopings = len(list(raw.glob("*/slot-*/w*-ioping.json")))
        rows = _query(root, f"SELECT count(*) FROM ioping_requests WHERE run_id = '{run_id}'")
        if rows[0][0] != 2 * iopings:  # ioping -c 3: the first request is its warm-up
            found.append(f"run {run_id}: {iopings} ioping artifacts, {rows[0][0]} rows")
        fios = len(list(raw.glob("*/slot-*/w*-fio-*.json")))
        slots = _query(
            root,
            "SELECT count(DISTINCT cell_id || '/' || slot_index) FROM fio_results "
            f"WHERE run_id = '{run_id}'",
        )
        if slots[0][0] != fios:
            found.append(f"run {run_id}: {fios} fio artifacts, {slots[0][0]} slots with rows")
    return found


def trial(
    root: Path,
    delay: float,
    signals: list[tuple[float, int]],
    earlier: bool,
    workloads: list[dict] = WORKLOADS,
) -> list[str]:
    """One stopped run in `root`; what went wrong (empty: nothing)."""
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    if earlier:
        _next_run(root)
    run = Run(root, _matrix(root, workloads, [1, 2]))
    sent: list[int] = []
    try:
        end = time.monotonic() + delay
        while time.monotonic() < end and run.proc.poll() is None:
            run.look()  # every process of the run, for the end
            time.sleep(0.005)
        for gap, signum in signals:
            time.sleep(gap)
            if run.proc.poll() is not None:
                break
            if signum == signal.SIGKILL:
                run.look()
                run.proc.kill()  # the runner alone: its agents must notice
            else:
                run.signal(signum)
            sent.append(signum)
        code = run.finish()
    finally:
        run.finish()
    problems = []
    if code not in {0} | {128 + s for s in sent} and not (signal.SIGKILL in sent and code == -9):
        problems.append(f"exit status {code}, signals {sent}")
    (root / "stderr").write_text(run.stderr())  # kept with the trial's folder
    if "Traceback" in run.stderr():
        problems.append("a traceback on stderr")
    killed = signal.SIGKILL in sent and code == -9
    if sent and code > 0:
        lines = [line for line in run.lines if "interrupted" in line]
        if len(lines) != 1:
            problems.append(f"{len(lines)} 'interrupted' lines")
    if not killed:
        problems.append(_problem(lambda: assert_nothing_left(root, run)))
    runs = _run_ids(root) if (root / "out" / "raw").is_dir() else []
    problems.append(_problem(lambda: _next_run(root)))
    if killed:
        problems.append(_problem(lambda: wait_for(lambda: not alive(run.seen), 60, "the run")))
        problems.append(_problem(lambda: assert_nothing_left(root, run)))
    if (root / "out" / "warehouse.duckdb").exists():
        problems.extend(_lost(root, runs))
    return [p for p in problems if p]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--work", type=Path, default=Path("/tmp/iofleet-signal-sweep"))
    parser.add_argument("--kill-share", type=float, default=0.2, help="trials with SIGKILL")
    parser.add_argument(
        "--window", type=float, nargs=2, metavar=("FROM", "TO"), help="instants (s) to draw from"
    )
    parser.add_argument("--populate", action="store_true", help="add an app with a populate step")
    args = parser.parse_args(argv)
    workloads = [POPULATE, *WORKLOADS] if args.populate else WORKLOADS
    rng = random.Random(args.seed)
    started = time.monotonic()
    clean = trial(args.work / "clean", 1e9, [], False, workloads)  # how long a whole run takes here
    whole = time.monotonic() - started
    print(f"a whole run: {whole:.1f} s{'; ' + '; '.join(clean) if clean else ''}", flush=True)
    failed = 0
    for i in range(args.trials):
        delay = rng.uniform(*(args.window or (0, whole)))
        if rng.random() < args.kill_share:
            signals = [(0.0, signal.SIGKILL)]
        else:
            signals = [(0.0, rng.choice(HANDLED))]
            if rng.random() < 0.3:
                signals.append((rng.uniform(0, 0.3), rng.choice(HANDLED)))
        earlier = rng.random() < 0.3
        root = args.work / f"t{i:03d}"
        try:
            problems = trial(root, delay, signals, earlier, workloads)
        except Exception:  # noqa: BLE001 - a search reports and goes on
            problems = ["script error: " + traceback.format_exc()[-500:]]
        names = [(round(gap, 3), signal.Signals(s).name) for gap, s in signals]
        print(
            f"{i} at {delay:.3f} s {names} earlier run: {earlier}: {'; '.join(problems) or 'ok'}",
            flush=True,
        )
        if problems:
            failed += 1
        else:
            shutil.rmtree(root, ignore_errors=True)
    print(f"{failed} of {args.trials} trials left something wrong (kept in {args.work})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
