"""The shape of a price table, and a matrix's own prices laid over the shipped one.

`data/prices.json` ships dated list prices per region; a rate it lacks is
`unknown` in the plan, never guessed (iofleet.plan.cost). A matrix may bring
its own rates in `prices` (the rates of an enterprise agreement, or rates the
shipped table lacks, such as FSx's), with where they come from:

    "prices": {
      "as_of": "2026-11-20",
      "source": "AWS Pricing API, AmazonFSx, us-east-1",
      "regions": {"us-east-1": {"fsx-openzfs": {"deployment_types": {
          "SINGLE_AZ_1": {"ssd_gib_month": ..., "throughput_mbps_month": ...}}}}}
    }

`problems` checks such a table against `SHAPE` (the same shape as a region of
prices.json; a test holds the shipped table to it too) and names each wrong
leaf by its path; `region_prices` lays the matrix's rates over the shipped
region, leaf by leaf. Stdlib only (the plan Lambda imports it).
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Mapping
from typing import Any

from iofleet.plan.limits import INSTANCE_TYPE_RE
from iofleet.quote import quote

Loc = tuple[str | int, ...]

# Leaf kinds
RATE = "rate"  # USD per unit: a finite number >= 0, or null (unknown)
COUNT = "count"  # an included quantity: an integer >= 0
TIERS = "tiers"  # [[up_to or null, rate or null], ...], up_to increasing, the last null

_REGION_RE = re.compile(r"^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}$")


class Names:
    """A mapping whose keys are names of one kind (instance types, deployment types)."""

    def __init__(self, what: str, allowed: Any, value: Any) -> None:
        self.what = what
        self.allowed = allowed  # a compiled regex or a callable returning the valid names
        self.value = value

    def accepts(self, key: str) -> bool:
        if isinstance(self.allowed, re.Pattern):
            return bool(self.allowed.fullmatch(key))  # "m6i.large\n" too passes `$`
        return key in self.allowed()

    def expected(self) -> str:
        if isinstance(self.allowed, re.Pattern):
            return self.what
        return f"{self.what}: one of {', '.join(self.allowed())}"


def _openzfs_deployments() -> list[str]:
    from iofleet.plan.fsx import OPENZFS, _catalogue

    return list(_catalogue(OPENZFS)["deployment_types"])


def _lustre_deployments() -> list[str]:
    from iofleet.plan.fsx import LUSTRE, _catalogue

    return list(_catalogue(LUSTRE)["deployment_types"])


def _lustre_tiers() -> list[str]:
    """`storage` (a deployment type without a per-unit setting) or a per-unit MB/s/TiB."""
    from iofleet.plan.fsx import LUSTRE, _catalogue

    units = {
        str(v)
        for model in _catalogue(LUSTRE)["deployment_types"].values()
        for v in model.get("per_unit_storage_throughput") or []
    }
    return ["storage", *sorted(units, key=int)]


def _ebs_types() -> list[str]:
    return ["gp2", "gp3", "io1", "io2", "st1", "sc1"]


SHAPE: dict[str, Any] = {
    "ec2_hourly": Names("an EC2 instance type like m6i.large", INSTANCE_TYPE_RE, RATE),
    "ebs": Names(
        "an EBS volume type",
        _ebs_types,
        {
            "gib_month": RATE,
            "free_iops": COUNT,
            "iops_month": RATE,
            "free_mibps": COUNT,
            "mibps_month": RATE,
            "iops_month_tiers": TIERS,
        },
    ),
    "efs": {
        "standard_gib_month": RATE,
        "provisioned_mibps_month": RATE,
        "elastic_read_gib": RATE,
        "elastic_write_gib": RATE,
    },
    "s3": {"standard_gib_month": RATE, "put_per_1000": RATE, "get_per_1000": RATE},
    "s3express": {
        "gib_month": RATE,
        "put_per_1000": RATE,
        "get_per_1000": RATE,
        "upload_gib": RATE,
        "retrieval_gib": RATE,
    },
    "fsx-openzfs": {
        "free_iops_per_gib": COUNT,
        "deployment_types": Names(
            "an FSx for OpenZFS deployment type",
            _openzfs_deployments,
            {"ssd_gib_month": RATE, "throughput_mbps_month": RATE, "iops_month": RATE},
        ),
    },
    "fsx-lustre": {
        "deployment_types": Names(
            "an FSx for Lustre deployment type",
            _lustre_deployments,
            {
                "gib_month": Names(
                    "`storage` or a per-unit throughput in MB/s/TiB", _lustre_tiers, RATE
                )
            },
        ),
    },
    "stepfunctions": {"standard_transition": RATE},
    "lambda": {"gb_second": RATE, "request": RATE},
    "athena": {"tb_scanned": RATE, "min_mb_per_query": COUNT},
}


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _leaf_problem(kind: str, value: object) -> str | None:
    if kind == RATE:
        if value is None:
            return None
        if not _number(value) or not math.isfinite(float(value)):  # type: ignore[arg-type]
            return (
                f"expected a price in USD (a number >= 0, or null for unknown), got {quote(value)}"
            )
        if float(value) < 0:  # type: ignore[arg-type]
            return f"a price cannot be negative, got {quote(value)}"
        return None
    if kind == COUNT:
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            return f"expected a whole number >= 0, got {quote(value)}"
        return None
    # TIERS
    if not isinstance(value, list) or not value:
        return "expected tiers [[up_to, price], ..., [null, price]]"
    floor = 0.0
    for i, tier in enumerate(value):
        last = i == len(value) - 1
        if not isinstance(tier, list) or len(tier) != 2:
            return f"tier {i}: expected [up_to, price], got {quote(tier)}"
        up_to, price = tier
        if last != (up_to is None):
            return f"tier {i}: only the last tier has up_to null (it has no top)"
        if up_to is not None and (not _number(up_to) or float(up_to) <= floor):
            return f"tier {i}: up_to must be a number above the tier before ({floor:g})"
        why = _leaf_problem(RATE, price)
        if why:
            return f"tier {i}: {why}"
        if up_to is not None:
            floor = float(up_to)
    return None


def _walk(value: object, shape: Any, loc: Loc) -> list[tuple[Loc, str]]:
    if isinstance(shape, str):
        why = _leaf_problem(shape, value)
        return [(loc, why)] if why else []
    if value is None:
        return []  # a whole section unknown, as the shipped table says for FSx
    if not isinstance(value, Mapping):
        return [(loc, f"expected an object, got {type(value).__name__}")]
    problems: list[tuple[Loc, str]] = []
    for key, item in value.items():
        if isinstance(shape, Names):
            if not shape.accepts(key):
                problems.append((loc + (key,), f"unknown key: expected {shape.expected()}"))
                continue
            problems += _walk(item, shape.value, loc + (key,))
        elif key not in shape:
            problems.append((loc + (key,), f"unknown key (expected one of: {', '.join(shape)})"))
        else:
            problems += _walk(item, shape[key], loc + (key,))
    return problems


def _lustre_tier_problems(region_table: object, loc: Loc) -> list[tuple[Loc, str]]:
    """A Lustre rate keyed by a per-unit throughput its deployment type does not offer."""
    from iofleet.plan.fsx import LUSTRE, _catalogue

    types = lookup(region_table, LUSTRE, "deployment_types")
    if not isinstance(types, Mapping):
        return []
    models = _catalogue(LUSTRE)["deployment_types"]
    found: list[tuple[Loc, str]] = []
    for deployment, rates in types.items():
        tiers = lookup(rates, "gib_month")
        if deployment not in models or not isinstance(tiers, Mapping):
            continue
        units = [str(v) for v in models[deployment].get("per_unit_storage_throughput") or []]
        valid = units or ["storage"]
        for key in tiers:
            if key in _lustre_tiers() and key not in valid:
                found.append(
                    (
                        loc + (LUSTRE, "deployment_types", deployment, "gib_month", key),
                        f"{deployment} has no such tier (one of: {', '.join(valid)})",
                    )
                )
    return found


def lookup(mapping: object, *keys: str) -> Any:
    """mapping[k1][k2]...; None where a step is missing or not a mapping."""
    current: Any = mapping
    for key in keys:
        if not isinstance(current, Mapping):
            return None
        current = current.get(key)
    return current


def region_problems(region_table: object, loc: Loc = ()) -> list[tuple[Loc, str]]:
    """Problems of one region's rates against SHAPE (empty when it fits)."""
    return _walk(region_table, SHAPE, loc) + _lustre_tier_problems(region_table, loc)


