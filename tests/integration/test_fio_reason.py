"""When fio fails a job it prints its reason on stdout ahead of its JSON (`fio: pid=N,
err=84/file:io_u.c:2152, func=io_u_sync_complete, error=...`); the slot's error carries
it, beside what fio wrote on stderr (before: "fio exited with status 1" and the last
stderr line only, the reason left in the raw artifact). A real run of a job the plan
cannot refuse: a verify of a new file that is only read (what fio laid out carries no
verify headers)."""

from __future__ import annotations

from pathlib import Path

from tests.integration.localrun import job_library, query, run_local, write_matrix


def test_fios_own_reason_reaches_the_slots_error(tmp_path: Path) -> None:
    library = job_library(
        tmp_path,
        {
            "verify": "; d\n; @param TARGET=.\n[x]\ndirectory=${TARGET}\nrw=read\nbs=4k\n"
            "size=64k\nverify=crc32c\n"
        },
    )
    done = run_local(tmp_path, write_matrix(tmp_path, [{"fio": "verify"}]), library=library)
    assert done.returncode == 1, done.stderr
    [(error,)] = query(tmp_path, "SELECT error FROM slots")
    assert "fio exited with status 1: verify: bad magic header" in error
    assert "(fio: pid=" in error and ", err=" in error, error
