"""Build small raw result trees (the layout of docs/internals.md) from real fixtures."""

from __future__ import annotations

import json
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FIO_JSONPLUS = FIXTURES / "fio" / "jsonplus-numjobs-grouped.json"
IOPING_READ = FIXTURES / "ioping" / "read-c21.json"


def run_doc(run_id: str, started_at: str = "2026-11-21T05:12:00Z") -> dict:
    return {
        "run_id": run_id,
        "mode": "local",
        "matrix_name": "demo",
        "description": "a demo",
        "started_at": started_at,
        "finished_at": "2026-11-21T05:20:00Z",
        "status": "SUCCEEDED",
        "total_instances": 2,
        "matrix": {"name": "demo", "workloads": [{"kind": "fio"}]},
    }


def cell_doc(
    cell_id: str = "c000-local-fast-x2-r1", cell_index: int = 0, fleet_size: int = 2
) -> dict:
    return {
        "cell_id": cell_id,
        "cell_index": cell_index,
        "instance_type": "local",
        "storage_label": "local-fast",
        "storage_type": "local",
        "storage_detail": "/var/tmp/fast",
        "fleet_size": fleet_size,
        "repeat": 1,
    }


def manifest_doc(run_id: str, cell: dict, slot_index: int) -> dict:
    return {
        "version": 1,
        "run_id": run_id,
        "slot_index": slot_index,
        "cell": cell,
        "platform": "local",
        "started_at": "2026-11-21T05:12:01.5Z",
        "hostname": "box",
        "kernel": "6.1.0",
        "fio_version": "fio-3.33",
        "ioping_version": "1.3",
        "cpus": 2,
        "memory_bytes": 4 * 2**30,
        "target_kind": "directory",
        "target_path": "/var/tmp/fast",
        "target_fstype": "ext4",
        "target_device": "/dev/vda",
        "mount_options": "rw,relatime",
        "instance_type": None,
        "instance_id": None,
        "az_id": None,
    }


def slot_doc(status: str = "SUCCEEDED", exit_code: int = 0, error: str | None = None) -> dict:
    return {
        "version": 1,
        "status": status,
        "exit_code": exit_code,
        "error": error,
        "started_at": "2026-11-21T05:12:01Z",
        "finished_at": "2026-11-21T05:13:01Z",
        "workloads": [
            {"index": 0, "kind": "fio", "name": "randread", "status": status, "error": error}
        ],
    }


def app_doc(phase: str = "run", wall_seconds: float = 61.5, exit_code: int = 0) -> dict:
    return {
        "app": "c-build",
        "phase": phase,
        "exit_code": exit_code,
        "wall_seconds": wall_seconds,
        "started_at": "2026-11-21T05:12:02Z",
        "finished_at": "2026-11-21T05:13:03Z",
        "stdout_tail": "",
        "stderr_tail": "",
    }


def write_run(
    root: Path, run_id: str, slots: int = 2, started_at: str = "2026-11-21T05:12:00Z"
) -> Path:
    """A complete run: run.json, populate, and per slot manifest, fio, ioping, app, slot.json."""
    base = root / run_id
    base.mkdir(parents=True, exist_ok=True)
    (base / "run.json").write_text(json.dumps(run_doc(run_id, started_at)))
    cell = cell_doc(fleet_size=slots)
    cell_dir = base / cell["cell_id"]
    (cell_dir / "populate").mkdir(parents=True, exist_ok=True)
    (cell_dir / "populate" / "w02-app-c-build.json").write_text(
        json.dumps(app_doc("populate", 5.0))
    )
    for s in range(slots):
        d = cell_dir / f"slot-{s:04d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / "manifest.json").write_text(json.dumps(manifest_doc(run_id, cell, s)))
        (d / "w00-fio-randread.json").write_text(FIO_JSONPLUS.read_text())
        (d / "w01-ioping.json").write_text(IOPING_READ.read_text())
        (d / "w02-app-c-build.json").write_text(json.dumps(app_doc("run", 60.0 + s)))
        (d / "slot.json").write_text(json.dumps(slot_doc()))
    return base
