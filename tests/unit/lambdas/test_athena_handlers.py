"""views (custom resource) and summarize handlers against moto server's Athena.

moto runs no SQL: it accepts the queries and returns an empty result set, so
these tests check the protocol (every view created in dependency order, the
CloudFormation answer, the report objects and the run status), not the SQL;
the SQL itself runs in DuckDB (tests/unit/test_views.py) and in Trino (local cloud).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from iofleet.aws import views
from iofleet.results.schema import TABLES
from iofleet.results.sql import VIEW_NAMES
from lambdas.summarize import handler as summarize
from tests.unit.lambdas.conftest import Cloud, FakeLambdaContext


def test_views_resource_creates_every_view_and_answers_cloudformation(
    cloud: Cloud, workgroup: str
) -> None:
    answers: list[tuple[str, dict[str, Any]]] = []
    event = {
        "RequestType": "Create",
        "ResponseURL": "https://cloudformation-custom-resource-response.example/x",
        "StackId": "stack",
        "RequestId": "req",
        "LogicalResourceId": "Views",
        "ResourceProperties": {"Database": "iofleet", "WorkGroup": workgroup},
    }
    body = views.handle(
        event, cloud.client("athena"), "stream", respond=lambda url, b: answers.append((url, b))
    )
    assert body["Status"] == "SUCCESS"
    # the table views (Parquet + not yet compacted landing rows) first, then iofleet/results/sql
    tables = [t.name for t in TABLES]
    assert body["Data"]["Views"].split(",") == tables + list(VIEW_NAMES)
    assert answers == [(event["ResponseURL"], body)]
    queries = cloud.client("athena").list_query_executions(WorkGroup=workgroup)["QueryExecutionIds"]
    assert len(queries) == len(tables) + len(VIEW_NAMES)


def test_views_resource_reports_failure_instead_of_hanging(cloud: Cloud) -> None:
    answers: list[dict[str, Any]] = []
    event = {
        "RequestType": "Create",
        "ResponseURL": "u",
        "ResourceProperties": {"Database": "iofleet"},
    }
    body = views.handle(
        event, cloud.client("athena"), "stream", respond=lambda url, b: answers.append(b)
    )
    assert body["Status"] == "FAILED" and "WorkGroup" in body["Reason"]
    assert answers == [body]


def test_view_ddl_wraps_the_select() -> None:
    assert views.view_ddl("cells", "SELECT 1") == "CREATE OR REPLACE VIEW cells AS\nSELECT 1"


def _cell(cloud: Cloud, run_id: str, cell_id: str, status: str) -> None:
    cloud.client("dynamodb").put_item(
        TableName=cloud.table,
        Item={
            "pk": {"S": f"run#{run_id}"},
            "sk": {"S": f"cell#{cell_id}"},
            "status": {"S": status},
        },
    )


def test_summarize_writes_reports_and_a_partial_status(
    cloud: Cloud, workgroup: str, context: FakeLambdaContext
) -> None:
    run_id = "demo-20261121t051200z"
    _cell(cloud, run_id, "c000", "SUCCEEDED")
    _cell(cloud, run_id, "c001", "FAILED")
    out = summarize.handler({"run_id": run_id}, context)
    assert out["status"] == "PARTIAL"
    assert cloud.keys("reports/") == [
        f"reports/{run_id}/report.csv",
        f"reports/{run_id}/report.html",
        f"reports/{run_id}/report.json",
    ]
    assert out["report_html"] == f"reports/{run_id}/report.html"
    assert out["report_html_uri"] == f"s3://{cloud.bucket}/reports/{run_id}/report.html"
    report = json.loads(cloud.text(f"reports/{run_id}/report.json"))
    assert report["cells"] == {"c000": "SUCCEEDED", "c001": "FAILED"}
    assert report["start_skew"] == []  # moto's Athena answers every query with no rows
    html = cloud.text(f"reports/{run_id}/report.html")
    assert html.startswith("<!DOCTYPE html>") and run_id in html
    athena = cloud.client("athena")
    queries = [
        athena.get_query_execution(QueryExecutionId=q)["QueryExecution"]["Query"]
        for q in athena.list_query_executions(WorkGroup=workgroup)["QueryExecutionIds"]
    ]
    assert any("FROM cell_percentiles WHERE run_id = ?" in q for q in queries)
    assert any("FROM start_skew WHERE run_id = ?" in q for q in queries)


@pytest.mark.parametrize(
    ("outcomes", "status"),
    [
        ({"a": "SUCCEEDED"}, "SUCCEEDED"),
        ({"a": "FAILED"}, "FAILED"),
        ({}, "FAILED"),
        ({"a": "SUCCEEDED", "b": "FAILED"}, "PARTIAL"),
    ],
)
def test_run_status_from_cell_outcomes(outcomes: dict[str, str], status: str) -> None:
    from iofleet.aws.summarize import run_status

    assert run_status(outcomes) == status
