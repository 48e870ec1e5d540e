"""Opt-in QuickSight: an Athena data source, data sets and a dashboard.

Data sets: `cell_percentiles` (the view), and two over the query
iofleet/results/sql/queries/decision.sql (custom SQL, the same text the report's
tests check against iofleet/results/decide.py): all its rows, one per workload x
configuration x metric x statistic (the decision table), and its P50 rows (per
configuration and metric, P0..P100 across slots: the charts).

One sheet: a run filter (dropdown, every visual); the target (five parameters with
their controls: statistic, metric, operator, number, unit, as `--target
'p98_build_minutes<=105'` spells it); the decision table (calculated fields pick, per
workload, the target's metric and statistic when the workload measured that metric,
else its default metric at P50, and mark the rows meeting the target and the cheapest
one per slot: infra/constructs/dashboard_target.py); one P0/P50/P75/P90/P98/P100 bar chart per metric (a visual filter on
`metric`); and the per-cell percentile table. QuickSight has no local engine: this
definition is checked by template assertions (tests/infra/test_stack.py, which also
evaluates the calculated fields over DuckDB's rows of the query against the report's
decision table) and the infra gates only.
"""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_quicksight as qs
from constructs import Construct

from infra.constructs.dashboard_target import (
    CALCULATED_FIELDS,
    DECISION_TABLE,
    parameter_controls,
    parameters,
)
from infra.nag import ack
from iofleet.report.model import METRIC_TITLES
from iofleet.results.sql import PERCENTILES, query_sql

OWNER_ACTIONS_SOURCE = [
    "quicksight:DescribeDataSource",
    "quicksight:DescribeDataSourcePermissions",
    "quicksight:PassDataSource",
    "quicksight:UpdateDataSource",
    "quicksight:DeleteDataSource",
    "quicksight:UpdateDataSourcePermissions",
]
OWNER_ACTIONS_DATASET = [
    "quicksight:DescribeDataSet",
    "quicksight:DescribeDataSetPermissions",
    "quicksight:PassDataSet",
    "quicksight:DescribeIngestion",
    "quicksight:ListIngestions",
    "quicksight:UpdateDataSet",
    "quicksight:DeleteDataSet",
    "quicksight:CreateIngestion",
    "quicksight:CancelIngestion",
    "quicksight:UpdateDataSetPermissions",
]
OWNER_ACTIONS_DASHBOARD = [
    "quicksight:DescribeDashboard",
    "quicksight:ListDashboardVersions",
    "quicksight:UpdateDashboardPermissions",
    "quicksight:QueryDashboard",
    "quicksight:UpdateDashboard",
    "quicksight:DeleteDashboard",
    "quicksight:DescribeDashboardPermissions",
    "quicksight:UpdateDashboardPublishedVersion",
]

# cell_percentiles columns the dashboard uses (the view is defined in iofleet/results/sql/).
COLUMNS = [
    ("run_id", "STRING"),
    ("storage_label", "STRING"),
    ("fleet_size", "INTEGER"),
    ("metric", "STRING"),
    ("p0", "DECIMAL"),
    ("p50", "DECIMAL"),
    ("p75", "DECIMAL"),
    ("p90", "DECIMAL"),
    ("p98", "DECIMAL"),
    ("p100", "DECIMAL"),
]


# queries/decision.sql's columns (QuickSight needs them declared for custom SQL)
DECISION_COLUMNS = [
    ("run_id", "STRING"),
    ("metric_source", "STRING"),
    ("workload_index", "INTEGER"),
    ("workload", "STRING"),
    ("job", "STRING"),
    ("direction", "STRING"),
    ("stat", "STRING"),
    ("rank", "INTEGER"),
    ("ranked", "BOOLEAN"),
    ("workload_metrics", "STRING"),
    ("instance_type", "STRING"),
    ("storage_label", "STRING"),
    ("storage_type", "STRING"),
    ("storage_detail", "STRING"),
    ("fleet_size", "INTEGER"),
    ("configuration", "STRING"),
    ("chart_label", "STRING"),
    ("repeats", "INTEGER"),
    ("slots", "INTEGER"),
    ("metric", "STRING"),
    ("unit", "STRING"),
    ("value", "DECIMAL"),
    *((f"p{p}", "DECIMAL") for p in PERCENTILES),
    ("mean", "DECIMAL"),
    ("usd_per_run", "DECIMAL"),
    ("usd_per_slot", "DECIMAL"),
    ("usd_per_instance_hour", "DECIMAL"),
    ("usd_per_1k_iops", "DECIMAL"),
    ("usd_per_build", "DECIMAL"),
    ("cost_complete", "BOOLEAN"),
    ("pareto", "BOOLEAN"),
    ("cost_order", "INTEGER"),
]
# one percentile chart per metric, in the report's order (slot_metrics' metrics)
CHART_METRICS = tuple(METRIC_TITLES)
PCT = tuple(f"p{p}" for p in PERCENTILES)
SHEET = "report"
DECISION_DS = "decision"
LADDER_DS = "ladders"
CELLS_DS = "cellpercentiles"


