#!/usr/bin/env python3
"""Refresh on-demand prices in iofleet/plan/data/prices.json from the AWS Price List Query API.

    scripts/refresh_prices.py --region eu-central-1            # EC2: the types already listed
    scripts/refresh_prices.py --region us-east-1 --types m7i.large
    scripts/refresh_prices.py --region us-east-1 --fsx         # FSx for OpenZFS and Lustre
    scripts/refresh_prices.py --region us-east-1 --fsx --partial

Without --fsx only `ec2_hourly` is refreshed (Linux, shared tenancy, no
pre-installed software, on-demand); a type the API has no price for is dropped
from the region, so `iofleet plan` reports it unknown.

With --fsx only the region's `fsx-openzfs` and `fsx-lustre` sections are
refreshed, and every rate must pass strict checks or stay null (see FSX_RATES
and docs/decisions.md, record 40): the attribute names must be AmazonFSx's
(DescribeServices), each value one AmazonFSx lists (GetAttributeValues), the
GetProducts filter must match exactly one product, of that product family and
those attributes, with exactly one OnDemand price dimension in USD in the
expected unit. A refused rate is printed as `fsx.<deployment>.<rate>: <reason>`
on stderr. Deployment types whose Price List attributes could not be verified
(UNMAPPED) are never queried; they stay out of the table and are listed as
`not refreshed`. Exit status: 0 every queried rate written; 1 a rate refused or
the Price List is not what this script was written for, nothing written; 3
(--partial only) the rates that passed written, the refused ones null; 2 a bad
command line or --out file. The file is replaced atomically (temp file + rename), in
its own layout (`dump_table`: a record of rates on one line, an instance type a line,
numbers spelled as they were), so its diff shows the rates that changed.

Needs boto3 and credentials (the Price List API answers from us-east-1).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import sys
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PRICES = Path(__file__).resolve().parents[1] / "iofleet" / "plan" / "data" / "prices.json"

EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_PARTIAL = 0, 1, 2, 3


# --------------------------------------------------------------------------- EC2


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


# --------------------------------------------------------------------------- FSx

FSX_SERVICE = "AmazonFSx"
OPENZFS, LUSTRE = "fsx-openzfs", "fsx-lustre"

# Where each attribute name and value below was seen (docs/decisions.md, record 40).
# None of them comes from an AWS document that lists AmazonFSx's attributes: no such
# page could be read here. They are therefore checked against AWS itself at every run
# (DescribeServices for the names, GetAttributeValues for the values), and a rate is
# only written when its filter matches exactly one product carrying those values.
EVIDENCE = {
    "offer-file": (
        "the AmazonFSx offer file's columns (Deployment option, File system type, Storage "
        "type, Throughput capacity, Region Code), as listed in "
        "Bjorn248/graphql_aws_pricing_api SCHEMATA.md"
    ),
    "infracost": (
        "infracost/infracost internal/resources/aws/fsx_openzfs_file_system.go: AmazonFSx, "
        "productFamily Storage / Provisioned Throughput / Provisioned IOPS, fileSystemType "
        "OpenZFS, deploymentOption Single-AZ, storageType SSD; its golden test prices them "
        "from its copy of the Price List"
    ),
    "fsx-clients": (
        "GetProducts clients of AmazonFSx for ONTAP (a TypeScript pricing service in the "
        "public code index; a Python cost tool's tests with units GB-Mo, MiBps-Mo and "
        "IOPS-Mo it says were confirmed against the Price List API): regionCode, "
        "productFamily, fileSystemType, deploymentOption Multi-AZ"
    ),
    "fixtures": (
        "two third-party test fixtures, written by hand, that agree on fileSystemType "
        "Lustre, storageType SSD and throughputCapacity '125' for a PERSISTENT_2 storage "
        "product in GB-Mo (they disagree on deploymentOption, which is not used)"
    ),
}

# Each (attribute, value) the filters use, and the EVIDENCE it rests on. throughputCapacity
# values other than "125" are the per-unit throughputs of CreateFileSystem (MB/s/TiB); that
# the Price List spells them the same way is known for "125" only, hence the live checks.
SEEN: dict[tuple[str, str], tuple[str, ...]] = {
    ("regionCode", "*"): ("offer-file", "fsx-clients"),
    ("productFamily", "Storage"): ("infracost", "fsx-clients", "fixtures"),
    ("productFamily", "Provisioned Throughput"): ("infracost", "fsx-clients"),
    ("productFamily", "Provisioned IOPS"): ("infracost", "fsx-clients"),
    ("fileSystemType", "OpenZFS"): ("offer-file", "infracost"),
    ("fileSystemType", "Lustre"): ("offer-file", "fixtures"),
    ("deploymentOption", "Single-AZ"): ("offer-file", "infracost"),
    ("deploymentOption", "Multi-AZ"): ("offer-file", "fsx-clients"),
    ("storageType", "SSD"): ("offer-file", "infracost", "fixtures"),
    **{("throughputCapacity", str(t)): ("offer-file", "fixtures") for t in (125,)},
    **{("throughputCapacity", str(t)): ("offer-file",) for t in (50, 100, 200, 250, 500, 1000)},
}

# deploymentOption of FSx for OpenZFS per deployment type, and why.
OPENZFS_DEPLOYMENT_OPTION = {
    "SINGLE_AZ_1": "Single-AZ",  # infracost (the only OpenZFS deployment when it was written)
    "MULTI_AZ_1": "Multi-AZ",  # fsx-clients; the only Multi-AZ OpenZFS deployment type
}
# Deployment types never queried: no verified value tells them apart.
UNMAPPED = {
    OPENZFS: {
        "SINGLE_AZ_2": "no verified Price List deploymentOption value for it (a third-party "
        "fixture's 'Single-AZ_2' is unconfirmed)",
        "SINGLE_AZ_HA_1": "no verified Price List deploymentOption value for it",
        "SINGLE_AZ_HA_2": "no verified Price List deploymentOption value for it",
    },
    LUSTRE: {
        "SCRATCH_2": "no verified Price List attribute tells SCRATCH_2 storage apart (the "
        "deploymentOption values seen disagree: 'Scratch2' in one fixture, none in another)",
    },
}
LUSTRE_TIERS = {"PERSISTENT_1": (50, 100, 200), "PERSISTENT_2": (125, 250, 500, 1000)}

# The units a rate may be priced in, as the Price List spells them. Throughput capacity
# is configured in MBps (CreateFileSystem) and billed per MBps-month (the pricing page);
# the Price List has been seen to spell that unit MiBps-Mo (fsx-clients).
GB_MONTH = frozenset({"GB-Mo"})
THROUGHPUT_MONTH = frozenset({"MiBps-Mo", "MBps-Mo"})
IOPS_MONTH = frozenset({"IOPS-Mo"})


@dataclass(frozen=True)
class FsxRate:
    """One rate of prices.json's FSx sections and the GetProducts filter that prices it."""

    section: str  # fsx-openzfs / fsx-lustre
    deployment: str
    path: tuple[str, ...]  # below deployment_types.<deployment>
    product_family: str
    attributes: tuple[tuple[str, str], ...]  # besides regionCode and productFamily
    units: frozenset[str]

    @property
    def name(self) -> str:
        return ".".join(("fsx", self.deployment, *self.path))


