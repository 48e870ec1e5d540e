"""A warm Lambda "container": loads `handler.py` from the cwd (the unpacked code zip)
and serves invocations read as JSON lines on stdin; answers go to the fd in argv[1].

Stdout/stderr (Powertools logs, EMF metrics) go wherever the parent points them.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import json
import os
import sys
import traceback
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class LambdaContext:
    function_name: str = field(
        default_factory=lambda: os.environ.get("AWS_LAMBDA_FUNCTION_NAME", "fn")
    )
    function_version: str = "$LATEST"
    memory_limit_in_mb: int = field(
        default_factory=lambda: int(os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "512"))
    )
    invoked_function_arn: str = field(
        default_factory=lambda: os.environ.get("IOFLEET_FUNCTION_ARN", "")
    )
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    log_group_name: str = "/aws/lambda/local"
    log_stream_name: str = "local/[$LATEST]worker"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


# third-party modules the venv has but Lambda gives a function only through one of the
# stack's layers (infra/stats_layer.py), by the layer's logical-id part of its name
LAYER_MODULES = {"StatsLayer": ("numpy", "scipy")}


class _LayerOnly(importlib.abc.MetaPathFinder):
    """Refuses the modules of the stack's layers the function does not have, as the
    Lambda runtime would (ModuleNotFoundError)."""

    def __init__(self, blocked: set[str]) -> None:
        self.blocked = blocked

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name.split(".")[0] in self.blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


def _block_missing_layers() -> None:
    have = os.environ.get("IOFLEET_LOCAL_LAYERS", "")
    blocked = {
        module
        for layer, modules in LAYER_MODULES.items()
        if layer not in have
        for module in modules
    }
    if blocked:
        sys.meta_path.insert(0, _LayerOnly(blocked))


def main() -> int:
    out = os.fdopen(int(sys.argv[1]), "w")
    _block_missing_layers()
    module_name, attr = os.environ.get("_HANDLER", "handler.handler").rsplit(".", 1)
    spec = importlib.util.spec_from_file_location(module_name, Path.cwd() / f"{module_name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    handler = getattr(module, attr)
    for line in sys.stdin:
        event = json.loads(line)
        try:
            answer = {"ok": True, "payload": handler(event, LambdaContext())}
        except Exception as exc:  # noqa: BLE001 - becomes the function error, as in Lambda
            answer = {
                "ok": False,
                "payload": {
                    "errorMessage": str(exc),
                    "errorType": type(exc).__name__,
                    "stackTrace": traceback.format_exc().splitlines(),
                },
            }
        out.write(json.dumps(answer, default=str) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