def decision_sql(p50_only: bool) -> str:
    """queries/decision.sql for a custom-SQL data set: comment lines dropped (QuickSight
    wraps the text), optionally only the P50 rows (one per configuration and metric:
    the charts)."""
    lines = [ln for ln in query_sql("decision").splitlines() if not ln.lstrip().startswith("--")]
    body = "\n".join(lines)
    return f"SELECT * FROM (\n{body}\n) d WHERE stat = 'p50'" if p50_only else body


class Dashboard(Construct):
    def __init__(
        self, scope: Construct, id: str, *, principal_arn: str, database: str, workgroup: str
    ) -> None:
        super().__init__(scope, id)
        stack = Stack.of(self)
        prefix = f"iofleet-{stack.stack_name.lower()}"
        self.data_source = qs.CfnDataSource(
            self,
            "Athena",
            aws_account_id=stack.account,
            data_source_id=f"{prefix}-athena",
            name="iofleet (Athena)",
            type="ATHENA",
            data_source_parameters=qs.CfnDataSource.DataSourceParametersProperty(
                athena_parameters=qs.CfnDataSource.AthenaParametersProperty(work_group=workgroup)
            ),
            ssl_properties=qs.CfnDataSource.SslPropertiesProperty(disable_ssl=False),
            permissions=[
                qs.CfnDataSource.ResourcePermissionProperty(
                    principal=principal_arn, actions=OWNER_ACTIONS_SOURCE
                )
            ],
        )
        self.data_set = qs.CfnDataSet(
            self,
            "CellPercentiles",
            aws_account_id=stack.account,
            data_set_id=f"{prefix}-cell-percentiles",
            name="iofleet cell percentiles",
            import_mode="DIRECT_QUERY",
            physical_table_map={
                "cellpercentiles": qs.CfnDataSet.PhysicalTableProperty(
                    relational_table=qs.CfnDataSet.RelationalTableProperty(
                        data_source_arn=self.data_source.attr_arn,
                        catalog="AwsDataCatalog",
                        schema=database,
                        name="cell_percentiles",
                        input_columns=[
                            qs.CfnDataSet.InputColumnProperty(name=n, type=t) for n, t in COLUMNS
                        ],
                    )
                )
            },
            permissions=[
                qs.CfnDataSet.ResourcePermissionProperty(
                    principal=principal_arn, actions=OWNER_ACTIONS_DATASET
                )
            ],
        )
        self.decision_set = self._custom_sql_set(
            "Decision", prefix, "decision", "iofleet decision table", decision_sql(False),
            principal_arn, database,
        )  # fmt: skip
        self.ladder_set = self._custom_sql_set(
            "Ladders", prefix, "ladders", "iofleet P0..P100 per configuration",
            decision_sql(True), principal_arn, database,
        )  # fmt: skip
        metric_visuals = [(f"ladder-{m}", m) for m in CHART_METRICS]
        self.dashboard = qs.CfnDashboard(
            self,
            "Percentiles",
            aws_account_id=stack.account,
            dashboard_id=f"{prefix}-percentiles",
            name="iofleet: decision table and percentiles per storage and fleet size",
            permissions=[
                qs.CfnDashboard.ResourcePermissionProperty(
                    principal=principal_arn, actions=OWNER_ACTIONS_DASHBOARD
                )
            ],
            definition=qs.CfnDashboard.DashboardVersionDefinitionProperty(
                data_set_identifier_declarations=[
                    qs.CfnDashboard.DataSetIdentifierDeclarationProperty(
                        identifier=ident, data_set_arn=data_set.attr_arn
                    )
                    for ident, data_set in (
                        (DECISION_DS, self.decision_set),
                        (LADDER_DS, self.ladder_set),
                        (CELLS_DS, self.data_set),
                    )
                ],
                parameter_declarations=parameters(),
                calculated_fields=[
                    qs.CfnDashboard.CalculatedFieldProperty(
                        data_set_identifier=DECISION_DS,
                        name=name,
                        expression=expression,
                    )
                    for name, expression in CALCULATED_FIELDS.items()
                ],
                filter_groups=[
                    _run_filter(),
                    _shown_filter(),
                    *(_metric_filter(vid, m) for vid, m in metric_visuals),
                ],
                sheets=[
                    qs.CfnDashboard.SheetDefinitionProperty(
                        sheet_id=SHEET,
                        name="Report",
                        filter_controls=[
                            qs.CfnDashboard.FilterControlProperty(
                                dropdown=qs.CfnDashboard.FilterDropDownControlProperty(
                                    filter_control_id="run-control",
                                    source_filter_id="run",
                                    title="Run",
                                    type="SINGLE_SELECT",
                                )
                            )
                        ],
                        parameter_controls=parameter_controls(),
                        visuals=[
                            _decision_visual(DECISION_DS),
                            *(_ladder_visual(LADDER_DS, vid, m) for vid, m in metric_visuals),
                            _table_visual(CELLS_DS),
                        ],
                    )
                ],
            ),
        )
        ack(
            self.dashboard,
            "CloudFormation-Validate::E1029",
            "QuickSight names its parameters ${Name} in calculated-field expressions; "
            "CloudFormation substitutes only inside Fn::Sub, so these are literal (wrapping "
            "them in Fn::Sub with ${!Name} trades this for cfn-lint W1020)",
        )

    def _custom_sql_set(
        self,
        id: str,
        prefix: str,
        name: str,
        title: str,
        sql: str,
        principal_arn: str,
        database: str,
    ) -> qs.CfnDataSet:
        stack = Stack.of(self)
        return qs.CfnDataSet(
            self,
            id,
            aws_account_id=stack.account,
            data_set_id=f"{prefix}-{name}",
            name=title,
            import_mode="DIRECT_QUERY",
            physical_table_map={
                name: qs.CfnDataSet.PhysicalTableProperty(
                    custom_sql=qs.CfnDataSet.CustomSqlProperty(
                        data_source_arn=self.data_source.attr_arn,
                        name=name,
                        sql_query=sql,
                        columns=[
                            qs.CfnDataSet.InputColumnProperty(name=n, type=t)
                            for n, t in DECISION_COLUMNS
                        ],
                    )
                )
            },
            permissions=[
                qs.CfnDataSet.ResourcePermissionProperty(
                    principal=principal_arn, actions=OWNER_ACTIONS_DATASET
                )
            ],
        )