def _openzfs_rates() -> list[FsxRate]:
    rates: list[FsxRate] = []
    for deployment, option in OPENZFS_DEPLOYMENT_OPTION.items():
        common = (("fileSystemType", "OpenZFS"), ("deploymentOption", option))
        rates += [
            FsxRate(
                OPENZFS,
                deployment,
                ("ssd_gib_month",),
                "Storage",
                (*common, ("storageType", "SSD")),
                GB_MONTH,
            ),
            FsxRate(
                OPENZFS,
                deployment,
                ("throughput_mbps_month",),
                "Provisioned Throughput",
                common,
                THROUGHPUT_MONTH,
            ),
            FsxRate(OPENZFS, deployment, ("iops_month",), "Provisioned IOPS", common, IOPS_MONTH),
        ]
    return rates


def _lustre_rates() -> list[FsxRate]:
    return [
        FsxRate(
            LUSTRE,
            deployment,
            ("gib_month", str(tier)),
            "Storage",
            (
                ("fileSystemType", "Lustre"),
                ("storageType", "SSD"),
                ("throughputCapacity", str(tier)),
            ),
            GB_MONTH,
        )
        for deployment, tiers in LUSTRE_TIERS.items()
        for tier in tiers
    ]


FSX_RATES: tuple[FsxRate, ...] = (*_openzfs_rates(), *_lustre_rates())


class Refused(Exception):
    """The Price List answer is not one this script can turn into a rate without guessing."""


def _pages(call: Any, key: str, **kwargs: Any) -> Iterator[Any]:
    token = None
    while True:
        answer = call(**kwargs, **({"NextToken": token} if token else {}))
        yield from answer.get(key, [])
        token = answer.get("NextToken")
        if not token:
            return


