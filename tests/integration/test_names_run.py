"""A job and a parameter named at the edge of what `plan` takes run in a real slot: the
agent takes the same names (tests/unit/test_names_agree.py), and the rows land under
the job's own name."""

from __future__ import annotations

from pathlib import Path

from tests.integration.localrun import job_library, query, run_local, write_matrix


def test_a_job_named_at_the_edge_of_the_rules_runs_and_lands_under_its_name(
    tmp_path: Path,
) -> None:
    name = "9a-b.c_" + "d" * 121  # 128: starts with a digit, every other kind of character
    param = "P" * 64
    text = (
        f"; d\n; @param TARGET=.\n; @param {param}:size=64k  bytes\n"
        f"[x]\ndirectory=${{TARGET}}\nrw=write\nbs=4k\nsize=${{{param}}}\n"
    )
    library = job_library(tmp_path, {name: text})
    matrix = write_matrix(tmp_path, [{"fio": name, "params": {param: "32k"}}])
    done = run_local(tmp_path, matrix, library=library)
    assert done.returncode == 0, done.stderr
    assert query(tmp_path, "SELECT status FROM slots") == [("SUCCEEDED",)]
    # the parameter's value reached fio
    assert query(tmp_path, "SELECT workload, io_bytes FROM fio_results") == [(name, 32 * 1024)]
