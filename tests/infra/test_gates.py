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


# --- template security scanner: checkov (its own venv, requirements-scan.txt) ------------

CHECKOV = ROOT / ".venv-scan" / "bin" / "checkov"
SKIPS = ROOT / "infra" / "checkov-skips.json"


def _checkov_failures(template: Path) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    assert CHECKOV.exists(), f"{CHECKOV} missing: `make test` installs it (requirements-scan.txt)"
    proc = subprocess.run(
        [str(CHECKOV), "-f", str(template), "--framework", "cloudformation", "--quiet"]
        + ["--compact", "-o", "json"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    doc = json.loads(proc.stdout)
    failed = doc.get("results", {}).get("failed_checks", []) if isinstance(doc, dict) else []
    summary = doc["summary"] if isinstance(doc, dict) else {}
    # resource is `AWS::Type.LogicalId`
    return summary, [(f["check_id"], f["resource"].split(".", 1)[1]) for f in failed]


def _skip_for(check: str, logical_id: str, skips: list[dict[str, str]]) -> dict[str, str] | None:
    from fnmatch import fnmatchcase

    return next(
        (s for s in skips if s["check"] == check and fnmatchcase(logical_id, s["resources"])),
        None,
    )


@pytest.mark.parametrize("which", ["default", "quicksight"])
def test_checkov_finds_nothing_beyond_the_listed_skips(
    which: str, synth: Synth, synth_quicksight: Synth
) -> None:
    skips = json.loads(SKIPS.read_text())["skips"]
    assert all(len(s["reason"]) >= 40 for s in skips), "every skip needs a specific reason"
    summary, failures = _checkov_failures(
        (synth if which == "default" else synth_quicksight).template_path
    )
    assert summary.get("parsing_errors") == 0 and summary.get("passed", 0) > 100, summary
    unexplained = [f for f in failures if _skip_for(*f, skips) is None]
    assert unexplained == [], f"checkov findings with no listed reason: {unexplained}"
    if which == "default":
        stale = [s for s in skips if not any(_skip_for(c, r, [s]) for c, r in failures)]
        assert stale == [], f"skips that no longer match a finding: {stale}"
