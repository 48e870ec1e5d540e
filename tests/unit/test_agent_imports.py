"""The agent's start-up imports what a slot uses, not the HTTP stack (urllib, http.client,
email, ssl) that only the EC2 identity lookup needs: every slot of every run pays for
its imports before its workloads start (docs/benchmarks.md, harness overhead)."""

from __future__ import annotations

import subprocess
import sys

import pytest

HTTP_STACK = ("urllib.request", "http.client", "email.message", "ssl")


@pytest.mark.parametrize("module", ["iofleet.agent.slot", "iofleet.agent.manifest"])
def test_the_agent_does_not_import_the_http_stack(module: str) -> None:
    # the command `iofleet agent --slot FILE` runs: the CLI, then the slot runner
    code = (
        f"import sys, iofleet.cli, {module}; "
        f"print(','.join(m for m in {HTTP_STACK!r} if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert result.stdout.strip() == ""


def test_the_ec2_lookup_still_finds_the_http_stack() -> None:
    # an address nothing answers on: the lookup gives up and says so with None values
    code = (
        "from iofleet.agent.manifest import ec2_identity; "
        "print(ec2_identity(timeout_s=0.2, base_url='http://127.0.0.1:9'))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert result.stdout.strip() == ("{'instance_type': None, 'instance_id': None, 'az_id': None}")
