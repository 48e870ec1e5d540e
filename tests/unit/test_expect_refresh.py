"""The refresh scripts: instance types against a moto server; prices on a recorded-shape answer.

moto has no Pricing API, so the price transformation is tested on an answer
written in the documented GetProducts shape, not one recorded from AWS.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.scripts import load_script


@pytest.fixture(scope="module")
def ec2_endpoint() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


def test_refresh_instance_types_writes_the_seed_types(
    ec2_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    script = load_script("refresh_instance_types")
    out = tmp_path / "instance_types.json"
    # when
    code = script.main(["--endpoint-url", ec2_endpoint, "--out", str(out), "--types", "nope.x"])
    # then
    assert code == 0
    types = json.loads(out.read_text())["types"]
    assert set(script.SEED_TYPES) <= set(types)
    assert "nope.x" not in types
    c6a = types["c6a.xlarge"]["ebs"]
    assert (c6a["baseline_iops"], c6a["maximum_iops"], c6a["maximum_is_burst"]) == (
        6000,
        40000,
        True,
    )


def test_instance_snapshot_in_the_repo_has_the_seed_types() -> None:
    script = load_script("refresh_instance_types")
    snapshot = json.loads(script.SNAPSHOT.read_text())
    assert set(script.SEED_TYPES) <= set(snapshot["types"])
    assert snapshot["as_of"]


def test_pricing_answer_gives_the_hourly_on_demand_price() -> None:
    script = load_script("refresh_prices")
    entry = {
        "product": {"attributes": {"instanceType": "c6a.xlarge", "regionCode": "us-east-1"}},
        "terms": {
            "OnDemand": {
                "X.JRTCKXETXF": {
                    "priceDimensions": {
                        "X.JRTCKXETXF.6YS6EN2CT7": {
                            "unit": "Hrs",
                            "pricePerUnit": {"USD": "0.1530000000"},
                        }
                    }
                }
            }
        },
    }
    assert script.on_demand_hourly(json.dumps(entry)) == ("c6a.xlarge", 0.153)


def test_pricing_answer_without_an_hourly_price_is_skipped() -> None:
    script = load_script("refresh_prices")
    entry = {"product": {"attributes": {"instanceType": "c6a.xlarge"}}, "terms": {}}
    assert script.on_demand_hourly(entry) is None