def _scope(visual_ids: list[str] | None) -> qs.CfnDashboard.FilterScopeConfigurationProperty:
    return qs.CfnDashboard.FilterScopeConfigurationProperty(
        selected_sheets=qs.CfnDashboard.SelectedSheetsFilterScopeConfigurationProperty(
            sheet_visual_scoping_configurations=[
                qs.CfnDashboard.SheetVisualScopingConfigurationProperty(
                    sheet_id=SHEET,
                    scope="SELECTED_VISUALS" if visual_ids else "ALL_VISUALS",
                    visual_ids=visual_ids,
                )
            ]
        )
    )


def _run_filter() -> qs.CfnDashboard.FilterGroupProperty:
    """One run at a time on every visual (every data set has run_id), picked in a dropdown."""
    return qs.CfnDashboard.FilterGroupProperty(
        filter_group_id="run",
        cross_dataset="ALL_DATASETS",
        status="ENABLED",
        scope_configuration=_scope(None),
        filters=[
            qs.CfnDashboard.FilterProperty(
                category_filter=qs.CfnDashboard.CategoryFilterProperty(
                    filter_id="run",
                    column=_col(DECISION_DS, "run_id"),
                    configuration=qs.CfnDashboard.CategoryFilterConfigurationProperty(
                        filter_list_configuration=qs.CfnDashboard.FilterListConfigurationProperty(
                            match_operator="CONTAINS", select_all_options="FILTER_ALL_VALUES"
                        )
                    ),
                )
            )
        ],
    )


