"""`iofleet local` around its slots (the harness overhead, docs/benchmarks.md figure 2):
the finish path is not loaded before the first agent starts, the warehouse is not held
while the slots run, and the command ends without the interpreter's teardown.

Real runs (real fio, ioping, a real DuckDB file) in child interpreters; the first one's
runner is watched from inside (which modules are loaded when the first agent starts).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb
import pytest

from iofleet.results.warehouse import SCHEMA_MARK
from tests.integration.proctable import reaped, wait_for

pytestmark = pytest.mark.slow

# Runs `iofleet local MATRIX --out OUT -q` with the runner's `_start` (an agent is
# started) wrapped; at `_finish` prints what it saw, as JSON, to the pipe $SEEN_FD.
DRIVER = textwrap.dedent(
    """
    import json, os, sys
    import iofleet.local.runner as runner
    import iofleet.local.slots as slots
    from iofleet.cli import main

    seen = {}

    def watched():
        return sorted(sys.modules)

    start, finish = slots._start, runner._finish

    def _start(*args, **kwargs):
        seen.setdefault("at_first_start", watched())
        return start(*args, **kwargs)

    def _finish(*args, **kwargs):
        try:
            return finish(*args, **kwargs)
        finally:
            os.write(int(os.environ["SEEN_FD"]), json.dumps(seen).encode())

    slots._start, runner._finish = _start, _finish
    sys.exit(main(sys.argv[1:]))
    """
)


def _run(tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, object]]:
    matrix = tmp_path / "m.json"
    matrix.write_text(
        json.dumps(
            {
                "name": "startup",
                "storage": [{"label": "disk", "type": "local", "path": str(tmp_path / "t")}],
                "workloads": [
                    {"fio": "latency-4k-qd1-randread", "params": {"RUNTIME": 1, "SIZE": "4m"}}
                ],
                "parallelism": [1],
            }
        )
    )
    read_fd, write_fd = os.pipe()
    try:
        result = subprocess.run(
            [sys.executable, "-c", DRIVER, "local", str(matrix), "--out", "out", "-q"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
            pass_fds=(write_fd,),
            env={**os.environ, "SEEN_FD": str(write_fd)},
        )
    finally:
        os.close(write_fd)
    with os.fdopen(read_fd) as pipe:
        seen = json.loads(pipe.read() or "{}")
    return result, seen


def _open_writer(fifo: Path) -> int | None:
    try:
        return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:  # ENXIO: no reader yet
        return None


@pytest.fixture(scope="module")
def first_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, subprocess.CompletedProcess[str], dict[str, object]]:
    """One watched one-slot run (its directory, result, what it saw); the warehouse test
    starts from a copy of its --out."""
    tmp = tmp_path_factory.mktemp("startup")
    return (tmp, *_run(tmp))


def test_the_first_agent_starts_before_the_finish_path_is_loaded(first_run) -> None:
    # when a one-slot run goes from start to report
    tmp_path, result, seen = first_run
    # then it succeeded and gave the user the warehouse and the report
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out" / "report.html").is_file()
    with duckdb.connect(str(tmp_path / "out" / "warehouse.duckdb"), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM fio_results").fetchall() == [(1,)]
    # and the first agent was started before any of the ingest and report code was loaded
    # (what is imported while the slots start: tests/unit/test_local_prepare.py)
    finish_path = ("iofleet.results.warehouse", "iofleet.report.", "iofleet.results.parsers")
    assert [m for m in seen["at_first_start"] if m.startswith(finish_path)] == []


def test_the_warehouse_is_not_held_while_the_slots_run(first_run, tmp_path: Path) -> None:
    # given a warehouse from an earlier run in --out (a copy of the first run's)
    first_dir, first, _ = first_run
    assert first.returncode == 0, first.stderr
    out = tmp_path / "out"
    shutil.copytree(first_dir / "out", out, symlinks=True)
    # when a second run is started and, while its slot runs, another process writes
    # to the warehouse (as `iofleet import` or a user's DuckDB session could)
    matrix = tmp_path / "slow.json"
    gate = tmp_path / "gate"
    matrix.write_text(
        json.dumps(
            {
                "name": "startup",
                "storage": [{"label": "disk", "type": "local", "path": str(tmp_path / "t")}],
                "workloads": [{"app": {"name": "wait", "run": f"read line < {gate}"}}],
                "parallelism": [1],
            }
        )
    )
    os.mkfifo(gate)
    with reaped(
        subprocess.Popen(
            [sys.executable, "-m", "iofleet.cli", "local", str(matrix), "--out", "out", "-q"],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    ) as run:
        # the fifo opens for writing once the slot's app has opened it to read
        release = wait_for(lambda: _open_writer(gate), 120, "the slot's app to start")
        try:
            with duckdb.connect(str(out / "warehouse.duckdb")) as con:
                con.execute(f"SELECT count(*) FROM {SCHEMA_MARK}").fetchall()
                con.execute("CREATE TABLE held_by_someone_else (x INTEGER)")
            os.write(release, b"go\n")
        finally:
            os.close(release)
        _, stderr = run.communicate(timeout=300)
    # then both could write, and the run ended as usual with both runs in the warehouse
    assert run.returncode == 0, stderr
    with duckdb.connect(str(out / "warehouse.duckdb"), read_only=True) as con:
        assert con.execute("SELECT count(DISTINCT run_id) FROM runs").fetchall() == [(2,)]
        assert con.execute("SELECT count(*) FROM held_by_someone_else").fetchall() == [(0,)]


# `iofleet local` as the program (main() with no argv), in an interpreter that can tell
# whether it was torn down: a module global whose finaliser writes a file (run only by
# the interpreter's teardown) and an atexit handler that writes another.
EXIT_DRIVER = textwrap.dedent(
    """
    import atexit, os, sys

    MARK = os.path.join(os.environ["PROBE_DIR"], "torn-down")

    class Probe:  # what it calls is bound now: late in a teardown, builtins are gone
        def __del__(self, mark=MARK, create=os.open, close=os.close, how=os.O_CREAT | os.O_WRONLY):
            close(create(mark, how))

    probe = Probe()
    atexit.register(lambda: open(os.path.join(os.environ["PROBE_DIR"], "atexit"), "w").close())
    from iofleet.cli import main
    sys.argv = ["iofleet", *sys.argv[1:]]
    sys.exit(main())
    """
)


def test_iofleet_local_leaves_at_once_with_everything_written(tmp_path: Path) -> None:
    # given a one-slot matrix
    matrix = tmp_path / "m.json"
    matrix.write_text(
        json.dumps(
            {
                "name": "exit",
                "storage": [{"label": "disk", "type": "local", "path": str(tmp_path / "t")}],
                "workloads": [{"ioping": {"count": 3, "interval_ms": 0, "write": False}}],
                "parallelism": [1],
            }
        )
    )
    probes = tmp_path / "probes"
    probes.mkdir()
    # when the command runs as the program, its report printed as JSON to a pipe
    result = subprocess.run(
        [sys.executable, "-c", EXIT_DRIVER, "local", str(matrix), "--out", "out", "-q"]
        + ["--format", "json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PROBE_DIR": str(probes)},
    )
    # then it exited with the run's status, its whole report on stdout, its atexit
    # handlers run, the interpreter not torn down
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["run_id"].startswith("exit-")
    assert sorted(p.name for p in probes.iterdir()) == ["atexit"]
    # and what it wrote is all there: the warehouse (closed: no WAL left) and the report
    out = tmp_path / "out"
    assert not (out / "warehouse.duckdb.wal").exists()
    with duckdb.connect(str(out / "warehouse.duckdb"), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM slots WHERE status = 'SUCCEEDED'").fetchall() == [
            (1,)
        ]
    assert (out / "report.html").read_text().rstrip().endswith("</html>")


def _reaped(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # waited for already: neither running nor a zombie
        return True
    return False


def _fio_matrix(tmp_path: Path, **extra: object) -> Path:
    matrix = tmp_path / "m.json"
    doc = {
        "name": "ahead",
        "storage": [{"label": "disk", "type": "local", "path": str(tmp_path / "t")}],
        "workloads": [{"fio": "latency-4k-qd1-randread", "params": {"RUNTIME": 1, "SIZE": "4m"}}],
        "parallelism": [1],
        **extra,
    }
    matrix.write_text(json.dumps(doc))
    return matrix


def _started_pids() -> list[int]:
    from iofleet.plan import fiojobs, fioopts

    return [p.pid for p in (*fiojobs._started.values(), *fioopts._ahead.values())]


def test_fio_checks_started_ahead_are_the_ones_the_plan_takes(tmp_path: Path) -> None:
    import shutil

    from iofleet.plan import fiojobs, fioopts
    from iofleet.plan.matrix import plan_matrix_file

    # given the fio checks of a matrix started ahead, as `iofleet local` does first
    matrix = _fio_matrix(tmp_path)
    fiojobs.start_parse_only_checks(str(matrix), shutil.which("fio"))
    pids = _started_pids()
    assert len(pids) == 2  # fio --version and one --parse-only
    try:
        # when the matrix is planned for a local run
        plan = plan_matrix_file(matrix, target="local")
        # then its validation took both runs (waited for them) instead of starting others
        assert plan.cells and not fiojobs._started and not fioopts._ahead
        assert all(_reaped(pid) for pid in pids)
    finally:
        fiojobs.stop_parse_only_checks()


def test_fio_checks_started_ahead_of_a_refused_matrix_leave_no_process(tmp_path: Path) -> None:
    import shutil

    from iofleet.errors import ValidationFailed
    from iofleet.local.runner import run_local
    from iofleet.plan import fiojobs

    # given a matrix refused before its fio jobs are checked (a key it does not know),
    # its fio checks started ahead
    matrix = _fio_matrix(tmp_path, colour="blue")
    fiojobs.start_parse_only_checks(str(matrix), shutil.which("fio"))
    pids = _started_pids()
    assert pids
    # when `iofleet local` plans it
    with pytest.raises(ValidationFailed):
        run_local(matrix, tmp_path / "out", quiet=True, cwd=tmp_path)
    # then every check started ahead was stopped and waited for, and nothing was created
    assert all(_reaped(pid) for pid in pids)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json"]


def test_fio_checks_started_ahead_are_bounded_and_the_rest_still_run(tmp_path: Path) -> None:
    import shutil

    from iofleet.plan import fiojobs
    from iofleet.plan.matrix import plan_matrix_file

    # given a matrix of six fio workloads (six different checks)
    workloads = [
        {"fio": "latency-4k-qd1-randread", "params": {"RUNTIME": 1 + i, "SIZE": "4m"}}
        for i in range(6)
    ]
    matrix = _fio_matrix(tmp_path, workloads=workloads)
    # when their checks are started ahead
    fiojobs.start_parse_only_checks(str(matrix), shutil.which("fio"))
    pids = _started_pids()
    try:
        # then only PARSE_ONLY_AHEAD of them start (and fio --version), and the plan,
        # which runs the others itself, passes and takes those started
        assert len(fiojobs._started) == fiojobs.PARSE_ONLY_AHEAD
        assert len(plan_matrix_file(matrix, target="local").matrix.workloads) == 6
        assert not fiojobs._started and all(_reaped(pid) for pid in pids)
    finally:
        fiojobs.stop_parse_only_checks()


# A library of two jobs: `good`, and `bad`, whose option fio's option table does not know
# (nor does the installed fio: its `--parse-only` would refuse it too).
JOB_HEAD = "; probe job\n; @param TARGET=.  where\n[a]\ndirectory=${TARGET}\nsize=1m\n"
LIBRARY = {"good.fio": JOB_HEAD + "iodepth=1\n", "bad.fio": JOB_HEAD + "iodepht=1\n"}


def _library(tmp_path: Path) -> Path:
    lib = tmp_path / "lib"
    lib.mkdir()
    for name, text in LIBRARY.items():
        (lib / name).write_text(text)
    return lib


def test_a_job_the_option_table_refuses_gets_no_parse_only_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from iofleet.errors import ValidationFailed
    from iofleet.plan import fiojobs
    from iofleet.plan.matrix import plan_matrix_file

    # given a matrix of a job the option table refuses and one it accepts, and every
    # fio run the plan starts seen (a wrapper of the one place it starts them)
    monkeypatch.setenv("IOFLEET_FIO_JOBS", str(_library(tmp_path)))
    matrix = _fio_matrix(tmp_path, workloads=[{"fio": "bad"}, {"fio": "good"}])
    started: list[str] = []
    popen = fiojobs._popen

    def seen(argv: list[str], text: str):  # type: ignore[no-untyped-def]
        started.append(text)
        return popen(argv, text)

    monkeypatch.setattr(fiojobs, "_popen", seen)
    # when it is planned for a local run
    with pytest.raises(ValidationFailed) as info:
        plan_matrix_file(matrix, target="local")
    # then it is refused for the bad job's option, and fio parsed only the good job
    assert [line.split(": ", 1)[1] for line in info.value.lines()] == [
        f"workloads[0].fio: job 'bad' for fio {_release()}: bad.fio:6: [a] unknown fio option "
        "'iodepht' (did you mean 'iodepth'?)"
    ]
    assert [t.endswith("\niodepth=1\n") for t in started] == ([True] if shutil.which("fio") else [])


def _release() -> str:
    from iofleet.plan import fioopts

    return fioopts.release_for_version(fioopts.installed_version(shutil.which("fio")))


# Runs `iofleet local ARGS` as a subreaper: a process the command leaves behind (running,
# or exited and never waited for) becomes this one's child. Prints, as JSON, the
# command's exit status and stderr, and its leftovers (then kills and reaps them).
LEFT_DRIVER = textwrap.dedent(
    """
    import json, os, signal, subprocess, sys
    from iofleet.agent.reaper import set_subreaper

    set_subreaper(True)
    cli = subprocess.Popen(
        [sys.executable, "-m", "iofleet.cli", "local", *sys.argv[1:]],
        stderr=subprocess.PIPE,
        text=True,
    )
    _, err = cli.communicate()
    left = []
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                data = f.read()
        except (OSError, ValueError):
            continue
        rest = data[data.rindex(b")") + 2 :].split()
        if int(rest[1]) == os.getpid():
            left.append([int(name), data[data.index(b"(") + 1 : data.rindex(b")")].decode()])
    for pid, _ in left:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    print(json.dumps({"rc": cli.returncode, "stderr": err, "left": left}))
    """
)


def _children(parent: int) -> dict[int, str]:
    """{pid: state} of the processes whose parent is `parent`, zombies included."""
    from tests.integration.proctable import stat_fields

    found = {}
    for name in os.listdir("/proc"):
        info = stat_fields(int(name)) if name.isdigit() else None
        if info is not None and info[0] == parent:
            found[int(name)] = info[1]
    return found


def _stopped_child(parent: int) -> int | None:
    return next((pid for pid, state in _children(parent).items() if state == "T"), None)


def _env(tmp_path: Path, pause_at: str | None = None) -> dict[str, str]:
    """The test library of fio jobs; `pause_at`: where the command stops itself."""
    env = dict(os.environ, IOFLEET_FIO_JOBS=str(_library(tmp_path)))
    if pause_at:
        env["IOFLEET_TEST_PAUSE_AT"] = pause_at
    return env


def _left_driver(tmp_path: Path, matrix: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", LEFT_DRIVER, str(matrix), "--out", "out", "-q"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )


def _signal_at_pause(driver: subprocess.Popen[str], signum: int) -> int:
    """Once the command under the driver has stopped itself (iofleet.testhook), send it
    `signum` and let it go on; returns its pid."""
    cli = wait_for(lambda: _stopped_child(driver.pid), 120, "iofleet local to stop")
    assert isinstance(cli, int)
    os.kill(cli, signum)
    os.kill(cli, signal.SIGCONT)
    return cli


STOPS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]


@pytest.mark.parametrize(
    "when", ["refused", *(f"interrupted-{signal.Signals(s).name}" for s in STOPS)]
)
def test_iofleet_local_leaves_no_fio_check_of_a_matrix_it_does_not_run(
    tmp_path: Path, when: str
) -> None:
    if shutil.which("fio") is None:
        pytest.skip("no fio here")
    # given a matrix the option table refuses (its fio checks start before it is read
    # through), or a good one with `iofleet local` stopped by SIGINT, SIGTERM or SIGHUP
    # once its checks have started and before its runner is imported
    job = "bad" if when == "refused" else "good"
    matrix = _fio_matrix(tmp_path, workloads=[{"fio": job}])
    signum = 0 if when == "refused" else signal.Signals[when.split("-")[1]]
    env = _env(tmp_path, "checks-started" if signum else None)
    with reaped(_left_driver(tmp_path, matrix, env)) as driver:
        if signum:
            cli = wait_for(lambda: _stopped_child(driver.pid), 120, "iofleet local to stop")
            assert isinstance(cli, int)
            # (its fio checks running, or exited and not yet waited for)
            assert len(_children(cli)) == 2, "fio --version and one --parse-only"
            os.kill(cli, signum)
            os.kill(cli, signal.SIGCONT)
        out, _ = driver.communicate(timeout=300)
    seen = json.loads(out)
    # then the command refused it (exit 2) or stopped (128 + the signal, naming it: not
    # killed by it), and it left no process: none running, none exited and not waited for
    if signum:
        assert seen["rc"] == 128 + signum, seen["stderr"]
        assert seen["stderr"] == f"iofleet: interrupted by {signal.Signals(signum).name}\n"
    else:
        assert seen["rc"] == 2, seen["stderr"]
    assert seen["left"] == []
    # and created nothing
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lib", "m.json"]


@pytest.mark.parametrize("signum", STOPS, ids=lambda s: signal.Signals(s).name)
def test_a_stop_signal_before_the_run_removes_the_targets_it_made(
    tmp_path: Path, signum: int
) -> None:
    if shutil.which("fio") is None:
        pytest.skip("no fio here")
    # given `iofleet local` stopped once it has made its target's missing directories
    # (three levels) and before it takes the --out lock
    env = _env(tmp_path, "targets-made")
    matrix = _fio_matrix(tmp_path, workloads=[{"fio": "good"}])
    doc = json.loads(matrix.read_text())
    doc["storage"][0]["path"] = str(tmp_path / "a" / "b" / "t")
    matrix.write_text(json.dumps(doc))
    with reaped(_left_driver(tmp_path, matrix, env)) as driver:
        cli = _signal_at_pause(driver, signum)
        out, _ = driver.communicate(timeout=300)
    seen = json.loads(out)
    # when it gets SIGINT, SIGTERM or SIGHUP there, then it stops with 128 + the signal
    # and one line naming it
    assert seen["rc"] == 128 + signum, seen["stderr"]
    assert seen["stderr"] == f"iofleet: interrupted by {signal.Signals(signum).name}\n"
    # the directories it made are gone, no --out was made, and no process is left
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lib", "m.json"]
    assert seen["left"] == []
    assert not os.path.exists(f"/proc/{cli}")


def test_iofleet_local_reads_the_matrix_file_once(tmp_path: Path) -> None:
    if shutil.which("fio") is None:
        pytest.skip("no fio here")
    # given `iofleet local` stopped once it has read the matrix (a bad job in it) and
    # started its checks
    env = _env(tmp_path, "checks-started")
    matrix = _fio_matrix(tmp_path, workloads=[{"fio": "bad"}])
    with reaped(
        subprocess.Popen(
            [sys.executable, "-m", "iofleet.cli", "local", "m.json", "--out", "out", "-q"],
            cwd=tmp_path,
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
    ) as cli:
        wait_for(lambda: _children(os.getpid()).get(cli.pid) == "T", 120, "it to stop")
        # when the file is replaced meanwhile, and the command goes on
        matrix.write_text("not a matrix\n")
        os.kill(cli.pid, signal.SIGCONT)
        _, err = cli.communicate(timeout=300)
    # then what it validated is the text it read first: the bad job's line, not the
    # new text's JSON error
    assert cli.returncode == 2, err
    assert err.splitlines() == [
        f"m.json: workloads[0].fio: job 'bad' for fio {_release()}: bad.fio:6: [a] "
        "unknown fio option 'iodepht' (did you mean 'iodepth'?)"
    ]


def test_a_fio_check_killed_from_outside_is_not_the_matrix_at_fault(tmp_path: Path) -> None:
    real = shutil.which("fio")
    if real is None:
        pytest.skip("no fio here")
    # given a good matrix, and a `fio` first on PATH whose `--parse-only` runs until it
    # is killed (a stand-in: the real one answers within 0.1 s, too soon to be killed
    # at a known moment; `--version` is the real fio's)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "fio").write_text(
        f'#!/bin/sh\n[ "$1" = --parse-only ] && exec sleep 600\nexec {real} "$@"\n'
    )
    (bin_dir / "fio").chmod(0o755)
    env = dict(
        os.environ,
        IOFLEET_FIO_JOBS=str(_library(tmp_path)),
        PATH=f"{bin_dir}:{os.environ['PATH']}",
    )
    matrix = _fio_matrix(tmp_path, workloads=[{"fio": "good"}])
    with reaped(_left_driver(tmp_path, matrix, env)) as driver:
        # when the check is killed by someone else (`pkill fio`, the OOM killer)
        def check() -> int | None:
            for cli in _children(driver.pid):
                for pid in _children(cli):
                    with contextlib.suppress(OSError):  # one that is gone meanwhile
                        if b"sleep" in Path(f"/proc/{pid}/cmdline").read_bytes():
                            return pid
            return None

        pid = wait_for(check, 120, "fio --parse-only to run")
        assert isinstance(pid, int)
        os.kill(pid, signal.SIGTERM)
        out, _ = driver.communicate(timeout=300)
    seen = json.loads(out)
    # then the command says so and exits 3 (the machine, not the input: not 2, "the
    # matrix is bad"), leaves no process and creates nothing
    assert seen["rc"] == 3, seen["stderr"]
    assert seen["stderr"] == (
        "iofleet: fio --parse-only, checking job 'good', was killed by SIGTERM "
        "(not by iofleet): nothing was run\n"
    )
    assert seen["left"] == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin", "lib", "m.json"]
