"""The workload guardian (iofleet/agent/guard.py) starts without the `site` machinery
(`python -I -S`): it is stdlib only, and processing site-packages' .pth files before
every workload is start-up time the slot pays. Shown with an interpreter whose
site-packages holds a .pth file that ends any process which processes it."""

from __future__ import annotations

import subprocess
import sysconfig
import venv
from pathlib import Path

from iofleet.agent.guard import __file__ as GUARD_FILE

ROOT = Path(GUARD_FILE).resolve().parents[2]


def test_the_guardian_runs_a_workload_where_site_would_stop_the_interpreter(
    tmp_path: Path,
) -> None:
    # given a Python environment whose site-packages ends every interpreter that reads it
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False, system_site_packages=False).create(env_dir)
    python = env_dir / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(purelib) / "stop.pth").write_text("import os; os._exit(86)\n")
    assert subprocess.run([str(python), "-c", "pass"], check=False).returncode == 86
    assert sysconfig.get_path("purelib") != purelib
    # when the agent's run_child, running under that interpreter (iofleet from the tree,
    # without site), runs a workload through the guardian
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "from pathlib import Path; import time;"
        "from iofleet.agent.process import run_child;"
        "r = run_child(['echo', 'ran'], cwd=Path('.'), env={'PATH': '/usr/bin:/bin'},"
        " deadline=time.monotonic() + 60);"
        "print(r.returncode, r.stdout.strip())"
    )
    done = subprocess.run(
        [str(python), "-S", "-c", code, str(ROOT)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    # then the workload ran and its status came back: the guardian never read site-packages
    assert done.stdout.split() == ["0", "ran"], done.stderr
