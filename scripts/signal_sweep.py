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

With --device, each trial stops `iofleet agent` instead (a local run takes only a
directory; a raw device is measured by the agent of an AWS slot, so that is the code
that runs on one): a one-slot payload on a fresh 128 MiB loop device (512-byte or
4096-byte sectors; blank, or filled with a known pattern and marked created_by_run),
running ioping (reads) and two short fio write jobs. After the stop it checks the exit
status (130 for SIGINT, SIGTERM and SIGHUP, which the agent handles; SIGKILL ends it
outright) and one "interrupted" line, that no process of the slot is left, that the
device can be opened O_EXCL and is neither mounted nor a swap area, that no loop device
appeared, that the bytes after the regions fio may use are as they were, and that a
next slot on the device exits 0 with its rows in a warehouse. The loop device is
detached and its backing file removed at the end of each trial, whatever happened.

A trial whose checks fail keeps its folder under --work and prints what failed; the
script exits 1 if any did. The instants are drawn from a seeded generator, but what
the run is doing at an instant depends on the machine's load: this is a search for
problems, not a test (the tests of each awkward moment are in
tests/integration/test_local_signals.py). Runs only where fio and ioping are
installed, as root for nothing in particular.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.integration.proctable import alive, tree, wait_for  # noqa: E402
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


def draw_stop(
    rng: random.Random,
    window: tuple[float, float],
    kill_share: float,
    second_gap: float = 0.3,
    second: tuple[int, ...] = HANDLED,
) -> tuple[float, list[tuple[float, int]]]:
    """A random instant in `window` and the signals sent there, as (gap, signal): SIGKILL
    (`kill_share` of trials), else a handled one, in 3 of 10 followed within
    `second_gap` s by one of `second`."""
    delay = rng.uniform(*window)
    if rng.random() < kill_share:
        return delay, [(0.0, signal.SIGKILL)]
    signals = [(0.0, rng.choice(HANDLED))]
    if rng.random() < 0.3:
        signals.append((rng.uniform(0, second_gap), rng.choice(second)))
    return delay, signals


def say_trial(
    head: str, delay: float, signals: list[tuple[float, int]], tail: str, wrong: bool, root: Path
) -> bool:
    """Print one trial's line (`HEAD at DELAY s [signals]TAIL`) and remove its folder
    unless it went `wrong`, which is returned."""
    names = [(round(gap, 3), signal.Signals(s).name) for gap, s in signals]
    print(f"{head} at {delay:.3f} s {names}{tail}", flush=True)
    if not wrong:
        shutil.rmtree(root, ignore_errors=True)
    return wrong


def stop_at(
    proc: subprocess.Popen,
    delay: float,
    signals: list[tuple[float, int]],
    look: Callable[[], object],
    send: Callable[[int], None],
    poll_s: float = 0.005,
) -> list[int]:
    """Wait `delay` s, calling `look` (the processes to find at the end), then `send`
    each of `signals` after its gap while `proc` lives; the signals sent."""
    sent: list[int] = []
    end = time.monotonic() + delay
    while time.monotonic() < end and proc.poll() is None:
        look()
        time.sleep(poll_s)
    for gap, signum in signals:
        time.sleep(gap)
        if proc.poll() is not None:
            break
        look()
        send(signum)
        sent.append(signum)
    return sent


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
    """One stopped run in `root`; what went wrong (empty: nothing). A run ended by the
    signal itself before it made its run folder (a stop in its first tenth of a second,
    before its handlers are set) is noted, not counted, when it left nothing."""
    notes.clear()
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    if earlier:
        _next_run(root)
    before = set(_run_ids(root)) if earlier else set()
    run = Run(root, _matrix(root, workloads, [1, 2]))
    sent: list[int] = []

    def send(signum: int) -> None:
        if signum == signal.SIGKILL:
            run.proc.kill()  # the runner alone: its agents must notice
        else:
            run.signal(signum)

    try:  # run.look: every process of the run, for the end
        sent = stop_at(run.proc, delay, signals, run.look, send)
        code = run.finish()
    finally:
        run.finish()
    problems = []
    made = (root / "out" / "raw").is_dir() and set(_run_ids(root)) - before
    early = code < 0 and -code in sent and -code != signal.SIGKILL and not made
    if early:
        notes.append(f"ended by {signal.Signals(-code).name} before its run folder existed")
    elif code not in {0} | {128 + s for s in sent} and not (signal.SIGKILL in sent and code == -9):
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
    parser.add_argument("--device", action="store_true", help="stop an agent on a raw loop device")
    args = parser.parse_args(argv)
    if args.device:
        return device_main(args)
    workloads = [POPULATE, *WORKLOADS] if args.populate else WORKLOADS
    rng = random.Random(args.seed)
    started = time.monotonic()
    clean = trial(args.work / "clean", 1e9, [], False, workloads)  # how long a whole run takes here
    whole = time.monotonic() - started
    print(f"a whole run: {whole:.1f} s{'; ' + '; '.join(clean) if clean else ''}", flush=True)
    failed = 0
    for i in range(args.trials):
        delay, signals = draw_stop(rng, args.window or (0, whole), args.kill_share)
        earlier = rng.random() < 0.3
        root = args.work / f"t{i:03d}"
        try:
            problems = trial(root, delay, signals, earlier, workloads)
        except Exception:  # noqa: BLE001 - a search reports and goes on
            problems = ["script error: " + traceback.format_exc()[-500:]]
        tail = (
            f" earlier run: {earlier}: {'; '.join(problems) or 'ok'}"
            f"{' (' + '; '.join(notes) + ')' if notes else ''}"
        )
        failed += say_trial(str(i), delay, signals, tail, bool(problems), root)
    print(f"{failed} of {args.trials} trials left something wrong (kept in {args.work})")
    return 1 if failed else 0


