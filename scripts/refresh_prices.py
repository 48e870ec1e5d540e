#!/usr/bin/env python3
"""Refresh EC2 on-demand prices in iofleet/plan/data/prices.json from the AWS Pricing API.

    scripts/refresh_prices.py --region eu-central-1            # types already listed
    scripts/refresh_prices.py --region us-east-1 --types m7i.large

Only `ec2_hourly` is refreshed (Linux, shared tenancy, no pre-installed
software, on-demand); other sections stay as they are. A type the API has no
price for is dropped from the region, so `iofleet plan` reports it unknown.
Needs boto3 and credentials (the Pricing API answers from us-east-1).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

PRICES = Path(__file__).resolve().parents[1] / "iofleet" / "plan" / "data" / "prices.json"


def on_demand_hourly(price_item: str | dict[str, Any]) -> tuple[str, float] | None:
    """(instance type, USD per hour) from one GetProducts PriceList entry."""
    item = json.loads(price_item) if isinstance(price_item, str) else price_item
    attributes = item.get("product", {}).get("attributes", {})
    instance_type = attributes.get("instanceType")
    for term in item.get("terms", {}).get("OnDemand", {}).values():
        for dimension in term.get("priceDimensions", {}).values():
            if dimension.get("unit") != "Hrs":
                continue
            usd = dimension.get("pricePerUnit", {}).get("USD")
            if instance_type and usd is not None and float(usd) > 0:
                return instance_type, float(usd)
    return None


def _filters(region: str, instance_type: str) -> list[dict[str, str]]:
    pairs = {
        "regionCode": region,
        "instanceType": instance_type,
        "operatingSystem": "Linux",
        "tenancy": "Shared",
        "preInstalledSw": "NA",
        "capacitystatus": "Used",
    }
    return [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in pairs.items()]


def fetch_hourly(client: Any, region: str, types: Iterable[str]) -> dict[str, float]:
    prices: dict[str, float] = {}
    for instance_type in sorted(set(types)):
        answer = client.get_products(
            ServiceCode="AmazonEC2", Filters=_filters(region, instance_type), MaxResults=10
        )
        for entry in answer.get("PriceList", []):
            found = on_demand_hourly(entry)
            if found and found[0] == instance_type:
                prices[instance_type] = found[1]
                break
    return prices


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--region", required=True)
    parser.add_argument("--types", default="", help="comma-separated types to add")
    parser.add_argument("--out", type=Path, default=PRICES)
    parser.add_argument("--endpoint-url")
    args = parser.parse_args(list(argv) if argv is not None else None)

    import boto3

    table = json.loads(args.out.read_text(encoding="utf-8"))
    region = table["regions"].setdefault(args.region, {})
    types = set(region.get("ec2_hourly", {})) | {t for t in args.types.split(",") if t}
    client = boto3.client("pricing", region_name="us-east-1", endpoint_url=args.endpoint_url)
    hourly = fetch_hourly(client, args.region, types)
    missing = sorted(types - set(hourly))
    if missing:
        print(f"refresh_prices: no price for {', '.join(missing)}", file=sys.stderr)
    region["ec2_hourly"] = dict(sorted(hourly.items()))
    table["as_of"] = dt.datetime.now(dt.UTC).date().isoformat()
    args.out.write_text(json.dumps(table, indent=2) + "\n", encoding="utf-8")
    print(f"refresh_prices: {len(hourly)} prices for {args.region} in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
