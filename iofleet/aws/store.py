"""Raw results to S3: the agent's local results directory mirrored under `raw/<owner>/`.

Stdlib only; the S3 client is passed in (boto3 on the instance, moto in tests).

Every object is written once: PutObject with `If-None-Match: *` (S3 conditional writes),
which the instance role's policy requires, so nothing replaces a raw object already there.
A retry of this instance's own upload (a lost answer, a second pass) finds its object
there (412 Precondition Failed): it is fine when the stored object has the same content
(ETag = MD5 of a single-part, SSE-S3 PutObject), and an error when it differs.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from iofleet.aws.keys import raw_key

CONFLICT_RETRIES = 3  # 409 ConditionalRequestConflict: a concurrent write of the same key


class RawObjectExists(Exception):  # noqa: N818 - says what happened
    """A raw object with this key and other content is already in the bucket."""


def _code(exc: Exception) -> str:
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return ""
    return str((response.get("Error") or {}).get("Code") or "")


def _if_none_match(request: Any, **kwargs: Any) -> None:
    request.headers["If-None-Match"] = "*"


class S3ResultsStore:
    def __init__(self, s3: Any, bucket: str, owner: str | None = None) -> None:
        self.s3 = s3
        self.bucket = bucket
        self.owner = owner  # the instance's aws:userid: its own prefix under raw/
        # the header, not put_object's IfNoneMatch parameter: the distros' python3-boto3
        # (Ubuntu 24.04: 1.34) predates it; the header is signed like any other
        s3.meta.events.register(
            "before-sign.s3.PutObject", _if_none_match, unique_id="iofleet-if-none-match"
        )

    def put(self, relpath: str, body: bytes) -> str:
        key = raw_key(relpath, self.owner)
        for attempt in range(CONFLICT_RETRIES):
            try:
                self.s3.put_object(
                    Bucket=self.bucket, Key=key, Body=body, ContentType="application/json"
                )
                return key
            except Exception as exc:
                code = _code(exc)
                if code == "PreconditionFailed":
                    self._same_or_raise(key, body)
                    return key
                if code == "ConditionalRequestConflict" and attempt + 1 < CONFLICT_RETRIES:
                    continue
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _same_or_raise(self, key: str, body: bytes) -> None:
        etag = str(self.s3.head_object(Bucket=self.bucket, Key=key).get("ETag", "")).strip('"')
        if etag != hashlib.md5(body, usedforsecurity=False).hexdigest():
            raise RawObjectExists(
                f"s3://{self.bucket}/{key} already exists with other content; not replaced"
            )

    def upload_tree(self, root: Path) -> list[str]:
        """Upload every file under `root` (run_id/cell_id/slot-N/...), manifest
        first and `slot.json` last, so `slot.json` marks a complete slot."""
        files = sorted(p for p in root.rglob("*") if p.is_file())
        files.sort(key=lambda p: (p.name == "slot.json", p.name != "manifest.json", str(p)))
        return [self.put(p.relative_to(root).as_posix(), p.read_bytes()) for p in files]