def attribute_names(client: Any) -> set[str]:
    names: set[str] = set()
    for service in _pages(client.describe_services, "Services", ServiceCode=FSX_SERVICE):
        if service.get("ServiceCode") == FSX_SERVICE:
            names.update(service.get("AttributeNames") or [])
    return names


def attribute_values(client: Any, name: str) -> set[str]:
    return {
        v.get("Value")
        for v in _pages(
            client.get_attribute_values,
            "AttributeValues",
            ServiceCode=FSX_SERVICE,
            AttributeName=name,
        )
    }


def rate_of(item: str | dict[str, Any], rate: FsxRate, region: str) -> tuple[float, str]:
    """(USD per unit, sku) of one GetProducts PriceList entry, or Refused with the reason."""
    entry = json.loads(item) if isinstance(item, str) else item
    product = entry.get("product") or {}
    attrs = product.get("attributes") or {}
    sku = product.get("sku") or "?"
    if entry.get("serviceCode", FSX_SERVICE) != FSX_SERVICE:
        raise Refused(f"product {sku} is of service {entry.get('serviceCode')!r}")
    if product.get("productFamily") != rate.product_family:
        raise Refused(
            f"product {sku} is of product family {product.get('productFamily')!r}, "
            f"not {rate.product_family!r}"
        )
    for name, value in (("regionCode", region), *rate.attributes):
        if attrs.get(name) != value:
            raise Refused(f"product {sku} has {name} {attrs.get(name)!r}, not {value!r}")
    terms = entry.get("terms") or {}
    others = sorted(k for k in terms if k != "OnDemand")
    if others:
        raise Refused(f"product {sku} has {', '.join(others)} terms, not OnDemand alone")
    on_demand = list((terms.get("OnDemand") or {}).values())
    if len(on_demand) != 1:
        raise Refused(f"product {sku} has {len(on_demand)} OnDemand terms, expected 1")
    dimensions = list((on_demand[0].get("priceDimensions") or {}).values())
    if len(dimensions) != 1:
        raise Refused(f"product {sku} has {len(dimensions)} price dimensions, expected 1")
    (dim,) = dimensions
    unit = dim.get("unit")
    if unit not in rate.units:
        raise Refused(f"unit {unit!r}, expected {' or '.join(sorted(rate.units))}")
    if str(dim.get("beginRange", "0")) != "0" or str(dim.get("endRange", "Inf")) != "Inf":
        raise Refused(f"a tiered price ({dim.get('beginRange')} to {dim.get('endRange')})")
    per_unit = dim.get("pricePerUnit") or {}
    if set(per_unit) != {"USD"}:
        raise Refused(f"priced in {', '.join(sorted(per_unit)) or 'no currency'}, not USD")
    try:
        usd = float(per_unit["USD"])
    except (TypeError, ValueError):
        raise Refused(f"price {per_unit['USD']!r} is not a number") from None
    if not math.isfinite(usd) or usd < 0:
        raise Refused(f"price {per_unit['USD']!r} is not a price")
    return usd, sku


def fetch_rate(client: Any, rate: FsxRate, region: str) -> tuple[float, str]:
    pairs = (("regionCode", region), ("productFamily", rate.product_family), *rate.attributes)
    filters = [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in pairs]
    found = list(
        _pages(
            client.get_products,
            "PriceList",
            ServiceCode=FSX_SERVICE,
            Filters=filters,
            FormatVersion="aws_v1",
            MaxResults=100,
        )
    )
    if len(found) != 1:
        shown = ", ".join(f"{k}={v}" for k, v in pairs)
        raise Refused(f"{len(found)} products match {shown}, expected exactly 1")
    return rate_of(found[0], rate, region)


@dataclass
class FsxResult:
    rates: dict[FsxRate, tuple[float, str]]
    refused: dict[FsxRate, str]
    fatal: str | None = None


def fetch_fsx(client: Any, region: str) -> FsxResult:
    """Every FSX_RATES rate for `region`, or why it was refused."""
    result = FsxResult({}, {})
    names = {"regionCode", *(n for r in FSX_RATES for n, _ in r.attributes)}
    known = attribute_names(client)
    missing = sorted(names - known)
    if missing:
        result.fatal = (
            f"fsx: {FSX_SERVICE} has no attribute {', '.join(missing)} (DescribeServices): "
            "the Price List is not what this script was written for"
        )
        return result
    values = {n: attribute_values(client, n) for n in sorted(names)}
    if region not in values["regionCode"]:
        result.fatal = f"fsx: {region} is not a regionCode {FSX_SERVICE} has prices for"
        return result
    for rate in FSX_RATES:
        absent = [(n, v) for n, v in rate.attributes if v not in values[n]]
        if absent:
            result.refused[rate] = "; ".join(
                f"{n} {v!r} is not a value {FSX_SERVICE} lists (GetAttributeValues)"
                for n, v in absent
            )
            continue
        try:
            result.rates[rate] = fetch_rate(client, rate, region)
        except Refused as why:
            result.refused[rate] = str(why)
    return result


