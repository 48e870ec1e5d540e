"""The QuickSight decision table's target: five parameters (`--target STAT_METRIC OP NUMBER
[UNIT]`, iofleet/results/decide.py, one word each), their controls on the sheet, and the
calculated fields over queries/decision.sql's rows that pick the rows the table shows,
mark those meeting the target and the cheapest of them per slot, and show the Pareto flag.

The fields, in QuickSight's expression language (fields in braces, parameters as ${Name}):
- target_metric: the query's metric for ${TargetMetric}; target_scale: the number's unit
  to the warehouse unit (0: a unit that does not fit the metric, so no target);
- target_applies: the workload measured that metric (`workload_metrics`), as the report's
  target applies only to the workloads measuring its metric;
- shown: applying workloads show the target metric's rows at ${TargetStat}, the others
  their default metric (`ranked`) at P50 (the decision table filters on shown = 1);
- meets / cheapest: the row's value against ${TargetValue} x target_scale under
  ${TargetOp}; the cheapest is the meeting row with a known cost and the least
  `cost_order` in its workload (a PRE_AGG minOver): cheapest per slot, ties by rank;
- meets_target (CHEAPEST / yes / no / -) and pareto_front (*) for display.
A unit on a metric whose unit is fixed by its name (build_minutes, iops) is ignored here,
where the CLI refuses it.
"""

from __future__ import annotations

from aws_cdk import aws_quicksight as qs

from iofleet.results.decide import OPS, RATE_UNITS, STATS, TARGET_METRICS, TIME_UNITS

# `--target STAT_METRIC OP NUMBER [UNIT]` (iofleet/results/decide.py) as five parameters.
NO_TARGET = "none"
NO_UNIT = "-"
TARGET_PARAMETERS = {
    "TargetStat": ("Target statistic", tuple(STATS), "p98"),
    "TargetMetric": ("Target metric", (NO_TARGET, *TARGET_METRICS), NO_TARGET),
    "TargetOp": ("Target operator", OPS, "<="),
    "TargetUnit": (
        "Target unit (latency, throughput)",
        (NO_UNIT, *TIME_UNITS, *RATE_UNITS),
        NO_UNIT,
    ),
}
TARGET_VALUE = "TargetValue"
TARGET_VALUE_DEFAULT = 105.0
# every workload's partition (the query's rank and cost_order are per these and metric, stat)
WORKLOAD_PARTITION = (
    "run_id", "metric_source", "workload_index", "workload", "job", "direction", "metric", "stat",
)  # fmt: skip
NOT_CHEAPEST = 1_000_000  # above any cost_order


def _quote(text: str) -> str:
    assert "'" not in text, text
    return f"'{text}'"


def _target_metric_expression() -> str:
    """${TargetMetric} (a --target metric name) -> the query's metric column value."""
    arms = [
        f"${{TargetMetric}} = {_quote(n)}, {_quote(t.metric)}" for n, t in TARGET_METRICS.items()
    ]
    return f"ifelse({', '.join(arms)}, {_quote(NO_TARGET)})"


def _target_scale_expression() -> str:
    """The number's unit -> the warehouse unit (ns, B/s, s, IOPS); 0 when the unit does not
    fit the metric (the target then applies to nothing)."""
    arms = [
        f"${{TargetMetric}} = {_quote(n)}, {t.scale}"
        for n, t in TARGET_METRICS.items()
        if t.units is None
    ]
    for family in (TIME_UNITS, RATE_UNITS):
        names = [n for n, t in TARGET_METRICS.items() if t.units is family]
        either = " OR ".join(f"${{TargetMetric}} = {_quote(n)}" for n in names)
        arms += [f"({either}) AND ${{TargetUnit}} = {_quote(u)}, {v!r}" for u, v in family.items()]
    return f"ifelse({', '.join(arms)}, 0.0)"


def _holds(threshold: str) -> str:
    return " OR ".join(
        f"(${{TargetOp}} = {_quote(op)} AND {{value}} {op} {threshold})" for op in OPS
    )


