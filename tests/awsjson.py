"""An HTTP handler that speaks the AWS JSON 1.1 protocol, for hand-written stand-ins of
services no local engine serves (Athena on Trino, the Price List API)."""

from __future__ import annotations

import json
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

Call = Callable[[str, dict[str, Any]], tuple[int, dict[str, Any]]]


def json11_handler(call: Call) -> type[BaseHTTPRequestHandler]:
    """A handler class answering each POST with `call(operation, body)`: the operation is
    the X-Amz-Target's last part, the answer (status, document) is sent as JSON 1.1."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            status, answer = call(self.headers.get("X-Amz-Target", "").rpartition(".")[2], body)
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/x-amz-json-1.1")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    return Handler
