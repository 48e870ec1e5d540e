"""Amazon FSx file systems created per cell: what AWS will build, what they promise, what they cost.

Three parts, one per stage that needs them:

- `openzfs_problems` / `lustre_problems`: the creation rules of the FSx API
  (valid throughput capacity per deployment type, capacity increments, SSD IOPS
  bounds), so `plan` refuses (PATH: message, exit 2) every setting CreateFileSystem
  would refuse, before anything is created;
- `openzfs_ceilings` / `lustre_ceilings`: the promised ceilings for
  iofleet.plan.expect (baseline, and burst where the service publishes one);
- `add_cost`: the per-cell cost lines for iofleet.plan.cost.

The figures live in `data/limits_catalogue.json` (`fsx-openzfs`, `fsx-lustre`, each
with its sources) and `data/prices.json`; a figure missing there is unknown, never
guessed. Stdlib only (the plan Lambda and the agent bundle import iofleet.plan).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

OPENZFS = "fsx-openzfs"
LUSTRE = "fsx-lustre"
KINDS = (OPENZFS, LUSTRE)
OPENZFS_DEFAULT_DEPLOYMENT = "SINGLE_AZ_1"
LUSTRE_DEFAULT_DEPLOYMENT = "PERSISTENT_2"
GIB_PER_TIB = 1024

Problem = tuple[str, str]  # (field, message)


def _catalogue(kind: str) -> dict[str, Any]:
    from iofleet.plan.expect import catalogue

    record: dict[str, Any] = catalogue()[kind]
    return record


def _one_of(values: list[int]) -> str:
    return ", ".join(str(v) for v in values)


# --------------------------------------------------------------------------- rules


def openzfs_problems(
    deployment_type: str | None,
    storage_capacity_gib: int | None,
    throughput_capacity: int | None,
    iops: int | None,
) -> list[Problem]:
    """CreateFileSystem's rules for FSx for OpenZFS (SSD storage class)."""
    rec = _catalogue(OPENZFS)
    deployment = deployment_type or OPENZFS_DEFAULT_DEPLOYMENT
    model = rec["deployment_types"][deployment]
    problems: list[Problem] = []
    valid: list[int] = model["throughput_capacity_mbps"]
    if throughput_capacity is not None and throughput_capacity not in valid:
        problems.append(
            (
                "throughput_capacity",
                f"{throughput_capacity} MB/s is not a throughput capacity of {deployment} "
                f"(one of: {_one_of(valid)})",
            )
        )
    if iops is None or storage_capacity_gib is None:
        return problems
    floor = rec["automatic_iops_per_gib"] * storage_capacity_gib
    if iops < floor:
        problems.append(
            (
                "iops",
                f"{iops} IOPS is below the minimum for {storage_capacity_gib} GiB "
                f"({rec['automatic_iops_per_gib']} IOPS per GiB = {floor}); leave iops out "
                f"for the automatic {floor}",
            )
        )
    per_gib = int(rec["max_iops_per_gib"])
    if iops > per_gib * storage_capacity_gib:
        problems.append(
            (
                "iops",
                f"{iops} IOPS is more than {per_gib} IOPS per GiB of {storage_capacity_gib} GiB "
                f"(at most {per_gib * storage_capacity_gib}): raise storage_capacity_gib or "
                "lower iops",
            )
        )
    ceiling = int(model["max_iops"])
    if iops > ceiling:
        problems.append(
            (
                "iops",
                f"{iops} IOPS is above the {deployment} maximum of {ceiling} provisioned SSD IOPS",
            )
        )
    elif throughput_capacity in valid:
        tier = str(throughput_capacity)
        level = int(model["disk_iops_by_throughput"][tier])
        burst = model.get("disk_burst_iops_by_throughput", {}).get(tier)
        if iops > (burst or level):
            drives = f"{level} SSD IOPS" + (f", {burst} in bursts" if burst else "")
            problems.append(
                (
                    "iops",
                    f"{iops} IOPS is more than a {throughput_capacity} MB/s {deployment} file "
                    f"server can drive ({drives} at that throughput capacity): "
                    "raise throughput_capacity or lower iops",
                )
            )
    return problems


