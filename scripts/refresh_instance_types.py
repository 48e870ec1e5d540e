#!/usr/bin/env python3
"""Refresh iofleet/plan/data/instance_types.json from EC2 DescribeInstanceTypes.

The snapshot is what `iofleet plan` uses offline for instance EBS-optimized
limits (iofleet/plan/expect.py). Run it with credentials for any region:

    scripts/refresh_instance_types.py --region us-east-1
    scripts/refresh_instance_types.py --types m7i.large,c7g.xlarge   # add types

By default it refreshes every type already in the snapshot plus the seeds'
types. `--endpoint-url` points it at another EC2 endpoint (the tests use a
moto server). Needs boto3.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

SNAPSHOT = Path(__file__).resolve().parents[1] / "iofleet" / "plan" / "data" / "instance_types.json"
# The seeds' instance types; always kept in the snapshot.
SEED_TYPES = (
    "c6a.xlarge",
    "m6a.xlarge",
    "r6a.xlarge",
    "m5a.xlarge",
    "m6i.4xlarge",
    "t4g.medium",
    "m5d.large",
)
_BATCH = 100  # DescribeInstanceTypes accepts at most 100 names per call


def transform(instance_type: dict[str, Any]) -> dict[str, Any]:
    """One DescribeInstanceTypes entry -> the snapshot's record for it."""
    ebs = instance_type.get("EbsInfo") or {}
    opt = ebs.get("EbsOptimizedInfo") or {}
    record: dict[str, Any] = {
        "vcpus": (instance_type.get("VCpuInfo") or {}).get("DefaultVCpus"),
        "memory_mib": (instance_type.get("MemoryInfo") or {}).get("SizeInMiB"),
        "ebs_optimized_support": ebs.get("EbsOptimizedSupport"),
        "ebs": None,
        "network": None,
    }
    if opt:
        base_iops, max_iops = opt.get("BaselineIops"), opt.get("MaximumIops")
        base_mbps = opt.get("BaselineThroughputInMBps")
        max_mbps = opt.get("MaximumThroughputInMBps")
        # Older API answers lack the MB/s fields; they are the Mbps figures / 8.
        if base_mbps is None and opt.get("BaselineBandwidthInMbps") is not None:
            base_mbps = opt["BaselineBandwidthInMbps"] / 8
        if max_mbps is None and opt.get("MaximumBandwidthInMbps") is not None:
            max_mbps = opt["MaximumBandwidthInMbps"] / 8
        record["ebs"] = {
            "baseline_iops": base_iops,
            "maximum_iops": max_iops,
            "baseline_throughput_mbps": base_mbps,
            "maximum_throughput_mbps": max_mbps,
            "baseline_bandwidth_mbit": opt.get("BaselineBandwidthInMbps"),
            "maximum_bandwidth_mbit": opt.get("MaximumBandwidthInMbps"),
            "maximum_is_burst": _greater(max_iops, base_iops) or _greater(max_mbps, base_mbps),
        }
    cards = (instance_type.get("NetworkInfo") or {}).get("NetworkCards") or []
    if cards:
        record["network"] = {
            "baseline_gbit": sum(c.get("BaselineBandwidthInGbps") or 0 for c in cards) or None,
            "peak_gbit": sum(c.get("PeakBandwidthInGbps") or 0 for c in cards) or None,
        }
    return record


def _greater(a: float | None, b: float | None) -> bool:
    return a is not None and b is not None and a > b


def fetch(client: Any, names: Sequence[str]) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """(records by type, names EC2 does not know) for `names`."""
    found: dict[str, dict[str, Any]] = {}
    wanted = sorted(set(names))
    for start in range(0, len(wanted), _BATCH):
        batch = wanted[start : start + _BATCH]
        known = _known_subset(client, batch)
        if not known:
            continue
        paginator = client.get_paginator("describe_instance_types")
        for page in paginator.paginate(InstanceTypes=known):
            for entry in page.get("InstanceTypes", []):
                found[entry["InstanceType"]] = transform(entry)
    return found, [n for n in wanted if n not in found]


def _known_subset(client: Any, batch: list[str]) -> list[str]:
    """EC2 rejects the whole call for one unknown name: probe one by one on error."""
    from botocore.exceptions import ClientError

    try:
        client.describe_instance_types(InstanceTypes=batch)
        return batch
    except ClientError:
        pass
    known = []
    for name in batch:
        try:
            client.describe_instance_types(InstanceTypes=[name])
            known.append(name)
        except ClientError:
            continue
    return known


def build_snapshot(
    records: dict[str, dict[str, Any]], *, region: str, endpoint: str | None, today: str
) -> dict[str, Any]:
    return {
        "source": "EC2 DescribeInstanceTypes (EbsInfo.EbsOptimizedInfo, NetworkInfo.NetworkCards)",
        "fetched_from": endpoint or f"ec2.{region}.amazonaws.com",
        "region": region,
        "as_of": today,
        "notes": (
            "throughput in MB/s (10^6 bytes), bandwidth in Mbit/s, IOPS as published "
            "(measured with 16 KiB I/O); maximum_is_burst: the maximum is held for a "
            "limited time (see limits_catalogue.json instance_ebs_burst). "
            "Refresh with scripts/refresh_instance_types.py."
        ),
        "types": {name: records[name] for name in sorted(records)},
    }


def _existing_types(path: Path) -> list[str]:
    try:
        return list(json.loads(path.read_text(encoding="utf-8")).get("types", {}))
    except (OSError, ValueError):
        return []


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--region", default="us-east-1")
    parser.add_argument("--endpoint-url", help="EC2 endpoint (default: AWS)")
    parser.add_argument("--types", default="", help="comma-separated types to add")
    parser.add_argument("--out", type=Path, default=SNAPSHOT)
    args = parser.parse_args(list(argv) if argv is not None else None)

    import boto3

    client = boto3.client("ec2", region_name=args.region, endpoint_url=args.endpoint_url)
    names = set(SEED_TYPES) | set(_existing_types(args.out))
    names |= {t.strip() for t in args.types.split(",") if t.strip()}
    records, missing = fetch(client, sorted(names))
    if missing:
        print(f"refresh_instance_types: not known to EC2: {', '.join(missing)}", file=sys.stderr)
    if not records:
        print("refresh_instance_types: nothing fetched; snapshot left as is", file=sys.stderr)
        return 1
    snapshot = build_snapshot(
        records,
        region=args.region,
        endpoint=args.endpoint_url,
        today=dt.datetime.now(dt.UTC).date().isoformat(),
    )
    args.out.write_text(json.dumps(snapshot, indent=2) + "\n", encoding="utf-8")
    print(f"refresh_instance_types: wrote {len(records)} types to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
