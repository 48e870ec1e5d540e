"""moto server that logs each request's `X-Amz-Target` (bench's Trino figure).

`python -m bench.motolog -H HOST -p PORT` runs `moto.server.main` with a hook
that writes `TARGET <service>.<operation>` to stderr (the engine's log) as each
JSON-protocol request (Glue, Athena, ...) arrives, so the bench can count which
Glue calls Trino made during one query. S3 requests have no target; werkzeug's
own access-log line counts them.
"""

from __future__ import annotations

import sys
from typing import Any

from moto import server
from moto.moto_server.werkzeug_app import DomainDispatcherApplication

_dispatch = DomainDispatcherApplication.__call__


def _logged(self: Any, environ: dict[str, Any], start_response: Any) -> Any:
    target = environ.get("HTTP_X_AMZ_TARGET")
    if target:
        sys.stderr.write(f"TARGET {target}\n")
        sys.stderr.flush()
    return _dispatch(self, environ, start_response)


DomainDispatcherApplication.__call__ = _logged  # type: ignore[method-assign]

if __name__ == "__main__":
    server.main(sys.argv[1:])
