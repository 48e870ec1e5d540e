"""Quality gates on the synthesized app: cdk-nag, cfn-lint, asl-validator."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
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


@dataclass
class Scan:
    """One run of a scanner over both synthesized templates: its findings by template
    (resolved path), and for checkov each template's passed-check and parse-error counts."""

    returncode: int
    findings: dict[Path, list[Any]]
    stderr: str
    counts: dict[Path, dict[str, int]] = field(default_factory=dict)


def _templates(synth: Synth, synth_quicksight: Synth) -> dict[str, Path]:
    return {
        "default": synth.template_path.resolve(),
        "quicksight": synth_quicksight.template_path.resolve(),
    }


@pytest.fixture(scope="module")
def cfn_lint(synth: Synth, synth_quicksight: Synth) -> Scan:
    """cfn-lint once over both templates (its rule and schema loading is most of a run)."""
    paths = list(_templates(synth, synth_quicksight).values())
    proc = subprocess.run(
        [str(ROOT / ".venv/bin/cfn-lint"), "--ignore-checks", "W3005", "--format", "json"]
        + ["--", *map(str, paths)],
        capture_output=True,
        text=True,
    )
    try:
        matches = json.loads(proc.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"cfn-lint exited {proc.returncode} without its JSON: {proc.stderr[-3000:]}")
    findings: dict[Path, list[Any]] = {p: [] for p in paths}
    for m in matches:
        findings[Path(m["Filename"]).resolve()].append(m)  # a file it was not given: KeyError
    return Scan(proc.returncode, findings, proc.stderr)


def _cfn_lint_clean(scan: Scan, template: Path) -> None:
    assert scan.findings[template] == [], json.dumps(scan.findings[template], indent=1)
    # and the run failed for no other reason (cfn-lint exits non-zero only for findings)
    assert scan.returncode == 0 or any(scan.findings.values()), scan.stderr


def test_cfn_lint_is_clean(synth: Synth, cfn_lint: Scan) -> None:
    _cfn_lint_clean(cfn_lint, synth.template_path.resolve())


def test_cfn_lint_is_clean_with_quicksight(synth_quicksight: Synth, cfn_lint: Scan) -> None:
    _cfn_lint_clean(cfn_lint, synth_quicksight.template_path.resolve())


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


# checkov stays off the network: --skip-download (no policy metadata from the Prisma
# platform; BC_SKIP_MAPPING=TRUE is the same switch) and CKV_SKIP_PACKAGE_UPDATE_CHECK
# (no PyPI version check at import). Without them it looks up api0.prismacloud.io and
# pypi.org, and a CI box without a resolver waits on each lookup.
CHECKOV_OFFLINE_ENV = {"BC_SKIP_MAPPING": "TRUE", "CKV_SKIP_PACKAGE_UPDATE_CHECK": "True"}


@pytest.fixture(scope="module")
def checkov(synth: Synth, synth_quicksight: Synth) -> Scan:
    """checkov once over both templates (its start-up is most of a run): the failed
    checks of each as (check id, logical id)."""
    assert CHECKOV.exists(), f"{CHECKOV} missing: `make test` installs it (requirements-scan.txt)"
    paths = list(_templates(synth, synth_quicksight).values())
    proc = subprocess.run(
        [str(CHECKOV), *(a for p in paths for a in ("-f", str(p)))]
        + ["--framework", "cloudformation", "--compact", "-o", "json", "--skip-download"],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **CHECKOV_OFFLINE_ENV},
    )
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"checkov exited {proc.returncode} without its JSON: {proc.stderr[-3000:]}")
    results = doc["results"] if isinstance(doc, dict) else {}
    findings: dict[Path, list[Any]] = {p: [] for p in paths}
    counts = {p: {"passed": 0, "parsing_errors": 0} for p in paths}
    for f in results.get("failed_checks", []):
        # resource is `AWS::Type.LogicalId`; a file it was not given: KeyError
        logical_id = f["resource"].split(".", 1)[1]
        findings[Path(f["file_abs_path"]).resolve()].append((f["check_id"], logical_id))
    for f in results.get("passed_checks", []):
        counts[Path(f["file_abs_path"]).resolve()]["passed"] += 1
    for error in results.get("parsing_errors", []):  # the absolute path of each
        counts[Path(error).resolve()]["parsing_errors"] += 1
    return Scan(proc.returncode, findings, proc.stderr, counts)


def _skip_for(check: str, logical_id: str, skips: list[dict[str, str]]) -> dict[str, str] | None:
    from fnmatch import fnmatchcase

    return next(
        (s for s in skips if s["check"] == check and fnmatchcase(logical_id, s["resources"])),
        None,
    )


@pytest.mark.parametrize("which", ["default", "quicksight"])
def test_checkov_finds_nothing_beyond_the_listed_skips(
    which: str,
    synth: Synth,
    synth_quicksight: Synth,
    checkov: Scan,
) -> None:
    skips = json.loads(SKIPS.read_text())["skips"]
    assert all(len(s["reason"]) >= 40 for s in skips), "every skip needs a specific reason"
    template = _templates(synth, synth_quicksight)[which]
    summary, failures = checkov.counts[template], checkov.findings[template]
    assert summary["parsing_errors"] == 0 and summary["passed"] > 100, (summary, checkov.stderr)
    unexplained = [f for f in failures if _skip_for(*f, skips) is None]
    assert unexplained == [], f"checkov findings with no listed reason: {unexplained}"
    if which == "default":
        stale = [s for s in skips if not any(_skip_for(c, r, [s]) for c, r in failures)]
        assert stale == [], f"skips that no longer match a finding: {stale}"