def fsx_sections(result: FsxResult) -> dict[str, dict[str, Any]]:
    """The region's fsx-openzfs and fsx-lustre sections: found rates, refused ones null."""
    sections: dict[str, dict[str, Any]] = {OPENZFS: {}, LUSTRE: {}}
    for rate in FSX_RATES:
        found = result.rates.get(rate)
        node = sections[rate.section].setdefault("deployment_types", {})
        node = node.setdefault(rate.deployment, {})
        for key in rate.path[:-1]:
            node = node.setdefault(key, {})
        node[rate.path[-1]] = None if found is None else found[0]
    return sections


def write_atomically(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _refresh_fsx(client: Any, table: dict[str, Any], region: str, partial: bool) -> int:
    result = fetch_fsx(client, region)
    for unmapped in UNMAPPED.values():
        for deployment, why in unmapped.items():
            print(f"refresh_prices: fsx.{deployment}: not refreshed: {why}", file=sys.stderr)
    if result.fatal:
        print(f"refresh_prices: {result.fatal}; nothing written", file=sys.stderr)
        return EXIT_REFUSED
    for rate, why in result.refused.items():
        print(f"refresh_prices: {rate.name}: {why}", file=sys.stderr)
    if result.refused and not partial:
        print(
            f"refresh_prices: {len(result.refused)} FSx rates refused; nothing written "
            "(--partial writes the others)",
            file=sys.stderr,
        )
        return EXIT_REFUSED
    if not result.rates:
        print("refresh_prices: no FSx rate passed; nothing written", file=sys.stderr)
        return EXIT_REFUSED
    today = dt.datetime.now(dt.UTC).date().isoformat()
    region_of(table, region).update(fsx_sections(result))
    for section in (OPENZFS, LUSTRE):
        record = table.setdefault("sections", {}).setdefault(section, {})
        record.setdefault("refreshed", {})[region] = {
            "as_of": today,
            "source": (
                f"AWS Price List Query API, GetProducts ServiceCode={FSX_SERVICE} "
                f"regionCode={region}, OnDemand USD (scripts/refresh_prices.py --fsx)"
            ),
            "skus": {r.name: sku for r, (_, sku) in result.rates.items() if r.section == section},
            "refused": {r.name: why for r, why in result.refused.items() if r.section == section},
            "not_refreshed": UNMAPPED[section],
        }
    return EXIT_PARTIAL if result.refused else EXIT_OK


# ----------------------------------------------------------------- the file's layout

# prices.json is laid out by hand for reading and for diffs: a record of rates on one
# line (`"gp2": {"gib_month": 0.10}`), one line per instance type, numbers spelled as
# written (0.10, 6.00). `load_table` keeps each number's spelling and `dump_table`
# writes that layout, so a refresh changes the lines of the rates it changed only.
WIDTH = 140  # a record or list longer than this on one line is one entry a line
ONE_PER_LINE = frozenset({"ec2_hourly"})  # grows with every type added: a line each


class Number(float):
    """A number read from the file, with its spelling (0.10 is written back as 0.10)."""

    text: str

    def __new__(cls, text: str) -> Number:
        number = super().__new__(cls, text)
        number.text = text
        return number


def load_table(text: str) -> Any:
    return json.loads(text, parse_float=Number)


def keep_spelling(old: Any, new: Any) -> Any:
    """`new`, with each number equal to the one at the same place in `old` spelled as
    there (a refresh that finds a rate unchanged leaves its line as it was)."""
    if isinstance(old, dict) and isinstance(new, dict):
        return {k: keep_spelling(old.get(k), v) if k in old else v for k, v in new.items()}
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [keep_spelling(o, n) for o, n in zip(old, new, strict=True)]
    if (
        isinstance(old, Number)
        and isinstance(new, (int, float))
        and not isinstance(new, bool)
        and float(old) == float(new)
    ):
        return old
    return new


def _scalar(value: Any) -> str:
    if isinstance(value, Number):
        return value.text
    return json.dumps(value, ensure_ascii=False)


def _flat(value: Any) -> bool:
    """A scalar, or a list of scalars or of flat lists (io2's tiers)."""
    if isinstance(value, list):
        return all(_flat(v) and not isinstance(v, dict) for v in value)
    return not isinstance(value, dict)


def _one_line(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {_one_line(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_one_line(v) for v in value) + "]"
    return _scalar(value)


def _render(value: Any, indent: int, head: str, key: str | None, out: list[str], tail: str) -> None:
    pad = " " * indent
    leaf = (isinstance(value, dict) and all(_flat(v) for v in value.values())) or (
        isinstance(value, list) and _flat(value)
    )
    if not isinstance(value, (dict, list)) or not value:
        out.append(f"{pad}{head}{_one_line(value)}{tail}")
        return
    if leaf and key not in ONE_PER_LINE:
        line = f"{pad}{head}{_one_line(value)}{tail}"
        if len(line) <= WIDTH:
            out.append(line)
            return
    opening, closing = ("{", "}") if isinstance(value, dict) else ("[", "]")
    out.append(f"{pad}{head}{opening}")
    items = list(value.items()) if isinstance(value, dict) else [(None, v) for v in value]
    for i, (k, v) in enumerate(items):
        sub_head = f"{json.dumps(k)}: " if k is not None else ""
        _render(v, indent + 2, sub_head, k, out, "," if i < len(items) - 1 else "")
    out.append(f"{pad}{closing}{tail}")


def dump_table(table: Any) -> str:
    """The table as text in the file's layout (see above)."""
    out: list[str] = []
    _render(table, 0, "", None, out, "")
    return "\n".join(out) + "\n"


def new_region(table: dict[str, Any]) -> dict[str, Any]:
    """A Region the table does not have yet: every section the other Regions have, null
    (unknown) until a refresh fills it. A refresh fills one kind of section (EC2 or FSx):
    the entry says what it lacks, and does not look like a priced Region (a plan prices
    those sections `unknown`, and a budget is refused: docs/decisions.md, record 41)."""
    sections: dict[str, Any] = {}
    for region in table["regions"].values():
        if isinstance(region, dict):
            sections.update(dict.fromkeys(region))
    return dict.fromkeys(sections)


def region_of(table: dict[str, Any], region: str) -> dict[str, Any]:
    regions = table["regions"]
    if not isinstance(regions.get(region), dict):
        regions[region] = new_region(table)
    return regions[region]


# --------------------------------------------------------------------------- CLI


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--region", required=True)
    parser.add_argument("--types", default="", help="comma-separated EC2 types to add")
    parser.add_argument(
        "--fsx", action="store_true", help="refresh the FSx sections instead of ec2_hourly"
    )
    parser.add_argument(
        "--partial",
        action="store_true",
        help="with --fsx: write the rates that passed even if others were refused (exit 3)",
    )
    parser.add_argument("--out", type=Path, default=PRICES)
    parser.add_argument("--endpoint-url")
    args = parser.parse_args(list(argv) if argv is not None else None)
    if args.partial and not args.fsx:
        parser.error("--partial applies to --fsx only")

    try:
        text = args.out.read_text(encoding="utf-8")
        table, shipped = load_table(text), load_table(text)
    except (OSError, ValueError) as err:
        print(f"{args.out}: cannot read the price table: {err}", file=sys.stderr)
        return EXIT_USAGE
    if not isinstance(table, dict) or not isinstance(table.get("regions"), dict):
        print(f"{args.out}: not a price table (no `regions` object)", file=sys.stderr)
        return EXIT_USAGE

    import boto3

    client = boto3.client("pricing", region_name="us-east-1", endpoint_url=args.endpoint_url)
    if args.fsx:
        code = _refresh_fsx(client, table, args.region, args.partial)
        if code in (EXIT_OK, EXIT_PARTIAL):
            write_atomically(args.out, dump_table(keep_spelling(shipped, table)))
            print(f"refresh_prices: FSx rates for {args.region} in {args.out}")
        return code

    region = region_of(table, args.region)
    types = set(region.get("ec2_hourly") or {}) | {t for t in args.types.split(",") if t}
    hourly = fetch_hourly(client, args.region, types)
    missing = sorted(types - set(hourly))
    if missing:
        print(f"refresh_prices: no price for {', '.join(missing)}", file=sys.stderr)
    region["ec2_hourly"] = dict(sorted(hourly.items()))
    table["as_of"] = dt.datetime.now(dt.UTC).date().isoformat()
    write_atomically(args.out, dump_table(keep_spelling(shipped, table)))
    print(f"refresh_prices: {len(hourly)} prices for {args.region} in {args.out}")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
