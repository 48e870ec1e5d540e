"""Each handler imported as Lambda runs it (runtime variables set, tracing on), in a
fresh interpreter: the Tracer patches botocore for X-Ray and nothing else (no
`patch_all`, which imports every patchable library), and the ingest handler's
Powertools batch processor with the Parser's SqsRecordModel is built at its first
invoke and then processes a batch (Logger, Metrics and Tracer decorators around it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
HANDLERS = sorted(p.parent.name for p in (ROOT / "lambdas").glob("*/handler.py"))

_PROBE = """
import json, sys
sys.path[:0] = [{lambda_dir!r}, {root!r}]
import handler
from aws_xray_sdk.core import patcher
out = {{
    "patched": sorted(patcher._PATCHED_MODULES),
    "tracer_disabled": handler.tracer.disabled,
    "imported": sorted(m for m in ("requests", "sqlite3", "httplib2", "pynamodb",
        "aws_lambda_powertools.utilities.parser.models") if m in sys.modules),
}}
if {invoke!r}:
    from tests.unit.lambdas.conftest import FakeLambdaContext
    body = json.dumps({{"Service": "Amazon S3", "Event": "s3:TestEvent"}})
    record = {{"messageId": "m1", "receiptHandle": "rh", "body": body, "attributes": {{
        "ApproximateReceiveCount": "1", "SentTimestamp": "1795239247403", "SenderId": "s3",
        "ApproximateFirstReceiveTimestamp": "1795239247403"}}, "messageAttributes": {{}},
        "md5OfBody": "x", "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:raw", "awsRegion": "us-east-1"}}
    out["result"] = handler.handler({{"Records": [record]}}, FakeLambdaContext())
    out["model"] = handler._processor().model.__name__
    out["after_invoke"] = "aws_lambda_powertools.utilities.parser.models" in sys.modules
print("PROBE " + json.dumps(out))
"""


def _lambda_env(tmp_path: Path, name: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("POWERTOOLS_", "AWS_"))}
    env.pop("PYTHONPATH", None)
    env.update(
        {
            "AWS_REGION": "us-east-1",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",
            "AWS_EC2_METADATA_DISABLED": "true",
            "LAMBDA_TASK_ROOT": str(tmp_path),
            "AWS_LAMBDA_FUNCTION_NAME": f"iofleet-{name}",
            "AWS_EXECUTION_ENV": "AWS_Lambda_python3.12",
            "_X_AMZN_TRACE_ID": "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=0",
            "POWERTOOLS_SERVICE_NAME": "iofleet-test",
            "POWERTOOLS_METRICS_NAMESPACE": "iofleet-test",
            "RESULTS_BUCKET": "b",
            "STATE_TABLE": "t",
        }
    )
    return env


@pytest.mark.parametrize("name", HANDLERS)
def test_handler_imports_with_botocore_traced_and_nothing_else_patched(
    tmp_path: Path, name: str
) -> None:
    invoke = name == "ingest"
    code = _PROBE.format(lambda_dir=str(ROOT / "lambdas" / name), root=str(ROOT), invoke=invoke)
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=_lambda_env(tmp_path, name),
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("PROBE "))
    out = json.loads(line[len("PROBE ") :])
    assert out["tracer_disabled"] is False  # tracing on, as deployed
    assert out["patched"] == ["botocore"]
    assert out["imported"] == []
    if invoke:
        assert out["result"] == {"batchItemFailures": []}
        assert out["model"] == "SqsRecordModel"
        assert out["after_invoke"] is True