def _metric_filter(visual_id: str, metric: str) -> qs.CfnDashboard.FilterGroupProperty:
    return qs.CfnDashboard.FilterGroupProperty(
        filter_group_id=f"metric-{metric}",
        cross_dataset="SINGLE_DATASET",
        status="ENABLED",
        scope_configuration=_scope([visual_id]),
        filters=[
            qs.CfnDashboard.FilterProperty(
                category_filter=qs.CfnDashboard.CategoryFilterProperty(
                    filter_id=f"metric-{metric}",
                    column=_col(LADDER_DS, "metric"),
                    configuration=qs.CfnDashboard.CategoryFilterConfigurationProperty(
                        custom_filter_configuration=qs.CfnDashboard.CustomFilterConfigurationProperty(
                            match_operator="EQUALS",
                            category_value=metric,
                            null_option="NON_NULLS_ONLY",
                        )
                    ),
                )
            )
        ],
    )


def _title(text: str) -> qs.CfnDashboard.VisualTitleLabelOptionsProperty:
    return qs.CfnDashboard.VisualTitleLabelOptionsProperty(
        visibility="VISIBLE",
        format_text=qs.CfnDashboard.ShortFormatTextProperty(plain_text=text),
    )


def _dim(ds: str, name: str, numeric: bool = False) -> qs.CfnDashboard.DimensionFieldProperty:
    if numeric:
        return qs.CfnDashboard.DimensionFieldProperty(
            numerical_dimension_field=qs.CfnDashboard.NumericalDimensionFieldProperty(
                field_id=f"{ds}-d-{name}", column=_col(ds, name)
            )
        )
    return qs.CfnDashboard.DimensionFieldProperty(
        categorical_dimension_field=qs.CfnDashboard.CategoricalDimensionFieldProperty(
            field_id=f"{ds}-d-{name}", column=_col(ds, name)
        )
    )


def _max(ds: str, name: str, field_id: str | None = None) -> qs.CfnDashboard.MeasureFieldProperty:
    return qs.CfnDashboard.MeasureFieldProperty(
        numerical_measure_field=qs.CfnDashboard.NumericalMeasureFieldProperty(
            field_id=field_id or f"{ds}-m-{name}",
            column=_col(ds, name),
            aggregation_function=qs.CfnDashboard.NumericalAggregationFunctionProperty(
                simple_numerical_aggregation="MAX"
            ),
        )
    )


def _decision_visual(ds: str) -> qs.CfnDashboard.VisualProperty:
    """Per workload, its configurations ranked by the target's statistic of the target's
    metric (else P50 of the default metric), with the cost per instance-hour, run, slot,
    1k IOPS and build, the target and the Pareto front: the report's decision table."""
    return qs.CfnDashboard.VisualProperty(
        table_visual=qs.CfnDashboard.TableVisualProperty(
            visual_id="decision-table",
            title=_title(
                "Decision: per workload, configurations ranked by the target's statistic "
                "(else P50), with cost per run, slot, instance-hour, 1k IOPS and build; "
                "target: yes/no/CHEAPEST (cheapest per slot meeting it); Pareto: * on the "
                "front of $/slot against the ranked statistic"
            ),
            chart_configuration=qs.CfnDashboard.TableConfigurationProperty(
                field_wells=qs.CfnDashboard.TableFieldWellsProperty(
                    table_unaggregated_field_wells=qs.CfnDashboard.TableUnaggregatedFieldWellsProperty(
                        values=[
                            qs.CfnDashboard.UnaggregatedFieldProperty(
                                field_id=f"{ds}-u-{name}", column=_col(ds, name)
                            )
                            for name in DECISION_TABLE
                        ]
                    )
                ),
                sort_configuration=qs.CfnDashboard.TableSortConfigurationProperty(
                    row_sort=[
                        qs.CfnDashboard.FieldSortOptionsProperty(
                            field_sort=qs.CfnDashboard.FieldSortProperty(
                                field_id=f"{ds}-u-{name}", direction="ASC"
                            )
                        )
                        for name in ("workload_index", "job", "direction", "rank")
                    ]
                ),
            ),
        )
    )


