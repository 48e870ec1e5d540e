"""scripts/refresh_prices.py --fsx against a stand-in for the AWS Price List Query API.

There is no local engine for the Price List API (moto does not implement `pricing`), so
PriceListStandIn below is a HAND-WRITTEN FAKE: a small HTTP server speaking the API's JSON
1.1 protocol (X-Amz-Target AWSPriceListService.*) for DescribeServices, GetAttributeValues
and GetProducts (TERM_MATCH filters, NextToken paging two items a page), serving PriceList
entries as JSON strings in the documented `aws_v1` shape. boto3's real `pricing` client
talks to it through --endpoint-url, so request signing, serialisation and paging are
boto3's own.

The catalogue's attribute names and values are the ones the script was written for (see
EVIDENCE in the script); the rates are round TEST RATES for hand arithmetic, NOT AWS prices.
"""

from __future__ import annotations

import copy
import difflib
import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from iofleet.plan import prices
from tests.awsjson import json11_handler
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "refresh_prices.py"
SHIPPED = ROOT / "iofleet" / "plan" / "data" / "prices.json"
PAGE = 2  # items per page, so every answer of more than two items is paged


def load() -> ModuleType:
    return load_script("refresh_prices")


# --------------------------------------------------------------------------- catalogue

# TEST RATES, NOT AWS prices: distinct per rate so a rate written to the wrong place shows
OPENZFS_TEST = {
    "SINGLE_AZ_1": {"ssd_gib_month": 0.1, "throughput_mbps_month": 0.2, "iops_month": 0.01},
    "MULTI_AZ_1": {"ssd_gib_month": 0.3, "throughput_mbps_month": 0.4, "iops_month": 0.02},
}
LUSTRE_TEST = {
    "PERSISTENT_1": {"50": 0.05, "100": 0.1, "200": 0.2},
    "PERSISTENT_2": {"125": 0.125, "250": 0.25, "500": 0.5, "1000": 1.0},
}
OPTION = {"SINGLE_AZ_1": "Single-AZ", "MULTI_AZ_1": "Multi-AZ"}
NAMES = [
    "regionCode",
    "location",
    "usagetype",
    "operation",
    "fileSystemType",
    "deploymentOption",
    "storageType",
    "throughputCapacity",
]


def product(
    sku: str,
    family: str,
    unit: str,
    usd: str,
    region: str = "us-east-1",
    terms: dict[str, Any] | None = None,
    **attributes: str,
) -> dict[str, Any]:
    """One PriceList entry in the aws_v1 shape GetProducts returns."""
    term = f"{sku}.JRTCKXETXF"
    on_demand = {
        term: {
            "offerTermCode": "JRTCKXETXF",
            "sku": sku,
            "effectiveDate": "2026-11-01T00:00:00Z",
            "termAttributes": {},
            "priceDimensions": {
                f"{term}.6YS6EN2CT7": {
                    "rateCode": f"{term}.6YS6EN2CT7",
                    "description": f"test rate for {sku}",
                    "beginRange": "0",
                    "endRange": "Inf",
                    "unit": unit,
                    "pricePerUnit": {"USD": usd},
                    "appliesTo": [],
                }
            },
        }
    }
    return {
        "product": {
            "productFamily": family,
            "attributes": {"regionCode": region, "servicecode": "AmazonFSx", **attributes},
            "sku": sku,
        },
        "serviceCode": "AmazonFSx",
        "terms": terms if terms is not None else {"OnDemand": on_demand},
        "version": "20261101000000",
        "publicationDate": "2026-11-01T00:00:00Z",
    }


