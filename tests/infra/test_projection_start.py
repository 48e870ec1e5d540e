"""`projection_start` context key (still parsed; the Glue tables no longer use partition
projection since the per-run Parquet layout, docs/decisions.md)."""

from __future__ import annotations

import pytest

from infra.config import ConfigError, DeployConfig


def test_projection_start_defaults_to_2024() -> None:
    assert DeployConfig.from_context({}.get).projection_start == "2024-01-01"


def test_projection_start_is_taken_from_context() -> None:
    cfg = DeployConfig.from_context({"projection_start": "2026-11-20"}.get)
    assert cfg.projection_start == "2026-11-20"


@pytest.mark.parametrize("bad", ["yesterday", "2026-13-01", "2026-1-1", 20261120])
def test_projection_start_must_be_a_date(bad: object) -> None:
    with pytest.raises(ConfigError, match="^projection_start: expected a date like 2024-01-01"):
        DeployConfig.from_context({"projection_start": bad}.get)
