"""Plan-side Mountpoint rules on job texts a user could write, and the S3 cost estimate."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from iofleet.plan.mountpoint import fio_job_problems

REPO = Path(__file__).resolve().parents[2]
WRITER = """
[global]
directory=${TARGET}
filename_format=data.$jobnum.$filenum
create_serialize=0
ioengine=psync
size=64m
[w]
rw=write
create_on_open=1
"""


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (WRITER, None),
        (WRITER + "[r]\nstonewall\nrw=randread\nbs=4k\n", None),  # random reads are fine
        (WRITER + "[r]\nrw=read\n", "must start after its writer"),
        (WRITER + "[r]\nstonewall\nrw=read\nnumjobs=2\n", "more or larger files"),
        (WRITER + "[r]\nstonewall\nrw=read\nsize=128m\n", "more or larger files"),
        (
            WRITER.replace("create_serialize=0\n", "") + "[r]\nstonewall\nrw=read\n",
            "create_serialize",
        ),
        (WRITER.replace("create_on_open=1", "create_on_open=0"), "set create_on_open=1"),
        (WRITER + "time_based\nruntime=10\n", "time_based"),
        (WRITER.replace("psync", "libaio") + "iodepth=8\n", "out of order"),
        (WRITER.replace("psync", "libaio") + "iodepth=1\n", None),
        (WRITER + "fsync=32\n", "fsync="),
        (WRITER.replace("rw=write", "rw=write:4k"), "holes"),
        (WRITER.replace("rw=write", "rw=trimwrite"), "rw=trimwrite"),
        (WRITER.replace("rw=write", "readwrite=randwrite"), "rw=randwrite"),
        (WRITER + "loops=2\n", "loops"),
        (WRITER + "offset=1m\n", "offset="),
        (WRITER + "direct=1\n", None),  # O_DIRECT is supported by Mountpoint
        # fio reads an include's options: a missing one is fio's refusal too
        ("[global]\ndirectory=${TARGET}\ninclude other.fio\n[w]\nrw=write\n", "cannot read"),
    ],
)
def test_user_job_texts_get_the_same_rules(text: str, fragment: str | None) -> None:
    problems = fio_job_problems(text, {"TARGET": "/mnt/iofleet"})
    if fragment is None:
        assert problems == []
    else:
        assert problems and fragment in problems[0], problems


def test_plan_prices_s3_requests_storage_and_express_transfer(tmp_path: Path) -> None:
    doc = {
        "name": "mp",
        "instance_types": ["m6i.large"],
        "storage": [
            {"type": "s3-mountpoint", "label": "s3"},
            {"type": "s3express-mountpoint", "label": "s3x", "az_id": "use1-az4"},
        ],
        "workloads": [{"fio": "mountpoint-seq-write-read-1m", "params": {"SIZE": "1g"}}],
        "parallelism": [2],
    }
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    out = subprocess.run(
        [sys.executable, "-m", "iofleet.cli", "plan", str(path), "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )
    cells = {c["storage_label"]: c for c in json.loads(out.stdout)["cells"]}
    gp = {i["item"]: i for i in cells["s3"]["cost"]["items"]}
    # 4 writers x 1 GiB per slot, 2 slots: 1,024 parts of 8 MiB + 2 calls per file, per slot
    assert gp["s3 standard PUT requests"]["quantity"] == pytest.approx(2 * (512 + 8) / 1000)
    assert gp["s3 standard GET requests"]["quantity"] == pytest.approx(2 * 512 / 1000)
    assert gp["s3 standard PUT requests"]["unit_usd"] == 0.005
    express = {i["item"]: i for i in cells["s3x"]["cost"]["items"]}
    assert express["s3 express one zone upload"]["quantity"] == pytest.approx(8.0)
    assert "s3 express one zone retrieval" in express
    # network is the expected bound, with the request-rate note
    assert any("3,500 PUT" in w for w in cells["s3"]["warnings"])