def catalogue(region: str = "us-east-1") -> list[dict[str, Any]]:
    """Every rate the script refreshes, plus products its filters must leave out."""
    items: list[dict[str, Any]] = []
    for deployment, rates in OPENZFS_TEST.items():
        opt = {"fileSystemType": "OpenZFS", "deploymentOption": OPTION[deployment]}
        key = deployment.replace("_", "")
        items += [
            product(
                f"{key}SSD", "Storage", "GB-Mo", str(rates["ssd_gib_month"]), region,
                storageType="SSD", **opt,
            ),
            product(
                f"{key}TP", "Provisioned Throughput", "MiBps-Mo",
                str(rates["throughput_mbps_month"]), region, **opt,
            ),
            product(
                f"{key}IOPS", "Provisioned IOPS", "IOPS-Mo", str(rates["iops_month"]), region,
                **opt,
            ),
        ]  # fmt: skip
    for tiers in LUSTRE_TEST.values():
        for tier, usd in tiers.items():
            items.append(
                product(
                    f"LUSTRE{tier}", "Storage", "GB-Mo", str(usd), region,
                    fileSystemType="Lustre", storageType="SSD", throughputCapacity=tier,
                    deploymentOption="Persistent",
                )
            )  # fmt: skip
    return items + [
        # what the filters must not pick up
        product("SAZ2SSD", "Storage", "GB-Mo", "9", region, fileSystemType="OpenZFS",
                deploymentOption="Single-AZ_2", storageType="SSD"),
        product("MAZINT", "Storage", "GB-Mo", "9", region, fileSystemType="OpenZFS",
                deploymentOption="Multi-AZ", storageType="INT"),
        product("BACKUP", "Storage", "GB-Mo", "9", region, fileSystemType="OpenZFS",
                deploymentOption="N/A", storageType="N/A"),
        product("LUSTREHDD", "Storage", "GB-Mo", "9", region, fileSystemType="Lustre",
                storageType="HDD", throughputCapacity="12", deploymentOption="Persistent"),
        product("ONTAPSSD", "Storage", "GB-Mo", "9", region, fileSystemType="ONTAP",
                deploymentOption="Single-AZ", storageType="SSD"),
    ]  # fmt: skip


# --------------------------------------------------------------------------- stand-in


class PriceListStandIn:
    """HAND-WRITTEN FAKE of the Price List Query API (no local engine exists for it)."""

    def __init__(self) -> None:
        self.products: list[dict[str, Any]] = []
        self.names: list[str] = []
        self.requests: list[tuple[str, dict[str, Any]]] = []

    def answer(self, op: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self.requests.append((op, body))
        if body.get("ServiceCode") not in (None, "AmazonFSx"):
            return 200, self._page([], body, "Services")
        if op == "DescribeServices":
            return 200, {
                "Services": [{"ServiceCode": "AmazonFSx", "AttributeNames": self.names}],
                "FormatVersion": "aws_v1",
            }
        if op == "GetAttributeValues":
            name = body["AttributeName"]
            values = sorted(
                {p["product"]["attributes"][name] for p in self.products
                 if name in p["product"]["attributes"]}
            )  # fmt: skip
            return 200, self._page([{"Value": v} for v in values], body, "AttributeValues")
        if op == "GetProducts":
            if body.get("FormatVersion", "aws_v1") != "aws_v1":
                return 400, {"__type": "InvalidParameterException", "message": "format"}
            found = [p for p in self.products if self._matches(p, body.get("Filters", []))]
            page = self._page([json.dumps(p) for p in found], body, "PriceList")
            return 200, {**page, "FormatVersion": "aws_v1"}
        return 400, {"__type": "InvalidParameterException", "message": f"no {op}"}

    @staticmethod
    def _matches(item: dict[str, Any], filters: list[dict[str, str]]) -> bool:
        for f in filters:
            assert f["Type"] == "TERM_MATCH", f
            if f["Field"] == "productFamily":
                have = item["product"]["productFamily"]
            else:
                have = item["product"]["attributes"].get(f["Field"])
            if have != f["Value"]:
                return False
        return True

    @staticmethod
    def _page(items: list[Any], body: dict[str, Any], key: str) -> dict[str, Any]:
        start = int(body.get("NextToken") or 0)
        out: dict[str, Any] = {key: items[start : start + PAGE]}
        if start + PAGE < len(items):
            out["NextToken"] = str(start + PAGE)
        return out


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, PriceListStandIn]]:
    fake = PriceListStandIn()

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), json11_handler(fake.answer))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", fake
    httpd.shutdown()
    httpd.server_close()
    thread.join()


