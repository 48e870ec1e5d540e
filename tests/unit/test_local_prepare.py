"""iofleet/local/finish.py prepare_finish: while the slots start, the runner imports what
the end of the run needs (DuckDB, ingest, report), one module at a time, and stops as
soon as a slot has reached its start barrier. Each case runs in a fresh interpreter, so
`sys.modules` says what was imported; the finish is the runner's own `_finish` on a
real raw tree and a real DuckDB file."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from iofleet.local.runner import FINISH_MODULES
from tests.unit import rawtree

RUN = "demo-20261121t051200z"

CASE = textwrap.dedent(
    """
    import io, json, sys
    from pathlib import Path
    from iofleet.local import runner

    calls = []
    def started():
        calls.append(1)
        return len(calls) > int(sys.argv[2])  # a slot at its barrier after N checks

    done = runner.prepare_finish(started)
    before = set(sys.modules)
    out = Path(sys.argv[1])
    if len(sys.argv) > 3:  # then the run's end, as `iofleet local` does it
        progress = runner.Progress(io.StringIO(), quiet=True)
        summary = runner.RunSummary(run_id=sys.argv[3], slots=1)
        stdout, sys.stdout = sys.stdout, io.StringIO()
        try:
            runner._finish(out, out / "raw", sys.argv[3], summary, "json", progress)
        finally:
            sys.stdout = stdout
    print(json.dumps({
        "done": done,
        "loaded": sorted(m for m in runner.FINISH_MODULES if m in before),
        "finish_imported": sorted(set(sys.modules) - before),
        "files": sorted(p.name for p in out.iterdir()),
    }))
    """
)


def _case(out: Path, barrier_after: int, finish: bool = False) -> dict:
    argv = [sys.executable, "-c", CASE, str(out), str(barrier_after)] + ([RUN] if finish else [])
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=True)
    return json.loads(done.stdout)


def test_with_time_to_spare_the_finish_imports_nothing_more(tmp_path: Path) -> None:
    # given a run's raw results, and slots that take long to reach their barrier
    rawtree.write_run(tmp_path / "raw", RUN, slots=1)
    # when the runner prepares, then finishes the run
    got = _case(tmp_path, barrier_after=len(FINISH_MODULES) + 1, finish=True)
    # then every module was imported while the slots started, and touched no file
    assert got["done"] == len(FINISH_MODULES)
    assert got["loaded"] == sorted(FINISH_MODULES)
    # and the finish (ingest, report: it wrote the warehouse and report.html) imported nothing
    assert {"warehouse.duckdb", "report.html"} <= set(got["files"])
    assert got["finish_imported"] == []


def test_nothing_is_imported_once_a_slot_is_at_its_barrier(tmp_path: Path) -> None:
    got = _case(tmp_path, barrier_after=0)
    assert got == {"done": 0, "loaded": [], "finish_imported": [], "files": []}


def test_it_stops_at_the_module_during_which_a_slot_reached_its_barrier(tmp_path: Path) -> None:
    # a slot reaches its barrier while the first module (DuckDB) is being imported
    got = _case(tmp_path, barrier_after=1)
    assert got["done"] == 1
    assert got["loaded"] == [FINISH_MODULES[0]]
    assert got["files"] == []