CALCULATED_FIELDS: dict[str, str] = {
    "target_metric": _target_metric_expression(),
    "target_scale": _target_scale_expression(),
    "target_threshold": "${TargetValue} * {target_scale}",
    # the workload measured the target's metric: the target ranks it (else its default)
    "target_applies": (
        "ifelse({target_scale} > 0 AND "
        "locate({workload_metrics}, concat(',', {target_metric}, ',')) > 0, 1, 0)"
    ),
    "shown": (
        "ifelse({target_applies} = 1, "
        "ifelse({metric} = {target_metric} AND {stat} = ${TargetStat}, 1, 0), "
        "{ranked} = 1 AND {stat} = 'p50', 1, 0)"
    ),
    "meets": (
        "ifelse({target_applies} = 1 AND {metric} = {target_metric} AND {stat} = ${TargetStat} "
        f"AND ({_holds('{target_threshold}')}), 1, 0)"
    ),
    "cheapest": (
        "ifelse({meets} = 1 AND isNotNull({usd_per_slot}) AND {cost_order} = minOver("
        f"ifelse({{meets}} = 1 AND isNotNull({{usd_per_slot}}), {{cost_order}}, {NOT_CHEAPEST}), "
        f"[{', '.join('{' + f + '}' for f in WORKLOAD_PARTITION)}], PRE_AGG), 1, 0)"
    ),
    "meets_target": (
        "ifelse({cheapest} = 1, 'CHEAPEST', {meets} = 1, 'yes', "
        "{target_applies} = 1 AND {metric} = {target_metric}, 'no', '-')"
    ),
    "pareto_front": "ifelse({pareto} = 1, '*', '')",
}
# the decision table's columns, in order (the query's columns and calculated fields)
DECISION_TABLE = (
    "workload_index", "workload", "job", "direction", "metric", "stat", "rank",
    "configuration", "repeats", "slots", "unit", "value", "p0", "p50", "p100",
    "usd_per_run", "usd_per_slot", "usd_per_instance_hour", "usd_per_1k_iops", "usd_per_build",
    "cost_complete", "meets_target", "pareto_front",
)  # fmt: skip


def parameters() -> list[qs.CfnDashboard.ParameterDeclarationProperty]:
    out = [
        qs.CfnDashboard.ParameterDeclarationProperty(
            string_parameter_declaration=qs.CfnDashboard.StringParameterDeclarationProperty(
                name=name,
                parameter_value_type="SINGLE_VALUED",
                default_values=qs.CfnDashboard.StringDefaultValuesProperty(static_values=[default]),
            )
        )
        for name, (_, _, default) in TARGET_PARAMETERS.items()
    ]
    out.append(
        qs.CfnDashboard.ParameterDeclarationProperty(
            decimal_parameter_declaration=qs.CfnDashboard.DecimalParameterDeclarationProperty(
                name=TARGET_VALUE,
                parameter_value_type="SINGLE_VALUED",
                default_values=qs.CfnDashboard.DecimalDefaultValuesProperty(
                    static_values=[TARGET_VALUE_DEFAULT]
                ),
            )
        )
    )
    return out


def parameter_controls() -> list[qs.CfnDashboard.ParameterControlProperty]:
    """The target on the sheet: a dropdown per word of it, a text field for the number."""
    out = [
        qs.CfnDashboard.ParameterControlProperty(
            dropdown=qs.CfnDashboard.ParameterDropDownControlProperty(
                parameter_control_id=f"control-{name}",
                source_parameter_name=name,
                title=title,
                type="SINGLE_SELECT",
                selectable_values=qs.CfnDashboard.ParameterSelectableValuesProperty(
                    values=list(values)
                ),
            )
        )
        for name, (title, values, _) in TARGET_PARAMETERS.items()
    ]
    out.append(
        qs.CfnDashboard.ParameterControlProperty(
            text_field=qs.CfnDashboard.ParameterTextFieldControlProperty(
                parameter_control_id=f"control-{TARGET_VALUE}",
                source_parameter_name=TARGET_VALUE,
                title="Target number (in the unit; build_minutes in minutes)",
            )
        )
    )
    return out