def lustre_capacities(deployment: str) -> tuple[int, int, int]:
    """(first, second, increment) of the valid SSD storage capacities in GiB."""
    rule = _catalogue(LUSTRE)["deployment_types"][deployment]["capacity_gib"]
    return int(rule["first"]), int(rule["second"]), int(rule["increment"])


def lustre_capacity_ok(deployment: str, capacity: int) -> bool:
    first, second, step = lustre_capacities(deployment)
    return capacity in (first, second) or (capacity > second and capacity % step == 0)


def lustre_problems(
    deployment_type: str | None,
    storage_capacity_gib: int | None,
    per_unit_storage_throughput: int | None,
) -> list[Problem]:
    """CreateFileSystem's rules for FSx for Lustre (SSD deployment types)."""
    deployment = deployment_type or LUSTRE_DEFAULT_DEPLOYMENT
    model = _catalogue(LUSTRE)["deployment_types"][deployment]
    problems: list[Problem] = []
    if storage_capacity_gib is not None and not lustre_capacity_ok(
        deployment, storage_capacity_gib
    ):
        first, second, step = lustre_capacities(deployment)
        problems.append(
            (
                "storage_capacity_gib",
                f"{storage_capacity_gib} GiB is not a {deployment} storage capacity "
                f"({first}, {second}, then multiples of {step} GiB)",
            )
        )
    valid: list[int] = model.get("per_unit_storage_throughput") or []
    if not valid:
        if per_unit_storage_throughput is not None:
            problems.append(
                (
                    "per_unit_storage_throughput",
                    f"{deployment} has no per-unit throughput setting (only PERSISTENT_1 "
                    "and PERSISTENT_2 do)",
                )
            )
    elif per_unit_storage_throughput is None:
        problems.append(
            (
                "per_unit_storage_throughput",
                f"required for {deployment} (MB/s per TiB, one of: {_one_of(valid)})",
            )
        )
    elif per_unit_storage_throughput not in valid:
        problems.append(
            (
                "per_unit_storage_throughput",
                f"{per_unit_storage_throughput} MB/s/TiB is not a {deployment} throughput "
                f"(one of: {_one_of(valid)})",
            )
        )
    return problems


# --------------------------------------------------------------------------- ceilings


def lustre_baseline_mbps(
    deployment: str, storage_capacity_gib: float, per_unit: float | None
) -> tuple[float | None, float | None]:
    """(baseline, burst) MB/s of a Lustre file system from its capacity and per-unit throughput.

    Baseline: the disk throughput (the per-unit throughput chosen, SCRATCH_2: 200 MB/s
    per TiB for reads). Burst: the disk burst where ssd-storage.html gives one, else
    the network burst (SCRATCH_2), else None.
    """
    model = _catalogue(LUSTRE)["deployment_types"][deployment]
    tib = storage_capacity_gib / GIB_PER_TIB
    base_per_tib = per_unit if per_unit is not None else model.get("baseline_mbps_per_tib")
    burst_per_tib = _per_unit_figure(model.get("disk_burst_mbps_per_tib"), per_unit)
    if burst_per_tib is None:
        burst_per_tib = _per_unit_figure(model.get("burst_mbps_per_tib"), per_unit)
    baseline = None if base_per_tib is None else float(base_per_tib) * tib
    burst = None if burst_per_tib is None else float(burst_per_tib) * tib
    return baseline, burst


def _per_unit_figure(figure: Any, per_unit: float | None) -> float | None:
    """A catalogue figure that is one number, or one per per-unit throughput tier."""
    if isinstance(figure, Mapping):
        value = None if per_unit is None else figure.get(str(int(per_unit)))
        return None if value is None else float(value)
    return None if figure is None else float(figure)