@pytest.fixture
def pricelist(
    server: tuple[str, PriceListStandIn], monkeypatch: pytest.MonkeyPatch
) -> tuple[str, PriceListStandIn]:
    url, fake = server
    fake.products = catalogue() + catalogue("eu-central-1")
    fake.names = list(NAMES)
    fake.requests = []
    for key, value in _aws_env().items():
        monkeypatch.setenv(key, value)
    return url, fake


def _aws_env() -> dict[str, str]:
    return {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    }


@pytest.fixture
def table(tmp_path: Path) -> Path:
    out = tmp_path / "prices.json"
    shutil.copyfile(SHIPPED, out)
    return out


def refresh(
    url: str, out: Path, *extra: str, region: str = "us-east-1"
) -> subprocess.CompletedProcess[str]:
    """The script as a user runs it: its exit status and its stderr lines."""
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--region", region, "--fsx", "--out", str(out),
         "--endpoint-url", url, *extra],
        capture_output=True, text=True, cwd=ROOT, check=False,
        env={"PATH": os.environ["PATH"], **_aws_env()},
    )  # fmt: skip


def _fsx(path: Path, region: str = "us-east-1") -> dict[str, Any]:
    data = json.loads(path.read_text(encoding="utf-8"))["regions"][region]
    return {k: data[k] for k in ("fsx-openzfs", "fsx-lustre")}


# --------------------------------------------------------------------------- tests


def test_a_clean_answer_fills_every_fsx_rate_in_the_shape_plans_read(
    pricelist: tuple[str, PriceListStandIn], table: Path
) -> None:
    url, _ = pricelist
    before = json.loads(table.read_text(encoding="utf-8"))
    # when
    done = refresh(url, table)
    # then
    assert done.returncode == 0, done.stderr
    after = json.loads(table.read_text(encoding="utf-8"))
    region = after["regions"]["us-east-1"]
    assert region["fsx-openzfs"] == {"deployment_types": OPENZFS_TEST}
    assert region["fsx-lustre"] == {
        "deployment_types": {d: {"gib_month": t} for d, t in LUSTRE_TEST.items()}
    }
    assert prices.region_problems(region) == []
    # nothing else changed: other sections, the other region, the table's own date
    for key in ("fsx-openzfs", "fsx-lustre"):
        region.pop(key)
        before["regions"]["us-east-1"].pop(key)
    sections = after.pop("sections")
    shipped_sections = before.pop("sections")
    assert after == before
    for name, record in sections.items():
        assert {k: v for k, v in record.items() if k != "refreshed"} == shipped_sections[name]
    refreshed = sections["fsx-openzfs"]["refreshed"]["us-east-1"]
    assert refreshed["skus"]["fsx.SINGLE_AZ_1.ssd_gib_month"] == "SINGLEAZ1SSD"
    assert refreshed["refused"] == {}
    assert "AmazonFSx" in refreshed["source"] and "us-east-1" in refreshed["source"]
    assert refreshed["as_of"] == sections["fsx-lustre"]["refreshed"]["us-east-1"]["as_of"]
    assert set(refreshed["not_refreshed"]) == {"SINGLE_AZ_2", "SINGLE_AZ_HA_1", "SINGLE_AZ_HA_2"}
    # the deployment types with no verified attribute are named, never queried
    assert "fsx.SCRATCH_2: not refreshed" in done.stderr
    assert "fsx.SINGLE_AZ_2: not refreshed" in done.stderr


