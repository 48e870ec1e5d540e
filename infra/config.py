"""Deploy configuration: a few context keys, validated once at synth."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

POWERTOOLS_LAYER_VERSION = 38  # AWSLambdaPowertoolsPythonV3-python314 public layer, pinned

KEYS = (
    "vpc_id",
    "results_retention_days",
    "max_instances_per_run",
    "quicksight_principal_arn",
    "alarm_email",
    "stack_name",
    "powertools_layer_version",
    "projection_start",
    "ingest_concurrency",
    "storage_poll_s",
)


class ConfigError(ValueError):
    """Bad deploy context; one line per problem."""


@dataclass(frozen=True)
class DeployConfig:
    stack_name: str = "IofleetStack"
    vpc_id: str | None = None
    results_retention_days: int = 90
    max_instances_per_run: int = 200
    quicksight_principal_arn: str | None = None
    alarm_email: str | None = None
    powertools_layer_version: int = POWERTOOLS_LAYER_VERSION
    projection_start: str = "2024-01-01"  # unused since decision 29; still parsed
    ingest_concurrency: int = 10  # reserved concurrency of the ingest Lambda = SQS max concurrency
    storage_poll_s: int = 15  # WaitForStorage: seconds between checks of a cell's new file system

    @property
    def quicksight_enabled(self) -> bool:
        return self.quicksight_principal_arn is not None

    @classmethod
    def from_context(cls, get: Callable[[str], Any]) -> DeployConfig:
        """Build from `node.try_get_context`; raises ConfigError listing every problem."""
        problems: list[str] = []
        values: dict[str, Any] = {}

        def text(key: str, pattern: str, hint: str) -> None:
            raw = get(key)
            if raw in (None, ""):
                return
            if not isinstance(raw, str) or not re.fullmatch(pattern, raw):
                problems.append(f"{key}: {hint}, got {raw!r}")
            else:
                values[key] = raw

        def integer(key: str, lo: int, hi: int) -> None:
            raw = get(key)
            if raw in (None, ""):
                return
            try:
                n = int(str(raw))
            except ValueError:
                problems.append(f"{key}: expected an integer, got {raw!r}")
                return
            if not lo <= n <= hi:
                problems.append(f"{key}: must be between {lo} and {hi}, got {n}")
            else:
                values[key] = n

        text("stack_name", r"[A-Za-z][A-Za-z0-9-]{0,127}", "expected a CloudFormation stack name")
        text("vpc_id", r"vpc-[0-9a-f]{8,17}", "expected a VPC id like vpc-0123456789abcdef0")
        text(
            "quicksight_principal_arn",
            r"arn:aws[a-z-]*:quicksight:[a-z0-9-]+:\d{12}:(user|group)/.+",
            "expected a QuickSight user or group ARN",
        )
        text("alarm_email", r"[^@\s]+@[^@\s]+\.[^@\s]+", "expected an email address")
        text(
            "projection_start",
            r"\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])",
            "expected a date like 2024-01-01",
        )
        integer("results_retention_days", 1, 3650)
        integer("max_instances_per_run", 1, 5000)
        integer("powertools_layer_version", 1, 10000)
        integer("ingest_concurrency", 2, 1000)  # SQS event sources take 2..1000
        integer("storage_poll_s", 1, 300)
        if problems:
            raise ConfigError("\n".join(problems))
        return cls(**values)
