"""`projection_start` context key: the first `dt` day of the Glue tables' partition projection."""

from __future__ import annotations

import pytest

from infra.config import ConfigError, DeployConfig
from infra.constructs.catalog import table_parameters
from iofleet.results import schema
from tests.infra.conftest import Synth


def test_projection_start_defaults_to_2024() -> None:
    assert DeployConfig.from_context({}.get).projection_start == "2024-01-01"


def test_projection_start_is_taken_from_context() -> None:
    cfg = DeployConfig.from_context({"projection_start": "2026-11-20"}.get)
    assert cfg.projection_start == "2026-11-20"


@pytest.mark.parametrize("bad", ["yesterday", "2026-13-01", "2026-1-1", 20261120])
def test_projection_start_must_be_a_date(bad: object) -> None:
    with pytest.raises(ConfigError, match="^projection_start: expected a date like 2024-01-01"):
        DeployConfig.from_context({"projection_start": bad}.get)


def test_table_parameters_project_days_from_the_start() -> None:
    params = table_parameters("bucket", schema.RUNS, "2026-11-20")
    assert params["projection.dt.range"] == "2026-11-20,NOW"


def test_default_template_projects_from_2024(synth: Synth) -> None:
    ranges = {
        t["Properties"]["TableInput"]["Parameters"]["projection.dt.range"]
        for t in synth.resources("AWS::Glue::Table").values()
    }
    assert ranges == {"2024-01-01,NOW"}
