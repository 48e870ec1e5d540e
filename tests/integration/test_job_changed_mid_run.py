"""A fio job edited while a run is under way is not run: the slots planned with its old
text measure that text, and a slot that would run the new one fails, naming the file.

The plan records the sha256 of each fio job's text (`job_sha256` in every slot payload);
the agent runs a job only while its text is still that one (docs/decisions.md #95).
Before, a job file edited between cells (or after `cdk deploy`) gave later cells
another benchmark under the same name, and nothing said so.

The runs are real (`iofleet local`, real fio). The edit lands at an exact point: each
agent stops itself once it has made its working directory (iofleet.testhook
`workdir-made`), before any workload; the test edits the job while the second cell's
agent is stopped there. The outcome is read where the measurements land: the
warehouse's fio rows and the raw artifacts.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
from pathlib import Path

from tests.integration.localrun import iofleet, job_library, query, run_local, write_matrix
from tests.integration.proctable import stopped, wait_for
from tests.integration.test_local_signals import Run

PLANNED = (
    "; a small sequential write\n"
    "; @param TARGET=.\n"
    "[planned]\n"
    "directory=${TARGET}\n"
    "rw=write\n"
    "bs=4k\n"
    "size=64k\n"
)


def _stopped_agent(run: Run, after: set[int]) -> int | None:
    """An agent of the run, not one of `after`, stopped at its pause point."""
    for pid in run.look():
        if pid != run.proc.pid and pid not in after and stopped(pid):
            return pid
    return None


def test_a_job_edited_between_cells_is_refused_and_its_new_text_never_measured(
    tmp_path: Path,
) -> None:
    # given a custom job and a matrix that runs it in two cells, one after the other
    library = job_library(tmp_path, {"probe": PLANNED})
    job = library / "probe.fio"
    planned_sha = hashlib.sha256(PLANNED.encode()).hexdigest()
    matrix = write_matrix(tmp_path, [{"fio": "probe"}], repeats=2)
    run = Run(
        tmp_path,
        matrix,
        env={"IOFLEET_FIO_JOBS": str(library), "IOFLEET_TEST_PAUSE_AT": "workdir-made"},
    )
    seen: set[int] = set()
    try:
        first = wait_for(lambda: _stopped_agent(run, seen), 120, "the first cell's agent")
        seen.add(first)
        os.kill(first, signal.SIGCONT)  # the first cell runs the job as planned
        second = wait_for(lambda: _stopped_agent(run, seen), 120, "the second cell's agent")
        seen.add(second)
        # when the job is edited while the second cell's agent is about to run it
        job.write_text(PLANNED.replace("[planned]", "[edited]").replace("bs=4k", "bs=8k"))
        os.kill(second, signal.SIGCONT)
        code = run.finish()
    finally:
        for pid in seen:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        run.finish()

    # then the run fails (one slot failed), its report saying which file changed
    assert code == 1, run.stderr()
    assert f"{job} changed since the run was planned" in (tmp_path / "stdout").read_text()
    # the warehouse holds the planned text's measurements, from the first cell only:
    # no row of the edited job (its section would be named "edited")
    rows = query(tmp_path, "SELECT cell_id, job, direction, io_bytes FROM fio_results ORDER BY 1")
    slots = query(tmp_path, "SELECT cell_id, status FROM slots ORDER BY cell_id")
    assert [(job_name, d, n) for _, job_name, d, n in rows] == [("planned", "write", 64 * 1024)]
    first_cell = rows[0][0]
    assert [s for _, s in slots] == ["SUCCEEDED", "FAILED"]
    assert slots[0][0] == first_cell
    # the raw tree: one fio artifact (the first cell's); each slot's manifest records the
    # digest of the text planned, which is the file's bytes as first written
    raw = tmp_path / "out" / "raw"
    artifacts = sorted(p.parent.parent.name for p in raw.rglob("w00-fio-*.json"))
    assert artifacts == [first_cell]
    manifests = sorted(raw.rglob("manifest.json"))
    assert len(manifests) == 2
    for path in manifests:
        (workload,) = json.loads(path.read_text())["workloads"]
        assert workload["job_sha256"] == planned_sha
    failed = json.loads(
        next(p for p in raw.rglob("slot.json") if first_cell not in str(p)).read_text()
    )
    assert failed["workloads"][0]["status"] == "FAILED"
    assert "changed since the run was planned" in failed["workloads"][0]["error"]


def test_compare_says_when_two_runs_ran_different_texts_of_a_job(tmp_path: Path) -> None:
    # given three runs of one matrix: the job as written, the same again, then edited
    matrix = write_matrix(tmp_path, [{"fio": "probe"}])
    edited_text = PLANNED.replace("bs=4k", "bs=8k")
    for text in (PLANNED, PLANNED, edited_text):
        library = job_library(tmp_path, {"probe": text})
        done = run_local(tmp_path, matrix, library=library)
        assert done.returncode == 0, done.stderr
    runs = [r for (r,) in query(tmp_path, "SELECT run_id FROM runs ORDER BY started_at")]
    texts = dict(query(tmp_path, "SELECT run_id, fio_jobs FROM slots"))
    # each slot's row carries the text its fio workload ran
    first = hashlib.sha256(PLANNED.encode()).hexdigest()[:16]
    edited = hashlib.sha256(edited_text.encode()).hexdigest()[:16]
    assert [texts[r] for r in runs] == [f"w00={first}", f"w00={first}", f"w00={edited}"]

    def notes(a: str, b: str) -> set[str]:
        args = ("compare", "--warehouse", "out/warehouse.duckdb", a, b, "--format", "json")
        done = iofleet(tmp_path, *args)
        assert done.returncode == 0, done.stderr
        rows = json.loads(done.stdout)
        assert rows
        return {r["note"] for r in rows}

    # when compared: the same text twice says nothing about texts ...
    assert not [n for n in notes(runs[0], runs[1]) if "texts of fio job" in n]
    # ... an edited one says, on every row of the job, that they are not one benchmark
    said = f"A and B ran different texts of fio job 'probe' (sha256 {first}... vs {edited}...)"
    assert all(said in n for n in notes(runs[1], runs[2]))
