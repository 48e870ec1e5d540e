"""Figure 5, cold start: import time of each Lambda handler and each asset's size.

The CDK app is synthesized (in-process `python app.py`, CDK_OUTDIR in the
bench scratch dir); every `AWS::Lambda::Function` whose code is an asset
(`Code.S3Key` = `<hash>.zip` -> `cdk.out/asset.<hash>/`) is measured:

- unpacked size: the bytes of the asset directory (what Lambda unzips);
  the Powertools layer and the runtime's boto3 are not part of the asset.
- import time: `python -X importtime -c "import handler"` run in the asset
  directory (so its own copy of `iofleet/` is imported, compiled from source
  with no bytecode cache, as on Lambda where the asset ships no .pyc), with
  the function's literal environment variables set. The figure is the
  cumulative microseconds Python reports for the `handler` module (its
  imports included); third-party packages (Powertools, pydantic, boto3) come
  from the venv with their bytecode cached, as a Lambda layer ships them.
  The first run warms the page cache and is not counted.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.common import MEASURED, MIB, ROOT, Context, Timer, dir_size, run, stat

TARGET_IMPORT_MS = 250.0  # every Lambda's handler
TARGET_ASSET_MIB = 10.0
_IMPORTTIME = re.compile(r"^import time:\s+(\d+)\s+\|\s+(\d+)\s+\|\s*(.+)$")


def synth(ctx: Context) -> Path:
    out = ctx.scratch("cdk.out")
    env = {
        **os.environ,
        "CDK_OUTDIR": str(out),
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    }
    run([sys.executable, str(ROOT / "app.py")], cwd=ROOT, env=env)
    return out


def lambda_assets(cdk_out: Path) -> list[dict[str, Any]]:
    """Lambda functions whose code is an asset directory in cdk.out."""
    found = []
    for template in sorted(cdk_out.glob("*.template.json")):
        doc = json.loads(template.read_text())
        for logical, res in doc.get("Resources", {}).items():
            if res.get("Type") != "AWS::Lambda::Function":
                continue
            props = res.get("Properties", {})
            key = props.get("Code", {}).get("S3Key")
            if not isinstance(key, str) or not key.endswith(".zip"):
                continue  # inline code (CDK's own helpers)
            asset = cdk_out / f"asset.{key[: -len('.zip')]}"
            if not asset.is_dir():
                continue
            env = props.get("Environment", {}).get("Variables", {})
            found.append(
                {
                    "logical_id": logical,
                    "handler": props.get("Handler"),
                    "runtime": props.get("Runtime"),
                    "asset": asset,
                    "env": {
                        k: v if isinstance(v, str) else f"bench-{k.lower()}" for k, v in env.items()
                    },
                }
            )
    return found


def lambda_name(asset: Path) -> str | None:
    """Which lambdas/<name>/handler.py this asset carries (by content)."""
    handler = asset / "handler.py"
    if not handler.is_file():
        return None
    text = handler.read_bytes()
    for src in sorted((ROOT / "lambdas").glob("*/handler.py")):
        if src.read_bytes() == text:
            return src.parent.name
    return None


def import_time_us(asset: Path, module: str, env: dict[str, str]) -> tuple[int, float]:
    """(cumulative import µs of `module` from -X importtime, wall seconds of the process)."""
    for cache in asset.rglob("__pycache__"):
        shutil.rmtree(cache, ignore_errors=True)
    full_env = {
        **os.environ,
        "PYTHONDONTWRITEBYTECODE": "1",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_EC2_METADATA_DISABLED": "true",
        # the variables the Lambda runtime sets: Powertools' Tracer and the X-Ray
        # SDK take their Lambda code path (no sampler clients built at import),
        # as deployed with active tracing
        "LAMBDA_TASK_ROOT": str(asset),
        "AWS_LAMBDA_FUNCTION_NAME": f"bench-{module}",
        "AWS_EXECUTION_ENV": "AWS_Lambda_python3.12",
        **env,
    }
    full_env.pop("PYTHONPATH", None)
    with Timer() as t:
        done = subprocess.run(  # noqa: S603 - our interpreter, fixed argv
            [sys.executable, "-X", "importtime", "-c", f"import {module}"],
            cwd=asset,
            env=full_env,
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()
        raise RuntimeError(f"import {module} in {asset.name} failed: {tail[-1] if tail else ''}")
    for line in reversed(done.stderr.splitlines()):
        m = _IMPORTTIME.match(line)
        if m and m.group(3).strip() == module:
            return int(m.group(2)), t.seconds
    raise RuntimeError(f"no importtime line for {module}")


def measure(ctx: Context) -> dict[str, Any]:
    with Timer() as t_synth:
        cdk_out = synth(ctx)
    assets = lambda_assets(cdk_out)
    if not assets:
        raise RuntimeError("the synthesized template has no Lambda asset")
    functions: dict[str, Any] = {}
    for fn in assets:
        name = lambda_name(fn["asset"]) or fn["logical_id"]
        module = str(fn["handler"]).rsplit(".", 1)[0]
        import_time_us(fn["asset"], module, fn["env"])  # warm-up, not counted
        samples = [
            import_time_us(fn["asset"], module, fn["env"])
            for _ in range(ctx.scale.cold_start_repeats)
        ]
        size = dir_size(fn["asset"])
        functions[name] = {
            "logical_id": fn["logical_id"],
            "runtime": fn["runtime"],
            "asset": fn["asset"].name,
            "asset_bytes": size,
            "asset_mib": round(size / MIB, 3),
            "import_ms": stat((us / 1000 for us, _ in samples), "ms", 1),
            "process_wall_ms": stat((wall * 1000 for _, wall in samples), "ms", 1),
        }
        ctx.log(
            f"cold_start {name}: import {functions[name]['import_ms']['median']} ms, "
            f"asset {functions[name]['asset_mib']} MiB"
        )
    ingest = functions.get("ingest")
    largest = max(f["asset_mib"] for f in functions.values())
    per_lambda = stat((f["import_ms"]["median"] for f in functions.values()), "ms", 1)
    return {
        "status": MEASURED,
        "method": (
            "python -X importtime -c 'import handler' in each synthesized Lambda asset dir "
            "(asset code compiled from source, no .pyc; Powertools/pydantic/boto3 from the venv); "
            "cumulative import time of the handler module; asset size = unpacked bytes of "
            "cdk.out/asset.<hash>/"
        ),
        "python": sys.version.split()[0],
        "synth_s": round(t_synth.seconds, 1),
        "functions": functions,
        "ingest_import_ms": ingest["import_ms"] if ingest else None,
        "import_ms_per_lambda": per_lambda,
        "slowest_lambda": max(functions, key=lambda n: functions[n]["import_ms"]["median"]),
        "largest_asset_mib": largest,
        "asset_mib": stat((f["asset_mib"] for f in functions.values()), "MiB (across assets)", 3),
        "targets": {"import_ms_every_lambda": TARGET_IMPORT_MS, "asset_mib": TARGET_ASSET_MIB},
        "met": {
            "import_ms_every_lambda": per_lambda["max"] < TARGET_IMPORT_MS,
            "asset_mib": largest < TARGET_ASSET_MIB,
        },
    }
