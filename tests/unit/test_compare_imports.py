"""scipy and numpy stay out of the agent's and the Lambdas' import paths (they are
imported by `iofleet compare` and `iofleet report` only, lazily)."""

from __future__ import annotations

import subprocess
import sys

import pytest

MODULES = [
    "iofleet.cli",
    "iofleet.agent.slot",
    "iofleet.results.ingest",
    "iofleet.results",
    "iofleet.report.cli",
    "lambdas.ingest.handler",
    "lambdas.summarize.handler",
]


@pytest.mark.parametrize("module", MODULES)
def test_importing_does_not_load_scipy_or_numpy(module: str) -> None:
    code = (
        f"import sys, {module}; "
        "loaded = sorted(m for m in ('scipy', 'numpy') if m in sys.modules); "
        "print(','.join(loaded))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert result.stdout.strip() == ""
