"""Repeat noise per configuration: are a configuration's repeats consistent?

A configuration (CONFIG_FIELDS of `iofleet.results.compare`: a cell without its
repeat number) measured in two or more repeats gets, per workload and metric,
its spread across slots (CV), across repeats (CV of the repeat means) and
within repeats (pooled), and a Kruskal-Wallis test across the repeats' slot
values. The tests of one report are Benjamini-Hochberg adjusted together; a
configuration whose adjusted p is below 0.05 is flagged: its repeats disagree
beyond the noise between its slots (something changed between repeats: a
cache, a neighbour, a burst bucket), so its pooled numbers hide a shift.

numpy/scipy: imported lazily by `iofleet report`, never by the agent or Lambdas.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

NOISE_COLUMNS = (
    "instance_type",
    "storage_label",
    "storage_type",
    "storage_detail",
    "fleet_size",
    "metric_source",
    "workload_index",
    "workload",
    "job",
    "direction",
    "metric",
    "unit",
    "n_slots",
    "n_repeats",
    "mean",
    "median",
    "cv",
    "cv_repeats",
    "cv_within",
    "repeats_p",
    "p_adjusted",
    "repeats_disagree",
)


def repeat_noise(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """slot_values rows (one run) -> one NOISE_COLUMNS row per configuration with
    2+ repeats and (workload, job, direction, metric)."""
    from iofleet.results.compare import CONFIG_FIELDS

    groups: dict[tuple[Any, ...], dict[Any, list[float]]] = defaultdict(lambda: defaultdict(list))
    first: dict[tuple[Any, ...], Mapping[str, Any]] = {}
    for r in rows:
        key = (
            *(r.get(f) for f in CONFIG_FIELDS),
            r["metric_source"],
            r["workload_index"],
            r["workload"],
            r.get("job"),
            r.get("direction"),
            r["metric"],
        )
        groups[key][(r["run_id"], r.get("repeat"))].append(float(r["value"]))
        first.setdefault(key, r)
    out: list[dict[str, Any]] = []
    from iofleet.report.model import METRIC_ORDER

    def order(k: tuple[Any, ...]) -> tuple[Any, ...]:
        metric = k[-1]
        rank = METRIC_ORDER.index(metric) if metric in METRIC_ORDER else len(METRIC_ORDER)
        return (*("" if v is None else str(v) for v in k[:-1]), rank, metric)

    for key in sorted(groups, key=order):
        by_repeat = groups[key]
        if len(by_repeat) < 2:
            continue
        # scipy.stats costs about a second to import: only when a configuration has repeats
        from iofleet.results import stats

        s = stats.summarize([by_repeat[k] for k in sorted(by_repeat, key=str)])
        r = first[key]
        out.append(
            {
                **{c: r.get(c) for c in NOISE_COLUMNS[:12]},
                "n_slots": s.n_slots,
                "n_repeats": s.n_repeats,
                "mean": s.mean,
                "median": s.median,
                "cv": s.cv,
                "cv_repeats": s.cv_repeats,
                "cv_within": s.cv_within,
                "repeats_p": s.repeats_p,
            }
        )
    if not out:  # no configuration with repeats: nothing to test, scipy never imported
        return out
    from iofleet.results import stats

    adjusted = stats.adjust([r["repeats_p"] for r in out])
    for r, q in zip(out, adjusted, strict=True):
        r["p_adjusted"] = q
        r["repeats_disagree"] = None if q is None else q < stats.ALPHA
    return out