def openzfs_ceilings(spec: Any) -> Any:
    """iofleet.plan.expect.Ceilings for an FSx for OpenZFS StorageSpec.

    Figures: performance-ssd.html of the OpenZFS guide (limits_catalogue.json
    `fsx-openzfs`): the disk throughput baseline is the throughput capacity, the
    IOPS ceiling the lower of the SSD IOPS and the file server's disk IOPS at that
    capacity. Bursts (credits of unpublished size) and cached reads (network
    figures) are notes: they can beat the ceiling, for a while or from cache.
    """
    from iofleet.plan.expect import Ceilings, Limit

    rec = _catalogue(OPENZFS)
    deployment = spec.deployment_type or OPENZFS_DEFAULT_DEPLOYMENT
    model = rec["deployment_types"].get(deployment) or {}
    tier = None if spec.throughput_mibps is None else str(int(spec.throughput_mibps))
    limits: list[Limit] = []
    unknown: list[str] = []
    notes: list[str] = []
    iops = spec.iops
    if iops is None and spec.size_gib:
        iops = rec["automatic_iops_per_gib"] * spec.size_gib
    level = None if tier is None else model.get("disk_iops_by_throughput", {}).get(tier)
    if level is not None and iops is not None and iops > level:
        notes.append(f"the {deployment} file server drives at most {level} SSD IOPS")
        burst_iops = model.get("disk_burst_iops_by_throughput", {}).get(tier)
        if burst_iops:
            notes.append(
                f"{deployment} at {tier} MB/s bursts to {min(iops, burst_iops):.0f} disk IOPS "
                "on credits whose size is not published: the ceiling here is the baseline"
            )
        iops = level
    if iops is None:
        unknown.append("file system iops")
    else:
        limits.append(Limit("volume", "ops", float(iops), what="FSx for OpenZFS SSD IOPS"))
    if spec.throughput_mibps is None:
        unknown.append("file system throughput")
    else:  # throughput capacity is in MB/s
        limits.append(
            Limit(
                "volume",
                "bytes",
                float(spec.throughput_mibps) * 1e6,
                what=f"FSx for OpenZFS {deployment} throughput capacity",
            )
        )
        notes.extend(_openzfs_notes(deployment, model, str(tier)))
    return Ceilings(limits, unknown, notes)


def _openzfs_notes(deployment: str, model: Mapping[str, Any], tier: str) -> list[str]:
    notes: list[str] = []
    burst = model.get("disk_burst_mbps_by_throughput", {}).get(tier)
    if burst:
        notes.append(
            f"{deployment} at {tier} MB/s bursts disk throughput to {burst} MB/s on credits "
            "whose size is not published: the ceiling here is the baseline"
        )
    network = model.get("network_mbps_by_throughput", {}).get(tier)
    if network:
        net_burst = model.get("network_burst_mbps_by_throughput", {}).get(tier)
        more = f" (bursts to {net_burst} MB/s)" if net_burst else ""
        notes.append(
            f"reads served from the file server's cache run at up to {network} MB/s{more}, "
            "above the disk ceiling"
        )
    write = model.get("write_mbps_at_10240")
    if write and tier == "10240":
        notes.append(f"{deployment} at 10240 MB/s: writes are limited to {write} MB/s")
    return notes


def region_warnings(spec: Any, region: str) -> list[str]:
    """A warning when the deployment type's figures are documented for other Regions."""
    deployment = spec.deployment_type or OPENZFS_DEFAULT_DEPLOYMENT
    regions = _catalogue(OPENZFS)["deployment_types"].get(deployment, {}).get("regions")
    if not regions or region in regions:
        return []
    return [
        f"{deployment} ceilings are the figures documented for {len(regions)} Regions "
        f"({', '.join(regions[:3])}, ...) that do not include {region}: AWS documents lower "
        "ones for some other Regions, so these may be too high"
    ]


