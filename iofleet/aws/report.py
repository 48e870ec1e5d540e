"""The run's report.html from Athena: the same page `iofleet report --html` writes from
DuckDB, built by the same code from the same views (iofleet/results/sql) through
`iofleet.aws.athena.AthenaSource`.

Light on purpose (the Summarize Lambda imports it at cold start): no numpy, scipy,
duckdb or sqlglot. The decision table ranks in plain Python (iofleet.results.decide);
the repeat-noise section needs scipy, which the Lambda runtime does not have, so an
AWS report.html has no "Repeat noise" section (`iofleet report --athena` has it).
"""

from __future__ import annotations

import datetime
import decimal
from typing import Any

from iofleet.aws import keys
from iofleet.aws.athena import AthenaSource


def report_html_key(run_id: str) -> str:
    return f"{keys.REPORTS_PREFIX}{run_id}/report.html"


def json_safe(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """View rows with dates as ISO text and decimals as floats (for report.json)."""

    def plain(value: Any) -> Any:
        if isinstance(value, datetime.date | datetime.datetime):
            return value.isoformat(sep=" ") if isinstance(value, datetime.datetime) else str(value)
        if isinstance(value, decimal.Decimal):
            return float(value)
        return value

    return [{k: plain(v) for k, v in row.items()} for row in rows]


def write_report_html(
    run_id: str, *, athena: Any, s3: Any, bucket: str, workgroup: str, database: str
) -> tuple[str, list[dict[str, Any]]]:
    """Render the run's report from Athena, put it at reports/<run_id>/report.html;
    returns the key and the run's start_skew rows (for report.json)."""
    from iofleet.report.cli import load_report_data
    from iofleet.report.html import render_html

    source = AthenaSource(athena, workgroup=workgroup, database=database)
    data = load_report_data(source, run_id)
    key = report_html_key(run_id)
    s3.put_object(
        Bucket=bucket,
        Key=key,
        Body=render_html(data).encode("utf-8"),
        ContentType="text/html; charset=utf-8",
    )
    return key, data.skew
