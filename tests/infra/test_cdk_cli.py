"""`npx cdk synth` as the README says: the pinned CLI (package.json) runs cdk.json's app
command, which must find the project's venv by itself (no activation), and must read the
cloud assembly the pinned aws-cdk-lib writes. Offline: the app makes no AWS lookups."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _clean_env() -> dict[str, str]:
    # as a new user's shell: no venv activated, no AWS credentials
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "VIRTUAL_ENV"))}
    venv_bin = str(ROOT / ".venv" / "bin")
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    env["CDK_DISABLE_VERSION_CHECK"] = "1"
    return env


CUSTOM_JOB = (
    "; a user's own job\n; @param TARGET=.  t\n[x]\ndirectory=${TARGET}\nrw=write\n"
    "include custom.inc\n"
)


def test_npx_cdk_synth_writes_the_stack_with_the_pinned_cli(tmp_path: Path) -> None:
    out = tmp_path / "cdk.out"
    # given a job library of the user's own (IOFLEET_FIO_JOBS): the shipped jobs but one,
    # and a job of theirs with the file it includes
    library = tmp_path / "jobs"
    library.mkdir()
    shipped = sorted((ROOT / "fio-jobs").glob("*.fio"))
    for job in shipped[1:]:
        (library / job.name).write_bytes(job.read_bytes())
    (library / "custom.fio").write_text(CUSTOM_JOB)
    (library / "custom.inc").write_text("size=1m\n")
    # given: the CLI version the lockfile pins
    pinned = json.loads((ROOT / "package.json").read_text())["devDependencies"]["aws-cdk"]
    version = subprocess.run(
        ["npx", "--no-install", "cdk", "--version"],
        cwd=ROOT,
        env=_clean_env(),
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    assert version.startswith(pinned), version
    # when
    proc = subprocess.run(
        ["npx", "--no-install", "cdk", "synth", "-q", "-o", str(out)],
        cwd=ROOT,
        env={**_clean_env(), "IOFLEET_FIO_JOBS": str(library)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    # then: the CLI read the assembly (a schema mismatch fails here) and the template is there
    assert proc.returncode == 0, proc.stderr[-3000:]
    template = json.loads((out / "IofleetStack.template.json").read_text())
    types = {r["Type"] for r in template["Resources"].values()}
    assert "AWS::StepFunctions::StateMachine" in types
    manifest = json.loads((out / "manifest.json").read_text())
    assert "IofleetStack" in manifest["artifacts"]
    # and every asset with a job library (the agent's, the Lambdas') holds that library,
    # byte for byte: what a local `iofleet plan` checked is what runs on AWS
    bundled = sorted(out.glob("asset.*/fio-jobs"))
    assert len(bundled) >= 2
    wanted = {p.name: p.read_bytes() for p in library.iterdir()}
    for jobs in bundled:
        assert {p.name: p.read_bytes() for p in jobs.iterdir()} == wanted, jobs
    assert shipped[0].name not in wanted


def test_a_job_library_that_does_not_load_stops_the_synth_in_one_line(tmp_path: Path) -> None:
    import sys

    library = tmp_path / "jobs"
    library.mkdir()
    (library / "broken.fio").write_text("[x]\ndirectory=${TARGET}\n")
    out = tmp_path / "cdk.out"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "app.py")],
        env={**_clean_env(), "IOFLEET_FIO_JOBS": str(library), "CDK_OUTDIR": str(out)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"{library / 'broken.fio'}: line 1 must be '; <one-line description>'"
    ]
    assert not out.exists()  # nothing staged, nothing written


def test_the_app_command_says_what_to_do_without_a_venv(tmp_path: Path) -> None:
    # a copy of the launcher outside the repo has no .venv beside it
    (tmp_path / "scripts").mkdir()
    launcher = tmp_path / "scripts" / "cdk-app"
    launcher.write_bytes((ROOT / "scripts" / "cdk-app").read_bytes())
    launcher.chmod(0o755)
    proc = subprocess.run([str(launcher)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 1
    assert "make bootstrap" in proc.stderr
    assert not (tmp_path / "cdk.out").exists()
