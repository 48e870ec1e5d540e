"""Raw results to S3: the agent's local results directory mirrored under `raw/`.

Stdlib only; the S3 client is passed in (boto3 on the instance, moto in tests).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from iofleet.aws.keys import raw_key


class S3ResultsStore:
    def __init__(self, s3: Any, bucket: str) -> None:
        self.s3 = s3
        self.bucket = bucket

    def put(self, relpath: str, body: bytes) -> str:
        key = raw_key(relpath)
        self.s3.put_object(Bucket=self.bucket, Key=key, Body=body, ContentType="application/json")
        return key

    def upload_tree(self, root: Path) -> list[str]:
        """Upload every file under `root` (run_id/cell_id/slot-N/...), manifest
        first and `slot.json` last, so `slot.json` marks a complete slot."""
        files = sorted(p for p in root.rglob("*") if p.is_file())
        files.sort(key=lambda p: (p.name == "slot.json", p.name != "manifest.json", str(p)))
        return [self.put(p.relative_to(root).as_posix(), p.read_bytes()) for p in files]
