"""bench/common.py compile_iofleet: the figures that start `iofleet` processes time an
installed iofleet (bytecode compiled, as `pip install` leaves it), not Python compiling
iofleet's sources at every start under PYTHONDONTWRITEBYTECODE."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

from bench.common import ROOT, compile_iofleet


def test_every_module_gets_bytecode_that_a_no_write_interpreter_uses(tmp_path: Path) -> None:
    # given a copy of the package with no bytecode at all
    package = tmp_path / "iofleet"
    shutil.copytree(ROOT / "iofleet", package, ignore=shutil.ignore_patterns("__pycache__"))
    sources = sorted(package.rglob("*.py"))
    # when it is compiled
    compiled = compile_iofleet(package)
    # then every module has its bytecode, and a second pass has nothing left to do
    assert compiled == len(sources)
    missing = [s for s in sources if not Path(importlib.util.cache_from_source(str(s))).is_file()]
    assert missing == []
    assert compile_iofleet(package) == 0
    # and an interpreter that may not write bytecode loads a module from it, compiling
    # nothing (`python -v` names the bytecode file each import read)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-v", "-c", "import iofleet.local.runner"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    runner_pyc = importlib.util.cache_from_source(str(package / "local" / "runner.py"))
    assert f"matches {package / 'local' / 'runner.py'}" in done.stderr
    assert f"code object from '{runner_pyc}'" in done.stderr