def problems(overrides: object) -> list[tuple[Loc, str]]:
    """The matrix's `prices` object: `as_of`, `source` and `regions` (paths below it)."""
    if not isinstance(overrides, Mapping):
        return [((), f"expected an object with as_of, source and regions, got {quote(overrides)}")]
    found: list[tuple[Loc, str]] = []
    for key in overrides:
        if key not in ("as_of", "source", "regions"):
            found.append(((key,), "unknown key (expected one of: as_of, source, regions)"))
    as_of = overrides.get("as_of")
    if as_of is None:
        found.append((("as_of",), "required: the date these prices were read (YYYY-MM-DD)"))
    elif not isinstance(as_of, str) or not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", as_of):
        found.append((("as_of",), f"expected a date YYYY-MM-DD, got {quote(as_of)}"))
    else:
        try:
            dt.date.fromisoformat(as_of)
        except ValueError:
            found.append((("as_of",), f"not a calendar date: {quote(as_of)}"))
    source = overrides.get("source")
    if source is None:
        found.append((("source",), "required: where these prices come from"))
    elif not isinstance(source, str) or not source.strip() or len(source) > 500:
        found.append((("source",), "expected a non-blank string of at most 500 characters"))
    regions = overrides.get("regions")
    if regions is None:
        found.append((("regions",), "required: {region: {section: rates}}"))
    elif not isinstance(regions, Mapping) or not regions:
        found.append((("regions",), "expected a non-empty object {region: {section: rates}}"))
    else:
        for region, table in regions.items():
            if not _REGION_RE.fullmatch(region):  # a trailing newline passes `$`
                found.append((("regions", region), "not an AWS Region code like us-east-1"))
                continue
            if not isinstance(table, Mapping) or not table:
                found.append((("regions", region), "expected a non-empty object of sections"))
                continue
            found += region_problems(table, ("regions", region))
    return found


def _overlay(base: Any, top: Any) -> Any:
    if isinstance(base, Mapping) and isinstance(top, Mapping):
        merged = dict(base)
        for key, value in top.items():
            merged[key] = _overlay(base.get(key), value)
        return merged
    return top


def region_prices(
    shipped: Mapping[str, Any], region: str, overrides: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The shipped region's rates with the matrix's rates for `region` laid over them."""
    base = dict(shipped.get("regions", {}).get(region) or {})
    mine = ((overrides or {}).get("regions") or {}).get(region)
    return _overlay(base, mine) if mine else base


def summary(overrides: Mapping[str, Any] | None, region: str) -> dict[str, Any] | None:
    """What the matrix's prices changed for `region` (for the plan's run notes)."""
    if not overrides:
        return None
    regions = overrides.get("regions") or {}
    return {
        "as_of": overrides.get("as_of"),
        "source": overrides.get("source"),
        "sections": sorted((regions.get(region) or {}).keys()),
        "regions": sorted(regions),
    }