def lustre_ceilings(spec: Any) -> Any:
    """iofleet.plan.expect.Ceilings for an FSx for Lustre StorageSpec."""
    from iofleet.plan.expect import Ceilings, Limit

    rec = _catalogue(LUSTRE)
    deployment = spec.deployment_type or LUSTRE_DEFAULT_DEPLOYMENT
    limits: list[Limit] = []
    unknown: list[str] = ["file system iops"]
    notes: list[str] = []
    if not spec.size_gib or deployment not in rec["deployment_types"]:
        unknown.append("file system throughput")
        return Ceilings(limits, unknown, notes)
    baseline, burst = lustre_baseline_mbps(deployment, float(spec.size_gib), spec.per_unit_mbps)
    if baseline is None:
        unknown.append("file system throughput")
        return Ceilings(limits, unknown, notes)
    tib = float(spec.size_gib) / GIB_PER_TIB
    if burst is not None and burst > baseline:
        # the burst lasts while the file system's credits do; their size is not
        # published, so the bucket is unknown (treated as no bucket: baseline sustained)
        notes.append(
            f"{deployment} bursts to {burst:.0f} MB/s on credits whose size is not "
            "published: the ceiling here is the baseline"
        )
    limits.append(
        Limit(
            "volume",
            "bytes",
            baseline * 1e6,
            what=f"FSx for Lustre {deployment} baseline throughput",
        )
    )
    write = rec["deployment_types"][deployment].get("write_baseline_mbps_per_tib")
    if write is not None:  # SCRATCH_2: writes have a lower baseline of their own
        limits.append(
            Limit(
                "volume",
                "bytes",
                float(write) * tib * 1e6,
                what=f"FSx for Lustre {deployment} write baseline throughput",
                direction="write",
            )
        )
    return Ceilings(limits, unknown, notes)


# --------------------------------------------------------------------------- cost


def add_cost(
    est: Any, spec: Any, months: float, prices: Mapping[str, Any], reason: str | None = None
) -> None:
    """Cost lines of one cell's file system alive for `months` (iofleet.plan.cost).

    OpenZFS: SSD GiB-months, throughput capacity MBps-months and the SSD IOPS above
    the included 3 per GiB in IOPS-months, at the deployment type's rates. Lustre:
    GiB-months at the rate of the deployment type and per-unit throughput. A rate the
    region's table lacks is an unknown line (`reason` says why when there is no table).
    """
    table = prices.get(spec.type)
    hours = months * 730
    if not table:
        why = f": {reason}" if reason else ""
        est.unknown.append(f"{spec.type} file system ({hours:.2f} hours){why}")
        return
    size = float(spec.size_gib or 0)
    if spec.type == OPENZFS:
        deployment = spec.deployment_type or OPENZFS_DEFAULT_DEPLOYMENT
        rates = (table.get("deployment_types") or {}).get(deployment) or {}
        est.add(
            f"{OPENZFS} {deployment} SSD storage",
            size * months,
            "GiB-months",
            rates.get("ssd_gib_month"),
        )
        est.add(
            f"{OPENZFS} {deployment} throughput capacity",
            float(spec.throughput_mibps or 0) * months,
            "MBps-months",
            rates.get("throughput_mbps_month"),
        )
        free = table.get("free_iops_per_gib", 3) * size
        extra = max(0.0, float(spec.iops or 0) - free)
        if extra:
            est.add(
                f"{OPENZFS} provisioned SSD IOPS",
                extra * months,
                "IOPS-months",
                rates.get("iops_month"),
            )
        return
    deployment = spec.deployment_type or LUSTRE_DEFAULT_DEPLOYMENT
    rates = (table.get("deployment_types") or {}).get(deployment) or {}
    key = str(int(spec.per_unit_mbps)) if spec.per_unit_mbps else "storage"
    est.add(
        f"{LUSTRE} {deployment} storage"
        + (f" at {spec.per_unit_mbps:g} MB/s/TiB" if spec.per_unit_mbps else ""),
        size * months,
        "GiB-months",
        (rates.get("gib_month") or {}).get(key),
    )