def _shown_filter() -> qs.CfnDashboard.FilterGroupProperty:
    """The decision table shows the rows the calculated field `shown` picks."""
    return qs.CfnDashboard.FilterGroupProperty(
        filter_group_id="decision-shown",
        cross_dataset="SINGLE_DATASET",
        status="ENABLED",
        scope_configuration=_scope(["decision-table"]),
        filters=[
            qs.CfnDashboard.FilterProperty(
                numeric_equality_filter=qs.CfnDashboard.NumericEqualityFilterProperty(
                    filter_id="decision-shown",
                    column=_col(DECISION_DS, "shown"),
                    match_operator="EQUALS",
                    value=1,
                    null_option="NON_NULLS_ONLY",
                )
            )
        ],
    )


def _ladder_visual(ds: str, visual_id: str, metric: str) -> qs.CfnDashboard.VisualProperty:
    """P0..P100 across slots of one metric, one group of six bars per workload x configuration."""
    return qs.CfnDashboard.VisualProperty(
        bar_chart_visual=qs.CfnDashboard.BarChartVisualProperty(
            visual_id=visual_id,
            title=_title(
                f"{METRIC_TITLES[metric]} ({metric}): P0..P100 across slots per configuration"
            ),
            chart_configuration=qs.CfnDashboard.BarChartConfigurationProperty(
                orientation="HORIZONTAL",
                bars_arrangement="CLUSTERED",
                field_wells=qs.CfnDashboard.BarChartFieldWellsProperty(
                    bar_chart_aggregated_field_wells=qs.CfnDashboard.BarChartAggregatedFieldWellsProperty(
                        category=[_dim(ds, "chart_label")],
                        values=[_max(ds, p, f"{visual_id}-{p}") for p in PCT],
                    )
                ),
                legend=qs.CfnDashboard.LegendOptionsProperty(visibility="VISIBLE"),
            ),
        )
    )


def _col(ds: str, name: str) -> qs.CfnDashboard.ColumnIdentifierProperty:
    return qs.CfnDashboard.ColumnIdentifierProperty(data_set_identifier=ds, column_name=name)


def _table_visual(ds: str) -> qs.CfnDashboard.VisualProperty:
    group_by = [
        qs.CfnDashboard.DimensionFieldProperty(
            categorical_dimension_field=qs.CfnDashboard.CategoricalDimensionFieldProperty(
                field_id=f"d-{n}", column=_col(ds, n)
            )
        )
        for n in ("run_id", "metric", "storage_label")
    ] + [
        qs.CfnDashboard.DimensionFieldProperty(
            numerical_dimension_field=qs.CfnDashboard.NumericalDimensionFieldProperty(
                field_id="d-fleet_size", column=_col(ds, "fleet_size")
            )
        )
    ]
    values = [
        qs.CfnDashboard.MeasureFieldProperty(
            numerical_measure_field=qs.CfnDashboard.NumericalMeasureFieldProperty(
                field_id=f"m-{p}",
                column=_col(ds, p),
                aggregation_function=qs.CfnDashboard.NumericalAggregationFunctionProperty(
                    simple_numerical_aggregation="MAX"
                ),
            )
        )
        for p in ("p0", "p50", "p75", "p90", "p98", "p100")
    ]
    return qs.CfnDashboard.VisualProperty(
        table_visual=qs.CfnDashboard.TableVisualProperty(
            visual_id="percentile-table",
            title=qs.CfnDashboard.VisualTitleLabelOptionsProperty(
                visibility="VISIBLE",
                format_text=qs.CfnDashboard.ShortFormatTextProperty(
                    plain_text="P0..P100 per storage and fleet size"
                ),
            ),
            chart_configuration=qs.CfnDashboard.TableConfigurationProperty(
                field_wells=qs.CfnDashboard.TableFieldWellsProperty(
                    table_aggregated_field_wells=qs.CfnDashboard.TableAggregatedFieldWellsProperty(
                        group_by=group_by, values=values
                    )
                )
            ),
        )
    )