def test_the_queries_carry_the_region_and_only_verified_values(
    pricelist: tuple[str, PriceListStandIn], table: Path
) -> None:
    url, fake = pricelist
    assert load().main(["--region", "us-east-1", "--fsx", "--out", str(table),
                        "--endpoint-url", url]) == 0  # fmt: skip
    queries = [b["Filters"] for op, b in fake.requests if op == "GetProducts"]
    first_pages = [q for q in queries if q]  # paged repeats carry the same filters
    fields = {(f["Field"], f["Value"]) for q in first_pages for f in q}
    assert all({"Field": "regionCode", "Type": "TERM_MATCH", "Value": "us-east-1"} in q
               for q in first_pages)  # fmt: skip
    options = {v for k, v in fields if k == "deploymentOption"}
    assert options == {"Single-AZ", "Multi-AZ"}  # never SINGLE_AZ_2's or HA's


def _mutate(fake: PriceListStandIn, sku: str, change: Any) -> None:
    item = next(p for p in fake.products if p["product"]["sku"] == sku
                and p["product"]["attributes"]["regionCode"] == "us-east-1")  # fmt: skip
    change(item)


def _dimension(item: dict[str, Any]) -> dict[str, Any]:
    (term,) = item["terms"]["OnDemand"].values()
    (dim,) = term["priceDimensions"].values()
    return dim  # type: ignore[no-any-return]


def _twin(fake: PriceListStandIn) -> None:
    twin = copy.deepcopy(next(p for p in fake.products if p["product"]["sku"] == "SINGLEAZ1SSD"))
    twin["product"]["sku"] = "SINGLEAZ1SSDB"
    fake.products.append(twin)


