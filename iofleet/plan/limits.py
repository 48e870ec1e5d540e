"""Published AWS limits, kept as dated data in `data/ebs_limits.json`.

Stdlib only. The matrix validator asks `check_ebs_volume` for problems; no
limit numbers live in code.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from iofleet.quote import quote

# an EC2 instance type: family (letters, a generation digit, options; "-flex" and
# friends) "." size
INSTANCE_TYPE_RE = re.compile(
    r"^[a-z][a-z0-9-]*[0-9][a-z0-9-]*\."
    r"(nano|micro|small|medium|large|xlarge|[0-9]+xlarge|metal|metal-[0-9]+xl)$"
)

EBS_LIMITS_FILE = Path(__file__).resolve().parent / "data" / "ebs_limits.json"


@dataclass(frozen=True)
class Range:
    """Allowed values of one setting; `ratio_max` caps it per unit of another
    setting (IOPS per GiB, MiB/s per IOPS), never below `min`."""

    min: float
    max: float
    ratio_max: float | None = None
    required: bool = False

    def ceiling(self, base: float | None) -> float:
        """The largest value allowed given the base setting (size or iops)."""
        if self.ratio_max is None or base is None:
            return self.max
        return min(self.max, max(self.min, self.ratio_max * base))


@dataclass(frozen=True)
class VolumeLimits:
    volume_type: str
    size_gib: Range
    iops: Range | None  # None: the type takes no provisioned IOPS
    throughput_mibps: Range | None  # None: the type takes no provisioned throughput


@dataclass(frozen=True)
class EbsLimits:
    source: str
    as_of: str
    volume_types: dict[str, VolumeLimits]


def _range(raw: dict | None, ratio_key: str | None = None) -> Range | None:
    if raw is None:
        return None
    return Range(
        min=raw["min"],
        max=raw["max"],
        ratio_max=raw.get(ratio_key) if ratio_key else None,
        required=bool(raw.get("required", False)),
    )


@cache
def ebs_limits() -> EbsLimits:
    doc = json.loads(EBS_LIMITS_FILE.read_text(encoding="utf-8"))
    types: dict[str, VolumeLimits] = {}
    for name, raw in doc["volume_types"].items():
        size = _range(raw["size_gib"])
        assert size is not None
        types[name] = VolumeLimits(
            volume_type=name,
            size_gib=size,
            iops=_range(raw.get("iops"), "per_gib_max"),
            throughput_mibps=_range(raw.get("throughput_mibps"), "per_iops_max"),
        )
    return EbsLimits(source=doc["source"], as_of=doc["as_of"], volume_types=types)


def _num(value: float) -> str:
    return f"{value:g}" if value < 1e6 else str(int(value))


def check_ebs_volume(
    volume_type: str,
    size_gib: int | None,
    iops: int | None,
    throughput_mibps: int | None,
) -> list[tuple[str, str]]:
    """Problems as (field, message) pairs, field one of size_gib/iops/throughput_mibps.

    An unknown volume type is reported on "volume_type".
    """
    limits = ebs_limits()
    vt = limits.volume_types.get(volume_type)
    if vt is None:
        known = ", ".join(sorted(limits.volume_types))
        return [("volume_type", f"unknown EBS volume type {quote(volume_type)} (known: {known})")]
    problems: list[tuple[str, str]] = []
    size_ok = False
    if size_gib is None:
        problems.append(("size_gib", f"required for {volume_type}"))
    elif not vt.size_gib.min <= size_gib <= vt.size_gib.max:
        problems.append(
            (
                "size_gib",
                f"{volume_type} size must be {_num(vt.size_gib.min)}-{_num(vt.size_gib.max)} GiB, "
                f"got {size_gib}",
            )
        )
    else:
        size_ok = True

    effective_iops: float | None = None
    if vt.iops is None:
        if iops is not None:
            problems.append(("iops", f"{volume_type} does not take provisioned IOPS"))
    elif iops is None:
        if vt.iops.required:
            problems.append(("iops", f"required for {volume_type}"))
        else:
            effective_iops = vt.iops.min
    elif not vt.iops.min <= iops <= vt.iops.max:
        problems.append(
            (
                "iops",
                f"{volume_type} IOPS must be {_num(vt.iops.min)}-{_num(vt.iops.max)}, got {iops}",
            )
        )
    elif size_ok and iops > vt.iops.ceiling(size_gib):
        problems.append(
            (
                "iops",
                f"{volume_type} allows at most {_num(vt.iops.ratio_max or 0)} IOPS per GiB: "
                f"{size_gib} GiB allows {_num(vt.iops.ceiling(size_gib))}, got {iops}",
            )
        )
    else:
        effective_iops = iops

    tp = vt.throughput_mibps
    if tp is None:
        if throughput_mibps is not None:
            problems.append(
                ("throughput_mibps", f"{volume_type} does not take provisioned throughput")
            )
    elif throughput_mibps is None:
        if tp.required:
            problems.append(("throughput_mibps", f"required for {volume_type}"))
    elif not tp.min <= throughput_mibps <= tp.max:
        problems.append(
            (
                "throughput_mibps",
                f"{volume_type} throughput must be {_num(tp.min)}-{_num(tp.max)} MiB/s, "
                f"got {throughput_mibps}",
            )
        )
    elif effective_iops is not None and throughput_mibps > tp.ceiling(effective_iops):
        problems.append(
            (
                "throughput_mibps",
                f"{volume_type} allows at most {_num(tp.ratio_max or 0)} MiB/s per IOPS: "
                f"{_num(effective_iops)} IOPS allows {_num(tp.ceiling(effective_iops))} MiB/s, "
                f"got {throughput_mibps}",
            )
        )
    return problems
