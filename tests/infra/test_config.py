"""Deploy context -> DeployConfig: defaults, validation, one line per problem."""

from __future__ import annotations

import pytest

from infra.config import ConfigError, DeployConfig


def _from(ctx: dict[str, object]) -> DeployConfig:
    return DeployConfig.from_context(ctx.get)


def test_defaults_need_no_context() -> None:
    cfg = _from({})
    assert (cfg.vpc_id, cfg.quicksight_enabled, cfg.results_retention_days) == (None, False, 90)


def test_cli_strings_are_converted_to_integers() -> None:
    assert _from({"max_instances_per_run": "500"}).max_instances_per_run == 500


def test_storage_poll_defaults_to_15_s_and_is_bounded() -> None:
    assert _from({}).storage_poll_s == 15
    assert _from({"storage_poll_s": "1"}).storage_poll_s == 1
    with pytest.raises(ConfigError, match=r"^storage_poll_s: must be between 1 and 300, got 0$"):
        _from({"storage_poll_s": 0})


def test_every_problem_is_reported_on_its_own_line() -> None:
    with pytest.raises(ConfigError) as exc:
        _from({"vpc_id": "default", "results_retention_days": 0, "alarm_email": "nobody"})
    lines = str(exc.value).splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "vpc_id",
        "alarm_email",
        "results_retention_days",
    ]


def test_quicksight_principal_enables_the_dashboard() -> None:
    cfg = _from(
        {
            "quicksight_principal_arn": "arn:aws:quicksight:eu-west-1:123456789012:group/default/bench"
        }
    )
    assert cfg.quicksight_enabled


def test_config_is_frozen() -> None:
    cfg = _from({})
    with pytest.raises(AttributeError):
        cfg.vpc_id = "vpc-12345678"  # type: ignore[misc]