# --- --device: an agent stopped while fio or ioping runs on a raw loop device ----------

DEV_RUN, DEV_NEXT = "raw-20261127t000000z", "raw-20261127t000001z"
DEV_CELL = "c000-loop-x1-r1"
DEV_FIO = [
    ("randwrite-16k-psync-16jobs", {"RUNTIME": "1", "SIZE": "4m", "NUM_JOBS": "2"}),
    ("seq-write-1m-qd32", {"RUNTIME": "1", "SIZE": "8m", "IO_DEPTH": "4"}),
]
DEV_IOPING = {"kind": "ioping", "count": 20, "interval_ms": 20, "write": False, "direct": True}
DEV_WORKLOADS = [DEV_IOPING] + [{"kind": "fio", "name": n, "params": p} for n, p in DEV_FIO]
UNCAUGHT = (signal.SIGKILL,)  # by the agent (SIGHUP too, before decision 70)
notes: list[str] = []  # what a trial did that is expected (an agent killed outright; a stop
# before the handlers were set, which left nothing)
PATTERN = bytes(range(256)) * 4096  # 1 MiB of a known pattern (not blank)


def _loops() -> dict[str, str]:
    """{loop device: its backing file} of every bound loop device."""
    found = {}
    for entry in Path("/sys/block").glob("loop*/loop/backing_file"):
        found[f"/dev/{entry.parent.parent.name}"] = entry.read_text().strip()
    return found


def _allowed_end(device_bytes: int, block: int) -> int:
    """Where the region fio may use ends: every job's regions start at the device's start."""
    from iofleet.plan.fiojobs import get_job, plan_env, raw_layout

    ends = []
    for name, params in DEV_FIO:
        job = get_job(name)
        ends.append(raw_layout(job, plan_env(job, params), device_bytes, block).needed_bytes)
    return max(ends)


def _changed_beyond(backing: Path, start: int, blank: bool) -> list[int]:
    """Offsets (MiB chunks) at or after `start` that no longer hold what was put there."""
    changed = []
    with backing.open("rb") as handle:
        handle.seek(start)
        at = start
        while block := handle.read(len(PATTERN) - at % len(PATTERN)):
            want = bytes(len(block)) if blank else PATTERN[at % len(PATTERN) :][: len(block)]
            if block != want:
                changed.append(at)
            at += len(block)
    return changed


def _slot_payload(root: Path, run_id: str, created_by_run: bool) -> Path:
    from tests.integration.test_device_guard import block_payload

    doc = block_payload(
        root,
        root / "by-id",
        DEV_WORKLOADS,
        run_id=run_id,
        cell_id=DEV_CELL,
        created_by_run=created_by_run,
    )
    path = root / f"{run_id}.json"
    path.write_text(json.dumps(doc))
    return path


