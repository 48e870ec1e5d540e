"""One synth per configuration per session (Python CDK synth takes tens of seconds)."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

QUICKSIGHT_ARN = "arn:aws:quicksight:us-east-1:123456789012:user/default/analyst"


@dataclass
class Synth:
    outdir: Path
    template: dict[str, Any]
    stack: Any

    @property
    def template_path(self) -> Path:
        return self.outdir / f"{self.stack.stack_name}.template.json"

    def resources(self, type_: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.template["Resources"].items() if v["Type"] == type_}


def _synth(outdir: Path, context: dict[str, Any] | None = None) -> Synth:
    from aws_cdk.assertions import Template

    from app import build_app

    app, stack = build_app(context=context, outdir=str(outdir))
    assembly = app.synth()  # raises if cdk-nag reports an unacknowledged finding
    template = Template.from_stack(stack).to_json()
    assert assembly.directory == str(outdir)
    return Synth(outdir, template, stack)


@pytest.fixture(scope="session")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return _synth(tmp_path_factory.mktemp("cdk-default"))


@pytest.fixture(scope="session")
def synth_quicksight(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return _synth(tmp_path_factory.mktemp("cdk-qs"), {"quicksight_principal_arn": QUICKSIGHT_ARN})


@pytest.fixture(scope="session")
def template(synth: Synth) -> Any:
    from aws_cdk.assertions import Template

    return Template.from_json(synth.template)


@pytest.fixture(scope="session")
def asl(synth: Synth) -> dict[str, Any]:
    from infra.asl import state_machine_definitions

    (definition,) = state_machine_definitions(synth.template).values()
    return definition


def all_states(definition: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every state, nested Map processors included, by name."""
    out: dict[str, dict[str, Any]] = {}
    for name, state in definition["States"].items():
        out[name] = state
        for key in ("ItemProcessor", "Iterator"):
            if key in state:
                out.update(all_states(state[key]))
        for branch in state.get("Branches", []):
            out.update(all_states(branch))
    return out


def dump(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True)
