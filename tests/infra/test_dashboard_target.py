"""The QuickSight decision table's target, as synthesized: its parameters and their
controls, every column the definition names, and what its calculated fields pick.

QuickSight has no local engine. To check what the calculated fields do, this file
evaluates their expressions (read from the synthesized template) with a small
hand-written evaluator of the subset they use (ifelse, AND/OR, comparisons, locate,
concat, isNotNull, minOver(..., PRE_AGG)) over the rows DuckDB returns for the decision
data set's own SQL (from the template), and compares the rows the table shows with
`iofleet report`'s decision table (iofleet/results/decide.py) for the same target.
The evaluator is a stand-in for QuickSight, not QuickSight.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from iofleet.report.decision import load_decision
from iofleet.results.decide import parse_target
from iofleet.results.warehouse import Warehouse, transpile_view
from tests.infra.conftest import Synth
from tests.unit.test_decision_query import RUN, _planted, _warehouse

FIELD = re.compile(r"(?<!\$)\{([A-Za-z0-9_]+)\}")
PARAM = re.compile(r"\$\{([A-Za-z0-9_]+)\}")
FUNCTIONS = {"ifelse", "AND", "OR", "locate", "concat", "isNotNull", "minOver", "PRE_AGG"}


def _definition(synth: Synth) -> dict[str, Any]:
    (dash,) = synth.resources("AWS::QuickSight::Dashboard").values()
    return dict(dash["Properties"]["Definition"])


def _data_set_columns(synth: Synth) -> dict[str, list[str]]:
    """Dashboard data set identifier -> its declared columns."""
    by_logical = {}
    for logical, r in synth.resources("AWS::QuickSight::DataSet").items():
        table = next(iter(r["Properties"]["PhysicalTableMap"].values()))
        spec = table.get("CustomSql") or table["RelationalTable"]
        by_logical[logical] = [c["Name"] for c in spec.get("Columns") or spec["InputColumns"]]
    return {
        d["Identifier"]: by_logical[d["DataSetArn"]["Fn::GetAtt"][0]]
        for d in _definition(synth)["DataSetIdentifierDeclarations"]
    }


def _column_refs(node: Any) -> list[dict[str, str]]:
    if isinstance(node, dict):
        if set(node) == {"DataSetIdentifier", "ColumnName"}:
            return [node]
        return [ref for v in node.values() for ref in _column_refs(v)]
    if isinstance(node, list):
        return [ref for v in node for ref in _column_refs(v)]
    return []


def test_every_column_the_dashboard_names_exists(synth_quicksight: Synth) -> None:
    definition = _definition(synth_quicksight)
    columns = _data_set_columns(synth_quicksight)
    calculated: dict[str, set[str]] = {}
    for f in definition["CalculatedFields"]:
        calculated.setdefault(f["DataSetIdentifier"], set()).add(f["Name"])
    params = {next(iter(p.values()))["Name"] for p in definition["ParameterDeclarations"]}
    # then: each visual's, filter's and sort's column is a data set column or a calculated
    # field of that data set
    refs = _column_refs(definition)
    assert refs
    for ref in refs:
        ds, name = ref["DataSetIdentifier"], ref["ColumnName"]
        assert name in set(columns[ds]) | calculated.get(ds, set()), ref
    # and: each expression names only its data set's columns and calculated fields, the
    # declared parameters, string and number literals, and the functions it uses
    for f in definition["CalculatedFields"]:
        expression, ds = f["Expression"], f["DataSetIdentifier"]
        known = set(columns[ds]) | calculated[ds]
        assert set(FIELD.findall(expression)) <= known, (f["Name"], expression)
        assert set(PARAM.findall(expression)) <= params, (f["Name"], expression)
        bare = re.sub(r"'[^']*'|\$?\{[A-Za-z0-9_]+\}", " ", expression)
        words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", bare))
        assert words <= FUNCTIONS, (f["Name"], words - FUNCTIONS)


def test_target_parameters_have_controls_on_the_sheet(synth_quicksight: Synth) -> None:
    from iofleet.results.decide import OPS, STATS, TARGET_METRICS

    definition = _definition(synth_quicksight)
    declared = {}
    for p in definition["ParameterDeclarations"]:
        ((kind, body),) = p.items()
        declared[body["Name"]] = (kind, body["DefaultValues"]["StaticValues"])
    assert declared == {
        "TargetStat": ("StringParameterDeclaration", ["p98"]),
        "TargetMetric": ("StringParameterDeclaration", ["none"]),
        "TargetOp": ("StringParameterDeclaration", ["<="]),
        "TargetUnit": ("StringParameterDeclaration", ["-"]),
        "TargetValue": ("DecimalParameterDeclaration", [105]),
    }
    (sheet,) = definition["Sheets"]
    controls = {}
    for c in sheet["ParameterControls"]:
        ((kind, body),) = c.items()
        values = body.get("SelectableValues", {}).get("Values")
        controls[body["SourceParameterName"]] = (kind, values)
    # then: one control per parameter, the dropdowns offering what --target accepts
    assert set(controls) == set(declared)
    assert controls["TargetStat"] == ("Dropdown", list(STATS))
    assert controls["TargetMetric"] == ("Dropdown", ["none", *TARGET_METRICS])
    assert controls["TargetOp"] == ("Dropdown", list(OPS))
    assert controls["TargetValue"] == ("TextField", None)
    assert "MiB/s" in controls["TargetUnit"][1] and "us" in controls["TargetUnit"][1]
    # and: the decision table shows the rows the calculated field `shown` picks
    groups = {g["FilterGroupId"]: g for g in definition["FilterGroups"]}
    shown = groups["decision-shown"]["Filters"][0]["NumericEqualityFilter"]
    assert (shown["Column"]["ColumnName"], shown["Value"]) == ("shown", 1)
    scope = groups["decision-shown"]["ScopeConfiguration"]["SelectedSheets"]
    assert scope["SheetVisualScopingConfigurations"][0]["VisualIds"] == ["decision-table"]


# ----------------------------------------------------------- the evaluator (stand-in)


def _ifelse(*args: Any) -> Any:
    for i in range(0, len(args) - 1, 2):
        if args[i]:
            return args[i + 1]
    return args[-1]


def _locate(text: str, sub: str) -> int:
    return text.find(sub) + 1


def _python(expression: str) -> str:
    """One QuickSight expression of the subset -> a Python expression over R (row), P
    (parameters), MINOVER (the PRE_AGG window)."""
    out = re.sub(
        r"minOver\((.*), \[([^\]]*)\], PRE_AGG\)",
        lambda m: "MINOVER(lambda R: {}, [{}], R)".format(
            m[1], ", ".join(repr(f) for f in FIELD.findall(m[2]))
        ),
        expression,
    )
    out = PARAM.sub(lambda m: f"P[{m[1]!r}]", out)
    out = FIELD.sub(lambda m: f"R[{m[1]!r}]", out)
    out = re.sub(r"(?<![<>=!])=(?!=)", "==", out)
    out = out.replace(" AND ", " and ").replace(" OR ", " or ")
    out = out.replace("ifelse(", "IFELSE(").replace("locate(", "LOCATE(")
    out = out.replace("concat(", "CONCAT(").replace("isNotNull(", "NOTNULL(")
    return out


def _evaluate(
    fields: dict[str, str], rows: list[dict[str, Any]], params: dict[str, Any]
) -> list[dict[str, Any]]:
    code = {name: compile(_python(e), name, "eval") for name, e in fields.items()}
    cache: dict[tuple[int, str], Any] = {}

    class Row(dict):  # type: ignore[type-arg]
        def __missing__(self, key: str) -> Any:
            if key not in code:
                raise KeyError(key)
            if (id(self), key) not in cache:
                cache[(id(self), key)] = eval(code[key], env(self))  # noqa: S307
            return cache[(id(self), key)]

    table = [Row(r) for r in rows]

    def minover(fn: Callable[[Any], Any], partition: list[str], row: Row) -> Any:
        key = [row[f] for f in partition]
        return min(fn(r) for r in table if [r[f] for f in partition] == key)

    def env(row: Row) -> dict[str, Any]:
        return {
            "R": row, "P": params, "IFELSE": _ifelse, "LOCATE": _locate,
            "CONCAT": lambda *a: "".join(a), "NOTNULL": lambda v: v is not None,
            "MINOVER": minover, "__builtins__": {},
        }  # fmt: skip

    return [{**r, **{n: r[n] for n in fields}} for r in table]


def _params(target: str | None) -> dict[str, Any]:
    if target is None:
        return {"TargetStat": "p98", "TargetMetric": "none", "TargetOp": "<=",
                "TargetUnit": "-", "TargetValue": 105.0}  # fmt: skip
    m = re.fullmatch(r"([a-z0-9]+)_([a-z0-9_]+?)(<=|>=|<|>)([0-9.]+)([A-Za-z/]*)", target)
    assert m
    return {"TargetStat": m[1], "TargetMetric": m[2], "TargetOp": m[3],
            "TargetValue": float(m[4]), "TargetUnit": m[5] or "-"}  # fmt: skip


CONFIG = ("instance_type", "storage_label", "storage_type", "storage_detail", "fleet_size")


@pytest.mark.parametrize(
    ("make", "target"),
    [
        (_planted, "p98_build_minutes<=105"),
        (_planted, None),
        (_planted, "p50_iops>=2000"),
        (lambda: _warehouse(2), "p90_clat_mean<=500us"),
        (lambda: _warehouse(3), "mean_throughput>48MiB/s"),
        (lambda: _warehouse(4), "p0_build_seconds<60"),
    ],
)
def test_calculated_fields_show_the_reports_decision_table(
    synth_quicksight: Synth, make: Callable[[], Warehouse], target: str | None
) -> None:
    definition = _definition(synth_quicksight)
    fields = {
        f["Name"]: f["Expression"]
        for f in definition["CalculatedFields"]
        if f["DataSetIdentifier"] == "decision"
    }
    (sql,) = [
        t["CustomSql"]["SqlQuery"]
        for r in synth_quicksight.resources("AWS::QuickSight::DataSet").values()
        for t in r["Properties"]["PhysicalTableMap"].values()
        if "CustomSql" in t and t["CustomSql"]["Name"] == "decision"
    ]
    conditions = parse_target(target) if target else []
    with make() as wh:
        # when: the data set's SQL runs on the warehouse and the fields are evaluated
        rows = wh.query(f"SELECT * FROM ({transpile_view(sql)}) q WHERE run_id = ?", [RUN])
        report = load_decision(wh, RUN, conditions)["decision"]
    shown = [r for r in _evaluate(fields, rows, _params(target)) if r["shown"] == 1]
    shown.sort(key=lambda r: (r["workload_index"], r["rank"]))
    # then: the table's rows are the report's, in its order, with its target and front
    key = ("metric", "stat", "rank", *CONFIG)
    assert [tuple(r[k] for k in key) for r in shown] == [tuple(r[k] for k in key) for r in report]
    for got, want in zip(shown, report, strict=True):
        expected = (
            "-" if want["meets_target"] is None
            else "CHEAPEST" if want["cheapest_meeting_target"]
            else "yes" if want["meets_target"] else "no"
        )  # fmt: skip
        assert got["meets_target"] == expected, (got, want)
        assert got["pareto_front"] == ("*" if want["pareto"] else ""), (got, want)
        for f in ("usd_per_1k_iops", "usd_per_build", "usd_per_instance_hour"):
            assert (got[f] is None) == (want[f] is None)
    if target == "p98_build_minutes<=105":
        build = [r for r in shown if r["metric"] == "wall_seconds"]
        assert [r["meets_target"] for r in build] == ["yes", "yes", "CHEAPEST", "no", "no"]
