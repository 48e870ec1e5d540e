"""A stand-in for S3 Express One Zone directory buckets over moto's S3 (moto 5.2.5 has none).

moto's S3 refuses CreateBucket with a `Bucket: {Type: Directory}` configuration, and boto3
sends any `--x-s3` name to the zonal `s3express-...` endpoints that moto cannot serve. So
this wraps a moto S3 client: a directory bucket `base--azid--x-s3` is kept as the moto
bucket `sx-<base>-<azid>` (its zone remembered), every call naming a directory bucket is
passed on with that name, and ListDirectoryBuckets lists them. What it cannot show:
CreateSession, the zonal endpoint, the zone's placement, directory-bucket naming rules
beyond the suffix; those are checked on AWS only (docs/local-cloud.md).
"""

from __future__ import annotations

import re
from typing import Any

_DIRECTORY = re.compile(r"^(?P<base>.+)--(?P<az>[a-z0-9-]+)--x-s3$")


class DirectoryBucketStandIn:
    def __init__(self, s3: Any) -> None:
        self._s3 = s3
        self.zones: dict[str, str] = {}  # directory bucket -> AZ ID it was created in
        self.calls: list[tuple[str, str]] = []  # (operation, bucket) on directory buckets

    @staticmethod
    def backing(name: str) -> str:
        m = _DIRECTORY.match(name)
        return f"sx-{m['base']}-{m['az']}"[:63] if m else name

    def create_bucket(self, **kw: Any) -> Any:
        name = kw["Bucket"]
        config = kw.get("CreateBucketConfiguration") or {}
        if config.get("Bucket", {}).get("Type") == "Directory":
            m = _DIRECTORY.match(name)
            zone = config["Location"]["Name"]
            if not m or m["az"] != zone or config["Location"]["Type"] != "AvailabilityZone":
                raise ValueError(f"stand-in: {name!r} is not a directory bucket name for {zone}")
            self.zones[name] = zone
            self.calls.append(("CreateBucket", name))
            return self._s3.create_bucket(Bucket=self.backing(name))
        return self._s3.create_bucket(**kw)

    def list_directory_buckets(self, **kw: Any) -> dict[str, Any]:
        return {"Buckets": [{"Name": n} for n in sorted(self.zones)]}

    def list_buckets(self, **kw: Any) -> dict[str, Any]:
        out = self._s3.list_buckets(**kw)
        backing = {self.backing(n) for n in self.zones}
        out["Buckets"] = [b for b in out["Buckets"] if b["Name"] not in backing]
        return dict(out)

    def delete_bucket(self, **kw: Any) -> Any:
        name = kw["Bucket"]
        out = self._s3.delete_bucket(**{**kw, "Bucket": self.backing(name)})
        if name in self.zones:
            del self.zones[name]
            self.calls.append(("DeleteBucket", name))
        return out

    def __getattr__(self, op: str) -> Any:
        method = getattr(self._s3, op)

        def call(**kw: Any) -> Any:
            if "Bucket" in kw:
                kw = {**kw, "Bucket": self.backing(kw["Bucket"])}
            return method(**kw)

        return call