def _agent(root: Path, payload: Path, name: str) -> subprocess.Popen:
    env = dict(os.environ, TMPDIR=str(root / "tmp"))
    with (root / f"{name}.stderr").open("wb") as stderr:
        return subprocess.Popen(
            [sys.executable, "-m", "iofleet.cli", "agent", "--slot", str(payload)],
            cwd=root / "cwd",
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
        )


def _device_problems(device: Path) -> list[str]:
    """Whoever still holds `device`: an exclusive open, a mount or a swap area."""
    found = []
    try:
        os.close(os.open(device, os.O_RDONLY | os.O_EXCL))
    except OSError as exc:
        found.append(f"{device} is held: {exc.strerror}")
    rdev = os.stat(device).st_rdev
    number = f"{os.major(rdev)}:{os.minor(rdev)}"
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        if line.split()[2] == number:
            found.append(f"{device} is mounted: {line}")
    if device.name in Path("/proc/swaps").read_text():
        found.append(f"{device} is a swap area")
    return found


def _loaded(root: Path) -> tuple[list[str], int, int]:
    """Ingest the trial's raw/ into a fresh warehouse: (fio artifacts of the stopped run with
    no rows, the next run's fio workloads with rows, its ioping rows)."""
    from iofleet.results.warehouse import Warehouse

    with Warehouse(root / "warehouse.duckdb") as wh:
        wh.ingest_dir(root / "raw")
        q = wh.con.execute
        lost = []
        for art in (root / "raw" / DEV_RUN).glob("*/slot-*/w*-fio-*.json"):
            index = int(art.name[1:3])
            rows = q(
                "SELECT count(*) FROM fio_results WHERE run_id = ? AND workload_index = ?",
                [DEV_RUN, index],
            ).fetchone()
            if not rows or rows[0] == 0:
                lost.append(art.name)
        fio = q(
            "SELECT count(DISTINCT workload_index) FROM fio_results WHERE run_id = ?", [DEV_NEXT]
        ).fetchone()
        ioping = q("SELECT count(*) FROM ioping_requests WHERE run_id = ?", [DEV_NEXT]).fetchone()
    return lost, fio[0] if fio else 0, ioping[0] if ioping else 0


