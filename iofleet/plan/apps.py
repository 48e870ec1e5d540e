"""Application presets for `{"app": NAME}` workloads.

A preset is a pair of bash snippets kept in `data/apps.json`:

- `populate` (optional) runs once per cell before the fleet starts, e.g. to
  fill a download cache on the cell's shared storage;
- `run` is timed on every slot.

A preset may also say what it needs from the host (`host`): the distro, the
releases it supports (none listed: any release the stack launches), the
Debian/Ubuntu packages and the locales. The AWS bootstrap installs them before
the agent starts (untimed, before the start barrier) and `plan` refuses a
preset on a release it does not support (iofleet/plan/hosts.py).

Both run with cwd=$IOFLEET_WORKDIR and these environment variables:
IOFLEET_WORKDIR (per-slot directory on the storage under test),
IOFLEET_SHARED (per-cell shared directory on that storage),
IOFLEET_SLOT, IOFLEET_FLEET_SIZE, IOFLEET_CELL_ID.

Stdlib only: the agent and the Lambdas import this module.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from iofleet.quote import quote

DATA_FILE = Path(__file__).resolve().parent / "data" / "apps.json"

# Debian policy 5.6.1: a package name is lower case letters, digits, '+', '-', '.',
# at least two characters, starting alphanumeric (also keeps the bootstrap's
# shell line free of anything a shell would interpret).
PACKAGE_RE = re.compile(r"^[a-z0-9][a-z0-9+.-]+$")
LOCALE_RE = re.compile(r"^[A-Za-z]{2,3}(_[A-Z]{2})?\.UTF-8$")
RELEASE_RE = re.compile(r"^[0-9]{2}\.[0-9]{2}$")
DISTROS = ("ubuntu",)


@dataclass(frozen=True)
class HostNeeds:
    """What a preset needs from the instance's operating system."""

    distro: str = "ubuntu"
    releases: tuple[str, ...] = ()  # empty: any release the stack launches
    packages: tuple[str, ...] = ()
    locales: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "distro": self.distro,
            "releases": list(self.releases),
            "packages": list(self.packages),
            "locales": list(self.locales),
        }


@dataclass(frozen=True)
class AppSpec:
    name: str
    description: str
    populate: str | None
    run: str
    needs_network: bool
    local_ok: bool
    host: HostNeeds = field(default_factory=HostNeeds)
    # runs on Mountpoint for Amazon S3 (new files written once, no rename/links/overwrite);
    # iofleet/plan/mountpoint.py refuses the preset there otherwise, with the note
    mountpoint: bool = False
    mountpoint_note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "populate": self.populate,
            "run": self.run,
            "needs_network": self.needs_network,
            "local_ok": self.local_ok,
            "host": self.host.to_dict(),
            "mountpoint": self.mountpoint,
            "mountpoint_note": self.mountpoint_note,
        }


def _script(value: object, where: str) -> str:
    """A command is stored as a string or a list of lines (readable JSON)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(line, str) for line in value):
        return "\n".join(value) + "\n"
    raise ValueError(f"{DATA_FILE.name}: {where}: expected a string or a list of strings")


def _names(value: object, where: str, regex: re.Pattern[str], what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{DATA_FILE.name}: {where}: expected a list of strings")
    for v in value:
        if not regex.match(v):
            raise ValueError(f"{DATA_FILE.name}: {where}: {quote(v)} is not {what}")
    if len(set(value)) != len(value):
        raise ValueError(f"{DATA_FILE.name}: {where}: listed twice")
    return tuple(value)


def _host(raw: object, where: str) -> HostNeeds:
    if raw is None:
        return HostNeeds()
    if not isinstance(raw, dict):
        raise ValueError(f"{DATA_FILE.name}: {where}: expected an object")
    unknown = {k for k in raw if not k.startswith("_")} - {
        "distro",
        "releases",
        "packages",
        "locales",
    }
    if unknown:
        raise ValueError(f"{DATA_FILE.name}: {where}: unknown keys {', '.join(sorted(unknown))}")
    distro = raw.get("distro", "ubuntu")
    if distro not in DISTROS:
        raise ValueError(f"{DATA_FILE.name}: {where}.distro: one of {', '.join(DISTROS)}")
    return HostNeeds(
        distro=str(distro),
        releases=_names(raw.get("releases"), f"{where}.releases", RELEASE_RE, "a release"),
        packages=_names(raw.get("packages"), f"{where}.packages", PACKAGE_RE, "a package name"),
        locales=_names(raw.get("locales"), f"{where}.locales", LOCALE_RE, "a UTF-8 locale"),
    )


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
            host=_host(raw.get("host"), f"{name}.host"),
            mountpoint=raw.get("mountpoint", False) is True,
            mountpoint_note=str(raw.get("mountpoint_note", "")),
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
            f"unknown app preset {quote(name)} (known: {', '.join(preset_names())})"
        ) from None