REFUSALS = {
    "ambiguous": (
        "SINGLEAZ1SSD",
        None,
        "fsx.SINGLE_AZ_1.ssd_gib_month: 2 products match regionCode=us-east-1, "
        "productFamily=Storage, fileSystemType=OpenZFS, deploymentOption=Single-AZ, "
        "storageType=SSD, expected exactly 1",
    ),
    "wrong unit": (
        "SINGLEAZ1TP",
        lambda i: _dimension(i).update(unit="Hrs"),
        "fsx.SINGLE_AZ_1.throughput_mbps_month: unit 'Hrs', expected MBps-Mo or MiBps-Mo",
    ),
    "not on-demand": (
        "SINGLEAZ1IOPS",
        lambda i: i.update(terms={"Reserved": i["terms"]["OnDemand"]}),
        "fsx.SINGLE_AZ_1.iops_month: product SINGLEAZ1IOPS has Reserved terms, not OnDemand alone",
    ),
    "not USD": (
        "LUSTRE125",
        lambda i: _dimension(i).update(pricePerUnit={"CNY": "1.0"}),
        "fsx.PERSISTENT_2.gib_month.125: priced in CNY, not USD",
    ),
    "tiered": (
        "MULTIAZ1SSD",
        lambda i: _dimension(i).update(endRange="1000"),
        "fsx.MULTI_AZ_1.ssd_gib_month: a tiered price (0 to 1000)",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_a_doubtful_rate_is_refused_by_name_and_nothing_is_written(
    case: str, pricelist: tuple[str, PriceListStandIn], table: Path
) -> None:
    url, fake = pricelist
    sku, change, line = REFUSALS[case]
    if change is None:
        _twin(fake)
    else:
        _mutate(fake, sku, change)
    before = table.read_bytes()
    # when
    done = refresh(url, table)
    # then
    assert done.returncode == 1
    assert f"refresh_prices: {line}\n" in done.stderr
    assert "nothing written" in done.stderr
    assert table.read_bytes() == before
    assert [p.name for p in table.parent.iterdir()] == ["prices.json"]  # no temp file left


def test_partial_writes_the_rates_that_passed_and_leaves_the_refused_one_null(
    pricelist: tuple[str, PriceListStandIn], table: Path
) -> None:
    url, fake = pricelist
    _mutate(fake, "SINGLEAZ1TP", lambda i: _dimension(i).update(unit="Hrs"))
    # when
    done = refresh(url, table, "--partial")
    # then
    assert done.returncode == 3, done.stderr
    zfs = _fsx(table)["fsx-openzfs"]["deployment_types"]
    assert zfs["SINGLE_AZ_1"] == {"ssd_gib_month": 0.1, "throughput_mbps_month": None,
                                  "iops_month": 0.01}  # fmt: skip
    assert zfs["MULTI_AZ_1"] == OPENZFS_TEST["MULTI_AZ_1"]
    record = json.loads(table.read_text())["sections"]["fsx-openzfs"]["refreshed"]["us-east-1"]
    assert record["refused"] == {
        "fsx.SINGLE_AZ_1.throughput_mbps_month": "unit 'Hrs', expected MBps-Mo or MiBps-Mo"
    }
    assert prices.region_problems(json.loads(table.read_text())["regions"]["us-east-1"]) == []


def test_a_region_without_fsx_prices_is_refused_and_nothing_is_written(
    pricelist: tuple[str, PriceListStandIn], table: Path
) -> None:
    url, _ = pricelist
    before = table.read_bytes()
    done = refresh(url, table, region="ap-south-2")
    assert done.returncode == 1
    assert (
        "refresh_prices: fsx: ap-south-2 is not a regionCode AmazonFSx has prices for; "
        "nothing written"
    ) in done.stderr
    assert table.read_bytes() == before


def test_an_attribute_name_the_service_does_not_have_refuses_the_whole_refresh(
    pricelist: tuple[str, PriceListStandIn], table: Path
) -> None:
    url, fake = pricelist
    fake.names.remove("deploymentOption")
    before = table.read_bytes()
    done = refresh(url, table)
    assert done.returncode == 1
    assert "fsx: AmazonFSx has no attribute deploymentOption (DescribeServices)" in done.stderr
    assert table.read_bytes() == before
    assert not [op for op, _ in fake.requests if op == "GetProducts"]


def test_an_attribute_value_the_service_does_not_list_refuses_its_rates(
    pricelist: tuple[str, PriceListStandIn], table: Path
) -> None:
    url, fake = pricelist
    fake.products = [
        p for p in fake.products if p["product"]["attributes"].get("deploymentOption") != "Multi-AZ"
    ]
    done = refresh(url, table)
    assert done.returncode == 1
    assert (
        "refresh_prices: fsx.MULTI_AZ_1.iops_month: deploymentOption 'Multi-AZ' is not a value "
        "AmazonFSx lists (GetAttributeValues)\n"
    ) in done.stderr


def test_a_bad_out_file_is_one_line_and_exit_2(
    pricelist: tuple[str, PriceListStandIn], tmp_path: Path
) -> None:
    url, _ = pricelist
    bad = tmp_path / "prices.json"
    bad.write_text("{not json", encoding="utf-8")
    done = refresh(url, bad)
    assert done.returncode == 2
    assert done.stderr.startswith(f"{bad}: cannot read the price table")
    assert len(done.stderr.splitlines()) == 1
    assert bad.read_text(encoding="utf-8") == "{not json"


MATRIX = {
    "name": "fsx-cost",
    "instance_types": ["m6i.large"],
    "storage": [
        {
            "type": "fsx-openzfs",
            "label": "zfs",
            "deployment_type": "SINGLE_AZ_1",
            "storage_capacity_gib": 256,
            "throughput_capacity": 512,
            "iops": 10000,
        },
        {
            "type": "fsx-lustre",
            "label": "lustre",
            "deployment_type": "PERSISTENT_2",
            "storage_capacity_gib": 1200,
            "per_unit_storage_throughput": 125,
        },
    ],  # fmt: skip
    "workloads": [{"fio": "latency-4k-qd1-randread"}],
    "parallelism": [1],
}


def test_iofleet_plan_prices_openzfs_and_lustre_cells_from_the_refreshed_table(
    pricelist: tuple[str, PriceListStandIn], tmp_path: Path
) -> None:
    """The refresh writes the package's own prices.json (a copy of the package here), and
    `iofleet plan` run from that copy prices the FSx cells with the refreshed rates."""
    url, _ = pricelist
    pkg = tmp_path / "iofleet"
    shutil.copytree(ROOT / "iofleet", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "fio-jobs", tmp_path / "fio-jobs")
    out = pkg / "plan" / "data" / "prices.json"
    assert refresh(url, out).returncode == 0
    matrix = tmp_path / "m.json"
    matrix.write_text(json.dumps(MATRIX), encoding="utf-8")
    # when
    plan = subprocess.run(
        [sys.executable, "-m", "iofleet.cli", "plan", str(matrix), "--format", "json"],
        capture_output=True, text=True, cwd=tmp_path, check=True,
        env={"PATH": os.environ["PATH"], "PYTHONPATH": str(tmp_path), "AWS_REGION": "us-east-1"},
    )  # fmt: skip
    # then
    cells = {c["storage_type"]: c for c in json.loads(plan.stdout)["cells"]}
    zfs, lustre = cells["fsx-openzfs"], cells["fsx-lustre"]
    months = zfs["slot_seconds"] / 3600 / 730  # alive for the slot (no populate step)
    lines = {i["item"]: i for i in zfs["cost"]["items"] if i["item"].startswith("fsx-")}
    assert lines["fsx-openzfs SINGLE_AZ_1 SSD storage"]["usd"] == pytest.approx(
        256 * months * 0.1, abs=1e-6
    )
    assert lines["fsx-openzfs SINGLE_AZ_1 throughput capacity"]["usd"] == pytest.approx(
        512 * months * 0.2, abs=1e-6
    )
    # 10,000 provisioned - 768 included (3 per GiB of 256 GiB)
    assert lines["fsx-openzfs provisioned SSD IOPS"]["usd"] == pytest.approx(
        (10000 - 768) * months * 0.01, abs=1e-6
    )
    assert not [u for u in zfs["cost"]["unknown"] if "fsx" in u]
    months = lustre["slot_seconds"] / 3600 / 730
    (line,) = [i for i in lustre["cost"]["items"] if i["item"].startswith("fsx-")]
    assert line["item"] == "fsx-lustre PERSISTENT_2 storage at 125 MB/s/TiB"
    assert line["usd"] == pytest.approx(1200 * months * 0.125, abs=1e-6)
    # the shipped table, untouched, still has no FSx rate
    assert json.loads(SHIPPED.read_text())["regions"]["us-east-1"]["fsx-openzfs"] is None


def test_every_attribute_the_filters_use_names_its_evidence() -> None:
    script = load()
    for rate in script.FSX_RATES:
        pairs = [("regionCode", "*"), ("productFamily", rate.product_family), *rate.attributes]
        for pair in pairs:
            sources = script.SEEN.get(pair)
            assert sources, f"{rate.name}: {pair} has no recorded evidence"
            assert set(sources) <= set(script.EVIDENCE), (rate.name, pair)
    for unmapped in script.UNMAPPED.values():
        assert not set(unmapped) & {r.deployment for r in script.FSX_RATES}


# --------------------------------------------------------------------------- layout


def _diff(before: str, after: str) -> tuple[list[str], list[str]]:
    """(lines removed, lines added) from `before` to `after`."""
    lines = list(difflib.ndiff(before.splitlines(), after.splitlines()))
    return [x[2:] for x in lines if x.startswith("- ")], [
        x[2:] for x in lines if x.startswith("+ ")
    ]


def test_the_shipped_table_is_in_the_layout_a_refresh_writes() -> None:
    script = load()
    text = SHIPPED.read_text(encoding="utf-8")
    assert script.dump_table(script.load_table(text)) == text


def test_a_refresh_changes_the_lines_of_the_rates_it_changed_and_no_other(
    pricelist: tuple[str, PriceListStandIn], table: Path
) -> None:
    url, fake = pricelist
    shipped = table.read_text(encoding="utf-8")
    # when: the first refresh fills the Region's FSx sections
    assert refresh(url, table).returncode == 0
    first = table.read_text(encoding="utf-8")
    # then: of the shipped lines only the two null sections went, and the two lines that
    # gained a comma before the new `refreshed` records; every rate is spelled as it was
    removed, _ = _diff(shipped, first)
    assert sorted(line.strip() for line in removed) == sorted(
        ['"fsx-openzfs": null,', '"fsx-lustre": null,']
        + [
            f'"unknown_reason": "no FSx for {name} rate for this region was found on a page '
            "that could be cited: give the rates in the matrix's prices (README, Matrix "
            'reference)"'
            for name in ("OpenZFS", "Lustre")
        ]
    )
    assert '"gp2": {"gib_month": 0.10},' in first
    assert '"efs": {"standard_gib_month": 0.30, "provisioned_mibps_month": 6.00,' in first
    # when: AWS changes one rate and the table is refreshed again
    _mutate(fake, "SINGLEAZ1SSD", lambda i: _dimension(i)["pricePerUnit"].update(USD="0.11"))
    assert refresh(url, table).returncode == 0
    # then: exactly one line changed, the one holding that rate
    removed, added = _diff(first, table.read_text(encoding="utf-8"))
    assert [line.strip() for line in removed] == [
        '"SINGLE_AZ_1": {"ssd_gib_month": 0.1, "throughput_mbps_month": 0.2, "iops_month": 0.01},'
    ]
    assert [line.strip() for line in added] == [
        '"SINGLE_AZ_1": {"ssd_gib_month": 0.11, "throughput_mbps_month": 0.2, "iops_month": 0.01},'
    ]


def test_an_fsx_refresh_of_a_new_region_leaves_its_other_sections_unknown(
    pricelist: tuple[str, PriceListStandIn], tmp_path: Path
) -> None:
    """A Region the table lacks gets its FSx sections and every other section null, and a
    plan there prices the FSx cells, names the rest unknown, and refuses a budget."""
    url, fake = pricelist
    fake.products += catalogue("ap-south-1")
    pkg = tmp_path / "iofleet"
    shutil.copytree(ROOT / "iofleet", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "fio-jobs", tmp_path / "fio-jobs")
    out = pkg / "plan" / "data" / "prices.json"
    # when
    assert refresh(url, out, region="ap-south-1").returncode == 0
    # then: the new Region has the sections the others have, all but FSx's null
    table = json.loads(out.read_text(encoding="utf-8"))
    region = table["regions"]["ap-south-1"]
    assert list(region) == list(table["regions"]["us-east-1"])
    assert {k for k, v in region.items() if v is not None} == {"fsx-openzfs", "fsx-lustre"}
    assert prices.region_problems(region) == []
    # and a plan there prices the FSx cells and leaves EC2 and the rest unknown
    matrix = tmp_path / "m.json"
    matrix.write_text(json.dumps(MATRIX), encoding="utf-8")
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(tmp_path), "AWS_REGION": "ap-south-1"}
    plan = subprocess.run(
        [sys.executable, "-m", "iofleet.cli", "plan", str(matrix), "--format", "json"],
        capture_output=True, text=True, cwd=tmp_path, check=True, env=env,
    )  # fmt: skip
    cells = {c["storage_type"]: c for c in json.loads(plan.stdout)["cells"]}
    zfs = cells["fsx-openzfs"]["cost"]
    assert [i for i in zfs["items"] if i["item"].startswith("fsx-")]
    assert not [u for u in zfs["unknown"] if "fsx" in u]
    assert any(u.startswith("ec2 m6i.large") for u in zfs["unknown"]), zfs["unknown"]
    # and a budget there is refused: the estimate leaves EC2 out
    matrix.write_text(json.dumps({**MATRIX, "limits": {"budget_usd": 1000}}), encoding="utf-8")
    refused = subprocess.run(
        [sys.executable, "-m", "iofleet.cli", "plan", str(matrix)],
        capture_output=True, text=True, cwd=tmp_path, check=False, env=env,
    )  # fmt: skip
    assert refused.returncode == 2, refused.stderr
    assert "leaves out c000-zfs-m6i.large-x1-r1: ec2 m6i.large (" in refused.stderr
    assert "the budget cannot be checked" in refused.stderr