def device_trial(
    root: Path, delay: float, signals: list[tuple[float, int]], blank: bool, sector: int
) -> tuple[list[str], int | None, float]:
    """One agent stopped on a fresh loop device in `root`; (what went wrong, exit status,
    how long the stopped agent ran)."""
    shutil.rmtree(root, ignore_errors=True)
    for sub in ("tmp", "cwd", "by-id"):
        (root / sub).mkdir(parents=True)
    backing = root / "disk.img"
    size = 128 << 20
    with backing.open("wb") as handle:
        if blank:
            handle.truncate(size)
        else:
            for _ in range(size // len(PATTERN)):
                handle.write(PATTERN)
    loops_before = _loops()
    device: Path | None = None
    problems: list[str] = []
    code: int | None = None
    ran = 0.0
    notes.clear()
    try:
        made = subprocess.run(
            ["losetup", "--show", "--find", "--sector-size", str(sector), str(backing)],
            capture_output=True,
            text=True,
            check=True,
        )
        device = Path(made.stdout.strip())
        from tests.integration.test_device_guard import EBS_LINK

        (root / "by-id" / EBS_LINK).symlink_to(device)
        allowed = _allowed_end(size, sector)
        agent = _agent(root, _slot_payload(root, DEV_RUN, not blank), "stopped")
        seen: dict[int, int] = {}
        sent: list[int] = []

        def send(signum: int) -> None:
            if signum == signal.SIGKILL:
                agent.kill()  # the agent alone: its workload must not outlive it
            else:
                os.killpg(agent.pid, signum)  # the group, as a terminal sends Ctrl-C

        started = time.monotonic()
        try:
            sent = stop_at(agent, delay, signals, lambda: seen.update(tree(agent.pid)), send)
            code = agent.wait(timeout=180)
            ran = time.monotonic() - started
        finally:
            if agent.poll() is None:
                os.killpg(agent.pid, signal.SIGKILL)
                agent.wait()
                problems.append("the agent did not end in 180 s")
        # the agent exits 130 for a stop it handles (SIGINT, SIGTERM, SIGHUP); SIGKILL ends
        # it outright (decision 55): its children must still go
        killed = code is not None and code < 0 and -code in sent and -code in UNCAUGHT
        stderr = (root / "stopped.stderr").read_text()
        if code not in ({0, 130} if sent else {0}) and not killed:
            problems.append(f"exit status {code}, signals {sent}")
        if "Traceback" in stderr:
            problems.append("a traceback on stderr")
        if code == 130:
            lines = [line for line in stderr.splitlines() if "interrupted" in line]
            if len(lines) != 1:
                problems.append(f"{len(lines)} 'interrupted' lines")
        if killed:
            problems.append(_problem(lambda: wait_for(lambda: not alive(seen), 60, "the slot")))
        elif alive(seen):
            problems.append(f"processes of the run left: {alive(seen)}")
        problems.extend(_device_problems(device))
        # (over a file of the trial's: its TMPDIR, cwd and results; other sessions' are theirs)
        left = {
            d: b
            for d, b in _loops().items()
            if d not in loops_before and d != str(device) and b.startswith(f"{root}/")
        }
        if left:
            problems.append(f"loop devices appeared: {left}")
        if os.listdir(root / "tmp"):  # the scratch dir of an agent that died: noted only
            (problems if not killed else notes).append(
                f"left in TMPDIR: {os.listdir(root / 'tmp')}"
            )
        if os.listdir(root / "cwd"):
            problems.append(f"left in the cwd: {os.listdir(root / 'cwd')}")
        changed = _changed_beyond(backing, allowed, blank)
        if changed:
            problems.append(f"written beyond fio's regions (from {allowed}): at {changed[:4]}")
        nxt = _agent(root, _slot_payload(root, DEV_NEXT, True), "next")
        if nxt.wait(timeout=300) != 0:
            problems.append(
                f"next run: exit {nxt.returncode}: {(root / 'next.stderr').read_text()}"
            )
        changed = _changed_beyond(backing, allowed, blank)
        if changed:
            problems.append(f"next run wrote beyond fio's regions: at {changed[:4]}")
        problems.extend(_device_problems(device))
        lost, fio, ioping = _loaded(root)
        if lost:
            problems.append(f"fio artifacts of the stopped run with no rows: {lost}")
        if (fio, ioping) != (len(DEV_FIO), DEV_IOPING["count"] - 1):
            problems.append(f"next run: {fio} fio workloads and {ioping} ioping rows loaded")
    finally:
        if device is not None and _loops().get(str(device)) == str(backing):
            subprocess.run(["losetup", "--detach", str(device)], check=False)
        backing.unlink(missing_ok=True)
    return [p for p in problems if p], code, ran


def device_main(args: argparse.Namespace) -> int:
    """--device: as main(), on a fresh loop device per trial (see device_trial)."""
    # agents start with the default dispositions even when this script runs in the
    # background (`&` and nohup ignore SIGINT and SIGHUP, and a child keeps an ignore)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    rng = random.Random(args.seed)
    clean, _, whole = device_trial(args.work / "clean", 1e9, [], True, 512)
    print(f"a whole run: {whole:.1f} s{'; ' + '; '.join(clean) if clean else ''}", flush=True)
    failed = 0
    codes: dict[str, int] = {}
    for i in range(args.trials):
        delay, signals = draw_stop(rng, args.window or (0, whole), args.kill_share)
        blank = rng.random() < 0.5
        sector = 4096 if rng.random() < 0.3 else 512
        root = args.work / f"d{i:03d}"
        code = None
        try:
            problems, code, _ = device_trial(root, delay, signals, blank, sector)
        except Exception:  # noqa: BLE001 - a search reports and goes on
            problems = ["script error: " + traceback.format_exc()[-500:]]
        codes[str(code)] = codes.get(str(code), 0) + 1
        tail = (
            f" blank: {blank} sector {sector}: exit {code}: "
            f"{'; '.join(problems) or 'ok'}{' (' + '; '.join(notes) + ')' if notes else ''}"
        )
        failed += say_trial(str(i), delay, signals, tail, bool(problems), root)
    print(f"exit statuses: {codes}")
    print(f"{failed} of {args.trials} trials left something wrong (kept in {args.work})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
