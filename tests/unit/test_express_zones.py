"""`iofleet plan` warns about an S3 Express One Zone cell whose zone the S3 User Guide does
not list as offering it (iofleet/plan/mountpoint.py EXPRESS_ZONES): the plan's own
annotations, through the same code `iofleet plan` prints."""

from __future__ import annotations

from typing import Any

import pytest

from iofleet.plan.cost import plan_annotations
from iofleet.plan.matrix import build_plan, validate_matrix_dict


def _warnings(storage: dict[str, Any], region: str) -> list[str]:
    matrix = {
        "name": "sx",
        "instance_types": ["m6i.large"],
        "storage": [storage],
        "parallelism": [1],
        "workloads": [{"fio": "mountpoint-seq-write-read-1m"}],
    }
    plan = build_plan(validate_matrix_dict(matrix), "aws")
    (cell,) = plan_annotations(plan, region)["cells"]
    zone_warnings = ("S3 Express One Zone is not listed", "the directory bucket goes", "az_id ")
    return [w for w in cell["warnings"] if w.startswith(zone_warnings)]


@pytest.mark.parametrize(
    ("az_id", "region", "expect"),
    [
        ("use1-az4", "us-east-1", None),
        ("use1-az6", "us-east-1", None),
        ("use1-az1", "us-east-1", "does not offer S3 Express One Zone"),
        ("use1-az4", "eu-west-1", "is not a zone of eu-west-1"),
        ("euc1-az1", "eu-central-1", "not listed for eu-central-1"),
        (None, "us-east-1", "use1-az4, use1-az5, use1-az6"),
    ],
)
def test_express_zone_is_checked_against_the_documented_list(
    az_id: str | None, region: str, expect: str | None
) -> None:
    storage: dict[str, Any] = {"type": "s3express-mountpoint", "label": "sx"}
    if az_id:
        storage["az_id"] = az_id
    got = _warnings(storage, region)
    if expect is None:
        assert got == []
    else:
        assert len(got) == 1 and expect in got[0], got


def test_general_purpose_mountpoint_gets_no_zone_warning() -> None:
    assert _warnings({"type": "s3-mountpoint", "label": "gp"}, "us-east-1") == []
