"""`iofleet compare`: is configuration B better than A, per workload and metric?

Sides. `RUN_A RUN_B` compares run A with run B; `--a SELECTOR` / `--b
SELECTOR` pick configurations within them (with one run, both sides come from
it and both selectors are required). A selector is `FIELD=VALUE[,FIELD=VALUE]`
over the cell fields (SELECTOR_FIELDS); every pair must match.

Configurations. A side's slots are grouped into configurations by
CONFIG_FIELDS (repeats of one configuration pool; `repeat` and `cell_id` are
not part of it). Configurations of A and B pair up on the CONFIG_FIELDS that
neither selector names (naming one storage field frees all three: label, type
and detail describe one storage entry; so `--a storage_label=gp3 --b storage_label=io2`
compares gp3 with io2 at every fleet size and instance type both have); when
each side holds a single configuration they pair whatever their fields.

Metrics. For each pair, every (workload, job, direction, metric) present on
both sides gives one row; a workload is matched by its source and name (and,
when a matrix lists the same workload twice, by its occurrence). The
statistics are `iofleet.results.stats`; the p-values of all rows printed are
adjusted together (Benjamini-Hochberg).
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iofleet.errors import Problem, ValidationFailed
from iofleet.quote import quote

CONFIG_FIELDS = ("instance_type", "storage_label", "storage_type", "storage_detail", "fleet_size")
STORAGE_FIELDS = ("storage_label", "storage_type", "storage_detail")
SELECTOR_FIELDS = (*CONFIG_FIELDS, "repeat", "cell_id")
HIGHER_IS_BETTER = frozenset({"iops", "bw_bytes"})
FORMATS = ("table", "json", "csv")
SLOT_VALUES_ORDER = (
    "run_id, cell_index NULLS LAST, cell_id, slot_index, metric_source, workload_index, "
    "job NULLS FIRST, direction NULLS FIRST, metric"
)
VERDICTS = ("a_better", "b_better", "no_difference", "too_few_samples")

ROW_COLUMNS = (
    "metric",
    "unit",
    "better",
    "metric_source",
    "workload_index",
    "workload",
    "job",
    "direction",
    "config",
    "a_run",
    "a_selector",
    "b_run",
    "b_selector",
    "a",
    "b",
    "ratio",
    "ci_low",
    "ci_high",
    "shift",
    "p_value",
    "p_adjusted",
    "verdict",
    *(
        f"{side}_{name}"
        for side in ("a", "b")
        for name in (
            "n_slots",
            "n_repeats",
            "median",
            "cv",
            "cv_repeats",
            "cv_within",
            "repeats_p",
            "repeats_disagree",
        )
    ),
    "design_effect",
    "slots_needed",
    "repeats_needed",
    "note",
)


@dataclass(frozen=True)
class Side:
    name: str  # "a" | "b"
    run_id: str
    selector: dict[str, str]
    text: str  # the selector as given, "" when none


def parse_selector(flag: str, text: str | None) -> dict[str, str]:
    """`FIELD=VALUE[,FIELD=VALUE...]` -> {field: value}; ValidationFailed on bad syntax."""
    if text is None:
        return {}
    out: dict[str, str] = {}
    for part in text.split(","):
        part = part.strip()
        field, sep, value = part.partition("=")
        field, value = field.strip(), value.strip()
        if not sep or not field or not value:
            raise ValidationFailed(
                [Problem(flag, f"expected FIELD=VALUE[,FIELD=VALUE...], got {quote(text)}")]
            )
        if field not in SELECTOR_FIELDS:
            raise ValidationFailed(
                [
                    Problem(
                        flag,
                        f"unknown field {quote(field)} (fields: {', '.join(SELECTOR_FIELDS)})",
                    )
                ]
            )
        if field in out:
            raise ValidationFailed([Problem(flag, f"field {quote(field)} given twice")])
        out[field] = value
    return out


def _text(value: object) -> str:
    return "" if value is None else str(value)


def _matches(row: Mapping[str, Any], selector: Mapping[str, str]) -> bool:
    return all(_text(row.get(f)) == v for f, v in selector.items())


def load_slot_values(src: Any, run_ids: Sequence[str]) -> list[dict[str, Any]]:
    """The `slot_values` query (iofleet/results/sql/queries) of these runs, from any
    `iofleet.results.source.ResultsSource` (DuckDB warehouse or Athena), in a fixed order."""
    from iofleet.results.source import named_query

    return named_query(src, "slot_values", run_ids, SLOT_VALUES_ORDER)


def _config(row: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(_text(row.get(f)) for f in CONFIG_FIELDS)


def _metric_keys(rows: list[dict[str, Any]]) -> None:
    """Give each row `occurrence`: the rank of its workload_index among the run's
    workloads of the same source and name (1 unless a matrix repeats a workload)."""
    seen: dict[tuple[Any, ...], set[int]] = defaultdict(set)
    for r in rows:
        seen[(r["run_id"], r["metric_source"], r["workload"])].add(int(r["workload_index"]))
    ranks = {k: {wi: i + 1 for i, wi in enumerate(sorted(v))} for k, v in seen.items()}
    for r in rows:
        key = (r["run_id"], r["metric_source"], r["workload"])
        r["occurrence"] = ranks[key][int(r["workload_index"])]


def _side_rows(side: Side, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r["run_id"] == side.run_id and _matches(r, side.selector)]


def _describe_values(rows: Sequence[Mapping[str, Any]], fields: Sequence[str]) -> str:
    bits = []
    for f in fields:
        values = sorted({_text(r.get(f)) for r in rows})
        bits.append(f"{f}: {', '.join(values[:6])}{', ...' if len(values) > 6 else ''}")
    return "; ".join(bits)


def _pairs(
    a: Side, b: Side, rows_a: list[dict[str, Any]], rows_b: list[dict[str, Any]]
) -> list[tuple[tuple[str, ...], tuple[str, ...], str]]:
    """(config of A, config of B, description of the shared fields) pairs."""
    configs_a = sorted({_config(r) for r in rows_a})
    configs_b = sorted({_config(r) for r in rows_b})
    if len(configs_a) == 1 and len(configs_b) == 1:
        ca, cb = configs_a[0], configs_b[0]
        same = [f"{f}={x}" for f, x, y in zip(CONFIG_FIELDS, ca, cb, strict=True) if x == y]
        return [(ca, cb, ",".join(same))]
    named = set(a.selector) | set(b.selector)
    if named & set(STORAGE_FIELDS):  # a storage entry's label, type and detail go together
        named |= set(STORAGE_FIELDS)
    free = [i for i, f in enumerate(CONFIG_FIELDS) if f not in named]

    def key(config: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(config[i] for i in free)

    by_key: dict[str, dict[tuple[str, ...], list[tuple[str, ...]]]] = {"a": {}, "b": {}}
    for name, configs in (("a", configs_a), ("b", configs_b)):
        for config in configs:
            by_key[name].setdefault(key(config), []).append(config)
        for configs_of_key in by_key[name].values():
            if len(configs_of_key) > 1:
                differ = [
                    f
                    for i, f in enumerate(CONFIG_FIELDS)
                    if len({c[i] for c in configs_of_key}) > 1
                ]
                raise ValidationFailed(
                    [
                        Problem(
                            f"--{name}",
                            f"selects {len(configs_of_key)} configurations that differ only in "
                            f"{', '.join(differ)}; pin {differ[0]} in --{name} "
                            f"(e.g. {differ[0]}={configs_of_key[0][CONFIG_FIELDS.index(differ[0])]})",
                        )
                    ]
                )
    pairs: list[tuple[tuple[str, ...], tuple[str, ...], str]] = []
    for k, [ca] in sorted(by_key["a"].items()):
        if k in by_key["b"]:
            [cb] = by_key["b"][k]
            shared = ",".join(f"{CONFIG_FIELDS[i]}={v}" for i, v in zip(free, k, strict=True))
            pairs.append((ca, cb, shared))
    if not pairs:
        fields = ", ".join(CONFIG_FIELDS[i] for i in free)
        raise ValidationFailed(
            [
                Problem(
                    "--b" if b.selector else "RUN_B",
                    f"no configuration of side B has the same {fields} as one of side A; "
                    "pick the two sides with --a/--b (A has "
                    f"{_describe_values(rows_a, [CONFIG_FIELDS[i] for i in free])}; B has "
                    f"{_describe_values(rows_b, [CONFIG_FIELDS[i] for i in free])})",
                )
            ]
        )
    return pairs


def _groups(rows: Sequence[Mapping[str, Any]]) -> list[list[float]]:
    """Slot values grouped by repeat (run, repeat), in a stable order."""
    by_repeat: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in sorted(rows, key=lambda r: (r["run_id"], _text(r["repeat"]), r["cell_id"])):
        by_repeat[(r["run_id"], _text(r["repeat"]))].append(float(r["value"]))
    return list(by_repeat.values())


def _none_if_nan(x: float | None) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else x


def compare_rows(
    rows: list[dict[str, Any]], a: Side, b: Side, seed: int | None = None
) -> list[dict[str, Any]]:
    """The comparison rows (ROW_COLUMNS) of side B against side A over slot_values rows."""
    import numpy as np

    from iofleet.results import stats

    _metric_keys(rows)
    rows_a, rows_b = _side_rows(a, rows), _side_rows(b, rows)
    for side, side_rows in ((a, rows_a), (b, rows_b)):
        if not side_rows:
            where = f"run {side.run_id}"
            run_rows = [r for r in rows if r["run_id"] == side.run_id]
            if side.selector and run_rows:
                raise ValidationFailed(
                    [
                        Problem(
                            f"--{side.name}",
                            f"{quote(side.text)} matches no slot with measurements in {where} ("
                            f"{_describe_values(run_rows, list(side.selector))})",
                        )
                    ]
                )
            raise ValidationFailed(
                [Problem(f"RUN_{side.name.upper()}", f"{where} has no slot with measurements")]
            )
    slots_a = {(r["run_id"], r["cell_id"], r["slot_index"]) for r in rows_a}
    slots_b = {(r["run_id"], r["cell_id"], r["slot_index"]) for r in rows_b}
    if slots_a & slots_b:
        raise ValidationFailed(
            [Problem("--b", f"selects {len(slots_a & slots_b)} of the same slots as --a")]
        )
    rng = np.random.default_rng(stats.SEED if seed is None else seed)
    out: list[dict[str, Any]] = []
    for config_a, config_b, shared in _pairs(a, b, rows_a, rows_b):
        by_metric: dict[tuple[Any, ...], dict[str, list[dict[str, Any]]]] = defaultdict(
            lambda: {"a": [], "b": []}
        )
        for name, side_rows, config in (("a", rows_a, config_a), ("b", rows_b, config_b)):
            for r in side_rows:
                if _config(r) == config:
                    key = (
                        r["metric_source"],
                        r["workload"],
                        r["occurrence"],
                        _text(r["job"]),
                        _text(r["direction"]),
                        r["metric"],
                    )
                    by_metric[key][name].append(r)
        for key in sorted(by_metric, key=_metric_sort):
            pair = by_metric[key]
            if not pair["a"] or not pair["b"]:
                continue
            out.append(_row(a, b, shared, pair["a"], pair["b"], rng))
    adjusted = stats.adjust([r["p_value"] for r in out])
    flag_repeats(out, ("a", "b"))
    for r, q in zip(out, adjusted, strict=True):
        r["p_adjusted"] = q
        comp = r.pop("_comparison")
        r["verdict"] = stats.verdict(comp, q, r["metric"] in HIGHER_IS_BETTER)
        if r["verdict"] == "too_few_samples":
            r["note"] = _too_few_note(r)
        noisy = [s.upper() for s in ("a", "b") if r[f"{s}_repeats_disagree"]]
        texts = r.pop("_texts_note")
        for flag in (
            f"repeats of {' and '.join(noisy)} disagree beyond their slots' noise" if noisy else "",
            texts,
        ):
            if flag:
                r["note"] = f"{r['note']}; {flag}" if r["note"] else flag
    return out


def _metric_sort(key: tuple[Any, ...]) -> tuple[Any, ...]:
    from iofleet.report.model import METRIC_ORDER

    source, workload, occurrence, job, direction, metric = key
    rank = METRIC_ORDER.index(metric) if metric in METRIC_ORDER else len(METRIC_ORDER)
    return (source != "fio", source, workload, occurrence, job, direction, rank, metric)


def _row(
    a: Side,
    b: Side,
    shared: str,
    rows_a: list[dict[str, Any]],
    rows_b: list[dict[str, Any]],
    rng: Any,
) -> dict[str, Any]:
    from iofleet.results import stats

    groups_a, groups_b = _groups(rows_a), _groups(rows_b)
    sum_a, sum_b = stats.summarize(groups_a), stats.summarize(groups_b)
    comp = stats.compare(groups_a, groups_b, rng)
    first = rows_a[0]
    metric = first["metric"]
    row: dict[str, Any] = {
        "metric": metric,
        "unit": first["unit"],
        "better": "higher" if metric in HIGHER_IS_BETTER else "lower",
        "metric_source": first["metric_source"],
        "workload_index": first["workload_index"],
        "workload": first["workload"],
        "job": first["job"],
        "direction": first["direction"],
        "config": shared,
        "a_run": a.run_id,
        "a_selector": a.text,
        "b_run": b.run_id,
        "b_selector": b.text,
        "a": sum_a.mean,
        "b": sum_b.mean,
        "ratio": comp.ratio,
        "ci_low": comp.ci_low,
        "ci_high": comp.ci_high,
        "shift": comp.shift,
        "p_value": comp.p_value,
        "p_adjusted": None,
        "verdict": None,
        "design_effect": comp.design_effect,
        "slots_needed": comp.slots_needed,
        "repeats_needed": comp.repeats_needed,
        "note": "",
        "_comparison": comp,
        "_texts_note": _job_texts_note(rows_a, rows_b),
    }
    for name, s in (("a", sum_a), ("b", sum_b)):
        row[f"{name}_n_slots"] = s.n_slots
        row[f"{name}_n_repeats"] = s.n_repeats
        row[f"{name}_median"] = s.median
        row[f"{name}_cv"] = s.cv
        row[f"{name}_cv_repeats"] = s.cv_repeats
        row[f"{name}_cv_within"] = s.cv_within
        row[f"{name}_repeats_p"] = s.repeats_p
        row[f"{name}_repeats_disagree"] = None
    return row


def _job_texts(rows: Sequence[Mapping[str, Any]]) -> set[str]:
    """The job-text digests (slots.fio_jobs, docs/decisions.md #95) of a fio workload's
    slot rows: empty for other workloads and for slots recorded without one."""
    from iofleet.results.ingest import fio_job_text

    found: set[str] = set()
    for r in rows:
        if r.get("metric_source") == "fio":
            text = fio_job_text(r.get("fio_jobs"), r["workload_index"])
            if text:
                found.add(text)
    return found


def _job_texts_note(
    rows_a: Sequence[Mapping[str, Any]], rows_b: Sequence[Mapping[str, Any]]
) -> str:
    """A note when the two sides (or one side's slots) ran different texts of the fio job:
    then the comparison is of two benchmarks under one name, not of two storages."""
    texts_a, texts_b = _job_texts(rows_a), _job_texts(rows_b)
    job = quote(rows_a[0]["workload"])
    for name, texts in (("A", texts_a), ("B", texts_b)):
        if len(texts) > 1:
            return f"side {name}'s slots ran {len(texts)} texts of fio job {job} ({', '.join(sorted(texts))})"
    if texts_a and texts_b and texts_a != texts_b:
        return (
            f"A and B ran different texts of fio job {job} (sha256 {min(texts_a)}... vs "
            f"{min(texts_b)}...): not the same benchmark"
        )
    return ""


def _too_few_note(row: Mapping[str, Any]) -> str:
    from iofleet.results.stats import POWER_METHOD

    deff = row["design_effect"]
    effective = f" (design effect {deff:.2f} of the repeats)" if deff > 1 else ""
    have = (
        f"{row['a_n_slots']} vs {row['b_n_slots']} slots{effective}: the Mann-Whitney test "
        "cannot reach p < 0.05"
    )
    if row["slots_needed"] is None:
        return f"{have}; too few slots to estimate the spread"
    return (
        f"{have}; to detect a 5% difference: {row['slots_needed']} slots per side "
        f"({row['repeats_needed']} repeats at these fleet sizes) [{POWER_METHOD}]"
    )


def flag_repeats(rows: list[dict[str, Any]], prefixes: Sequence[str]) -> None:
    """Set `{prefix}_repeats_disagree` from `{prefix}_repeats_p`, BH-adjusted over
    every test in `rows` (True/False; None when the repeats could not be tested)."""
    from iofleet.results import stats

    keys = [(i, p) for i, r in enumerate(rows) for p in prefixes]
    adjusted = stats.adjust([rows[i][f"{p}_repeats_p"] for i, p in keys])
    for (i, p), q in zip(keys, adjusted, strict=True):
        rows[i][f"{p}_repeats_disagree"] = None if q is None else q < stats.ALPHA


# --- output -------------------------------------------------------------------


def _json_value(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def render_json(rows: Sequence[Mapping[str, Any]]) -> str:
    return (
        json.dumps([{c: _json_value(r.get(c)) for c in ROW_COLUMNS} for r in rows], indent=1) + "\n"
    )


def render_csv(rows: Sequence[Mapping[str, Any]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(ROW_COLUMNS)
    for r in rows:
        writer.writerow(["" if r.get(c) is None else _json_value(r.get(c)) for c in ROW_COLUMNS])
    return buf.getvalue()


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.1f}%"


def _side_text(row: Mapping[str, Any], side: str) -> str:
    from iofleet.report.units import fmt_value

    n = f"{row[f'{side}_n_slots']}/{row[f'{side}_n_repeats']}"
    flag = " !" if row[f"{side}_repeats_disagree"] else ""
    mean = fmt_value(row[side], row["unit"])
    median = fmt_value(row[f"{side}_median"], row["unit"])
    return f"{mean} (med {median}) cv {_pct(row[f'{side}_cv'])} n {n}{flag}"


def render_table(rows: Sequence[Mapping[str, Any]], a: Side, b: Side) -> str:
    from iofleet.report.model import METRIC_TITLES
    from iofleet.results.stats import POWER_METHOD

    def label(side: Side) -> str:
        return f"{side.run_id}" + (f" [{side.text}]" if side.text else "")

    lines = [f"A: {label(a)}", f"B: {label(b)}"]
    lines.append(
        "ratio = mean B / mean A with its 95% two-stage bootstrap interval (repeats, then "
        "slots); p = Mann-Whitney U over slots, Benjamini-Hochberg adjusted over every row; "
        "sides: mean (median), CV across slots, n slots/repeats ('!' = repeats disagree)"
    )
    header = ("metric", "A", "B", "ratio [95% CI]", "p adj", "verdict")
    groups: dict[tuple[Any, ...], list[Mapping[str, Any]]] = defaultdict(list)
    for r in rows:
        key = (r["config"], r["metric_source"], r["workload"], r["job"], r["direction"])
        groups[key].append(r)
    method_used = False
    for (config, source, workload, job, direction), group in groups.items():
        title = f"{source} {workload}"
        if job and job != workload:
            title += f": {job}"
        if direction:
            title += f" ({direction})"
        if config:
            title += f"  [{config}]"
        table: list[tuple[str, ...]] = []
        notes: list[str] = []
        for r in group:
            metric = METRIC_TITLES.get(r["metric"], r["metric"])
            ratio = "-" if r["ratio"] is None else f"{r['ratio']:.3f}"
            if r["ci_low"] is not None:
                ratio += f" [{r['ci_low']:.3f}, {r['ci_high']:.3f}]"
            p = "-" if r["p_adjusted"] is None else f"{r['p_adjusted']:.3g}"
            if r["note"]:
                bracket = f" [{POWER_METHOD}]"
                method_used = method_used or bracket in r["note"]
                notes.append(f"    {metric}: {r['note'].replace(bracket, '')}")
            table.append((metric, _side_text(r, "a"), _side_text(r, "b"), ratio, p, r["verdict"]))
        lines.append("")
        lines.append(title)
        widths = [max(len(x[i]) for x in [header, *table]) for i in range(len(header))]
        for x in [header, *table]:
            lines.append(
                "  " + "  ".join(f"{c:<{w}}" for c, w in zip(x, widths, strict=True)).rstrip()
            )
        if notes:
            lines.append("  notes:")
            lines += notes
    counts = {v: sum(1 for r in rows if r["verdict"] == v) for v in VERDICTS}
    lines.append("")
    lines.append(
        f"{len(rows)} comparisons: " + ", ".join(f"{n} {v}" for v, n in counts.items() if n)
    )
    if method_used:
        lines.append(f"slots needed for a 5% difference: {POWER_METHOD}")
    return "\n".join(lines) + "\n"


# --- command --------------------------------------------------------------------


def compare_command(
    warehouse: Path | None,
    runs: Sequence[str],
    a_selector: str | None,
    b_selector: str | None,
    fmt: str,
    **source: Any,
) -> int:
    """`source`: iofleet.report.cli.open_source's Athena options (athena, workgroup,
    database, athena_output); without them the DuckDB `warehouse`."""
    import sys

    from iofleet.report.cli import open_source
    from iofleet.results.source import known_runs, known_text

    if fmt not in FORMATS:
        raise ValidationFailed([Problem("--format", f"expected one of {', '.join(FORMATS)}")])
    sel_a = parse_selector("--a", a_selector)
    sel_b = parse_selector("--b", b_selector)
    if len(runs) not in (1, 2):
        raise ValidationFailed(
            [Problem("RUNS", f"expected RUN_A [RUN_B] (one or two run ids), got {len(runs)}")]
        )
    if len(runs) == 1 and not (sel_a and sel_b):
        raise ValidationFailed(
            [Problem("--a/--b", "with one run, pick both sides with --a and --b")]
        )
    if len(runs) == 2 and runs[0] == runs[1] and not (sel_a or sel_b):
        raise ValidationFailed(
            [Problem("RUN_B", "same run as RUN_A; pick configurations with --a/--b")]
        )
    run_a, run_b = runs[0], runs[-1]
    with open_source(warehouse, **source) as src:
        known = known_runs(src, sorted({run_a, run_b}))
        for flag, run_id in (("RUN_A", run_a), ("RUN_B", run_b)):
            if run_id not in known:
                raise ValidationFailed(
                    [Problem(flag, f"unknown run {quote(run_id)} {known_text(src)}")]
                )
        rows = load_slot_values(src, sorted({run_a, run_b}))
    a = Side("a", run_a, sel_a, a_selector or "")
    b = Side("b", run_b, sel_b, b_selector or "")
    result = compare_rows(rows, a, b)
    if not result:  # nothing measured by both: no comparison, and no empty table
        raise ValidationFailed(
            [
                Problem(
                    "--b" if len(runs) == 1 else "RUN_B",
                    "measured no workload, job, direction and metric that the A side "
                    "measured: nothing to compare",
                )
            ]
        )
    if fmt == "json":
        text = render_json(result)
    elif fmt == "csv":
        text = render_csv(result)
    else:
        text = render_table(result, a, b)
    sys.stdout.write(text)
    sys.stdout.flush()
    return 0
