#!/usr/bin/env python3
"""CDK app: `cdk synth` / `cdk deploy` (context keys in cdk.json or `-c key=value`).

Hermetic: no Docker, no AWS credentials, no lookups unless `vpc_id` is given.
cdk-nag's AwsSolutions pack runs on every synth; any unacknowledged finding
stops the synth.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

import aws_cdk as cdk  # noqa: E402
from cdk_nag import AwsSolutionsChecks  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

from infra.config import ConfigError, DeployConfig  # noqa: E402
from infra.stack import IofleetStack  # noqa: E402
from infra.staging import JobLibraryError, job_library  # noqa: E402

# Feature flags the stack relies on (also set when tests build the app directly).
FEATURE_FLAGS: dict[str, object] = {
    "@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy": True,
    "@aws-cdk/aws-iam:minimizePolicies": True,
    "@aws-cdk/core:target-partitions": ["aws"],
}


def build_app(
    context: dict[str, object] | None = None, outdir: str | None = None
) -> tuple[cdk.App, IofleetStack]:
    """The app with its one stack (tests call this with their own context and outdir)."""
    app = cdk.App(context={**FEATURE_FLAGS, **(context or {})}, outdir=outdir)
    config = DeployConfig.from_context(app.node.try_get_context)
    staging_root = Path(app.outdir) / ".staging"
    env = None
    if config.vpc_id:  # a lookup needs a concrete account/region
        env = cdk.Environment(
            account=os.environ.get("CDK_DEFAULT_ACCOUNT"),
            region=os.environ.get("CDK_DEFAULT_REGION"),
        )
    stack = IofleetStack(app, config.stack_name, config=config, staging_root=staging_root, env=env)
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app, stack


def main() -> int:
    try:
        job_library()  # checked before the app writes anything (its staging)
        # `cdk synth` sets CDK_OUTDIR; `make synth` (python3 app.py) writes ./cdk.out
        app, _ = build_app(
            outdir=os.environ.get("CDK_OUTDIR", str(Path(__file__).resolve().parent / "cdk.out"))
        )
    except ConfigError as exc:
        for line in str(exc).splitlines():
            print(f"cdk context: {line}", file=sys.stderr)
        return 2
    except JobLibraryError as exc:
        print(exc, file=sys.stderr)  # PATH: message
        return 2
    app.synth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
