"""The c-build preset really compiles generated sources."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from iofleet.plan.apps import get_preset


def test_c_build_compiles_and_links_generated_sources(tmp_path: Path) -> None:
    # given a slot work dir and a small file count
    workdir = tmp_path / "work"
    shared = tmp_path / "shared"
    workdir.mkdir()
    shared.mkdir()
    env = dict(
        os.environ,
        IOFLEET_WORKDIR=str(workdir),
        IOFLEET_SHARED=str(shared),
        IOFLEET_SLOT="0",
        IOFLEET_FLEET_SIZE="1",
        IOFLEET_CELL_ID="c000-test",
        IOFLEET_CBUILD_FILES="12",
    )
    # when the run command executes
    result = subprocess.run(
        ["bash", "-c", get_preset("c-build").run],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    # then it built one object per generated source plus main, and a working binary
    assert result.returncode == 0, result.stderr
    build = workdir / "cbuild"
    assert len(list((build / "obj").glob("*.o"))) == 13
    assert len(list((build / "include").glob("*.h"))) == 12
    binary = build / "cbuild"
    assert os.access(binary, os.X_OK)
    assert subprocess.run([str(binary)], capture_output=True, text=True).stdout.startswith(
        "cbuild "
    )
