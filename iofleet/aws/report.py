"""The run's report.html from Athena: the same page `iofleet report --html` writes from
DuckDB, built by the same code from the same views (iofleet/results/sql) through
`iofleet.aws.athena.AthenaSource`.

Light on purpose (the Summarize Lambda imports it at cold start): no numpy, scipy,
duckdb or sqlglot at import. The decision table ranks in plain Python
(iofleet.results.decide). The repeat-noise section needs numpy + scipy: the Summarize
Lambda has them from its stats layer (infra/stats_layer.py), imported only when a
configuration of the run has 2+ repeats; where they cannot be imported the page says
the section is missing and why (`repeat_noise_missing`), and the rest is written.
"""

from __future__ import annotations

import datetime
import decimal
from typing import TYPE_CHECKING, Any

from iofleet.aws import keys
from iofleet.aws.athena import AthenaSource

if TYPE_CHECKING:
    from iofleet.report.model import ReportData


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
) -> tuple[str, ReportData]:
    """Render the run's report from Athena, put it at reports/<run_id>/report.html;
    returns the key and what the page shows (report.json takes the start skew and
    why the repeat noise is missing, if it is)."""
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
    return key, data
