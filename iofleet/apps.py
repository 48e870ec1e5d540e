"""Application presets for `{"app": NAME}` workloads.

A preset is a pair of bash snippets kept in `data/apps.json`:

- `populate` (optional) runs once per cell before the fleet starts, e.g. to
  fill a download cache on the cell's shared storage;
- `run` is timed on every slot.

Both run with cwd=$IOFLEET_WORKDIR and these environment variables:
IOFLEET_WORKDIR (per-slot directory on the storage under test),
IOFLEET_SHARED (per-cell shared directory on that storage),
IOFLEET_SLOT, IOFLEET_FLEET_SIZE, IOFLEET_CELL_ID.

Stdlib only: the agent and the Lambdas import this module.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

DATA_FILE = Path(__file__).resolve().parent / "data" / "apps.json"


@dataclass(frozen=True)
class AppSpec:
    name: str
    description: str
    populate: str | None
    run: str
    needs_network: bool
    local_ok: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "populate": self.populate,
            "run": self.run,
            "needs_network": self.needs_network,
            "local_ok": self.local_ok,
        }


def _script(value: object, where: str) -> str:
    """A command is stored as a string or a list of lines (readable JSON)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(line, str) for line in value):
        return "\n".join(value) + "\n"
    raise ValueError(f"{DATA_FILE.name}: {where}: expected a string or a list of strings")


@cache
def _presets() -> dict[str, AppSpec]:
    doc = json.loads(DATA_FILE.read_text(encoding="utf-8"))
    presets: dict[str, AppSpec] = {}
    for name, raw in doc["presets"].items():
        populate = raw.get("populate")
        presets[name] = AppSpec(
            name=name,
            description=str(raw.get("description", "")),
            populate=None if populate is None else _script(populate, f"{name}.populate"),
            run=_script(raw["run"], f"{name}.run"),
            needs_network=bool(raw.get("needs_network", False)),
            local_ok=bool(raw.get("local_ok", True)),
        )
    return presets


def preset_names() -> list[str]:
    """Names of every preset, sorted."""
    return sorted(_presets())


def get_preset(name: str) -> AppSpec:
    """The preset called `name`; KeyError (listing the known names) if unknown."""
    try:
        return _presets()[name]
    except KeyError:
        raise KeyError(
            f"unknown app preset {name!r} (known: {', '.join(preset_names())})"
        ) from None
