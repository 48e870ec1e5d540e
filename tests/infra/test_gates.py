"""Quality gates on the synthesized app: cdk-nag, cfn-lint, asl-validator."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.infra.conftest import ROOT, Synth


def _violations(outdir: Path) -> list[str]:
    report = outdir / "validation-report.json"
    if not report.exists():
        return []
    doc = json.loads(report.read_text())
    return [
        f"{v['ruleName']} @ {c['constructPath']}"
        for plugin in doc.get("pluginReports", [])
        for v in plugin.get("violations", [])
        for c in v.get("violatingConstructs", [])
    ]


def test_cdk_nag_reports_no_unacknowledged_finding(synth: Synth) -> None:
    # synth() raised if cdk-nag had found anything; the report must be clean too
    assert _violations(synth.outdir) == []


def test_cdk_nag_is_clean_with_quicksight_enabled(synth_quicksight: Synth) -> None:
    assert _violations(synth_quicksight.outdir) == []


def test_an_acknowledgement_without_a_specific_reason_is_refused() -> None:
    from infra import nag

    with pytest.raises(ValueError):
        nag.ack(None, "AwsSolutions-S1", "because")  # type: ignore[arg-type]


def test_cfn_lint_is_clean(synth: Synth) -> None:
    out = subprocess.run(
        [
            str(ROOT / ".venv/bin/cfn-lint"),
            "--ignore-checks",
            "W3005",
            "--",
            str(synth.template_path),
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_cfn_lint_is_clean_with_quicksight(synth_quicksight: Synth) -> None:
    out = subprocess.run(
        [
            str(ROOT / ".venv/bin/cfn-lint"),
            "--ignore-checks",
            "W3005",
            "--",
            str(synth_quicksight.template_path),
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_resolved_definition_passes_asl_validator(asl: dict[str, Any], tmp_path: Path) -> None:
    validator = ROOT / "node_modules/.bin/asl-validator"
    assert validator.exists(), "run `npm ci` (make test does) to install asl-validator"
    assert shutil.which("node"), "node is required for asl-validator"
    path = tmp_path / "definition.json"
    path.write_text(json.dumps(asl))
    out = subprocess.run([str(validator), "--json-path", str(path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
