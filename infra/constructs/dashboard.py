"""Opt-in QuickSight: an Athena data source, a dataset over `cell_percentiles`, a dashboard."""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_quicksight as qs
from constructs import Construct

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
        ds_id = "cellpercentiles"
        self.dashboard = qs.CfnDashboard(
            self,
            "Percentiles",
            aws_account_id=stack.account,
            dashboard_id=f"{prefix}-percentiles",
            name="iofleet: percentiles per storage and fleet size",
            permissions=[
                qs.CfnDashboard.ResourcePermissionProperty(
                    principal=principal_arn, actions=OWNER_ACTIONS_DASHBOARD
                )
            ],
            definition=qs.CfnDashboard.DashboardVersionDefinitionProperty(
                data_set_identifier_declarations=[
                    qs.CfnDashboard.DataSetIdentifierDeclarationProperty(
                        identifier=ds_id, data_set_arn=self.data_set.attr_arn
                    )
                ],
                sheets=[
                    qs.CfnDashboard.SheetDefinitionProperty(
                        sheet_id="percentiles",
                        name="Percentiles",
                        visuals=[_table_visual(ds_id)],
                    )
                ],
            ),
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
