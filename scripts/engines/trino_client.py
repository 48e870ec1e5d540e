"""A tiny stdlib client for Trino's HTTP protocol (enough for tests).

`POST /v1/statement` with the SQL, then follow `nextUri` until it disappears,
collecting `columns` and `data`. An error in any response raises `TrinoError`
with Trino's own one-line message.
"""

from __future__ import annotations

import json
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Any


class TrinoError(RuntimeError):
    """A query failed in Trino (message is Trino's, with its error name)."""


@dataclass
class QueryResult:
    columns: list[str] = field(default_factory=list)
    types: list[str] = field(default_factory=list)
    rows: list[list[Any]] = field(default_factory=list)
    # the final StatementStats (physicalInputBytes: bytes read from storage, ...)
    stats: dict[str, Any] = field(default_factory=dict)

    def dicts(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]

    def scalar(self) -> Any:
        if len(self.rows) != 1 or len(self.rows[0]) != 1:
            raise TrinoError(f"expected one value, got {len(self.rows)} rows")
        return self.rows[0][0]


@dataclass
class TrinoClient:
    endpoint: str  # http://127.0.0.1:PORT
    catalog: str | None = None
    schema: str | None = None
    user: str = "iofleet"
    timeout_s: float = 120.0

    def _headers(self) -> dict[str, str]:
        headers = {"X-Trino-User": self.user, "X-Trino-Source": "iofleet-tests"}
        if self.catalog:
            headers["X-Trino-Catalog"] = self.catalog
        if self.schema:
            headers["X-Trino-Schema"] = self.schema
        return headers

    def _call(self, request: urllib.request.Request) -> dict[str, Any]:
        with urllib.request.urlopen(request, timeout=60) as response:
            payload: dict[str, Any] = json.loads(response.read())
        return payload

    def execute(self, sql: str) -> QueryResult:
        """Run one statement to completion and return all its rows."""
        request = urllib.request.Request(
            f"{self.endpoint}/v1/statement",
            data=sql.encode("utf-8"),
            headers=self._headers(),
            method="POST",
        )
        payload = self._call(request)
        result = QueryResult()
        deadline = time.monotonic() + self.timeout_s
        while True:
            error = payload.get("error")
            if error:
                name = error.get("errorName", "ERROR")
                raise TrinoError(f"{name}: {error.get('message', 'query failed')}")
            if not result.columns and payload.get("columns"):
                result.columns = [c["name"] for c in payload["columns"]]
                result.types = [c["type"] for c in payload["columns"]]
            result.rows.extend(payload.get("data") or [])
            result.stats = payload.get("stats") or result.stats
            next_uri = payload.get("nextUri")
            if not next_uri:
                return result
            if time.monotonic() > deadline:
                raise TrinoError(f"query still running after {self.timeout_s:.0f} s: {sql[:80]}")
            # No pause needed: Trino holds each nextUri request open (long poll)
            # until it has data or a new state.
            payload = self._call(urllib.request.Request(next_uri, headers=self._headers()))
