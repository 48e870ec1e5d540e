"""A hand-written stand-in for what moto's FSx backend lacks (moto 5.2.5, `moto/fsx/`).

moto stores FSx file systems (CreateFileSystem, DescribeFileSystems, DeleteFileSystem,
tags, the OpenZFS/Lustre configuration as given) but reports no `Lifecycle` and no
Lustre `MountName`. This patch adds both to every description moto writes:

- `Lifecycle`: CREATING for the first `CREATING_DESCRIPTIONS` descriptions of a file
  system (its CreateFileSystem answer counts as one), AVAILABLE after that, so the
  state machine's CheckStorage/WaitForStorage loop really waits at least once;
- `LustreConfiguration.MountName`: 8 lower-case characters derived from the id, as
  FSx gives persistent and SCRATCH_2 file systems.

Installed in the moto server process by hooks.install() (local cloud) and by
tests that run the handlers against a ThreadedMotoServer in their own process.
Mounting is the other half, in hooks.MOUNT_SHIM: a file system's DNS name maps to a
local directory.
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any

CREATING_DESCRIPTIONS = 2
_LOCK = threading.Lock()
_SEEN: dict[str, int] = {}


def mount_name(fs_id: str) -> str:
    return hashlib.sha256(fs_id.encode()).hexdigest()[:8]


def install() -> None:
    from moto.fsx.models import FileSystem

    if getattr(FileSystem, "_iofleet_lifecycle", False):
        return
    original = FileSystem.to_dict

    def to_dict(self: Any) -> dict[str, Any]:
        doc: dict[str, Any] = original(self)
        with _LOCK:
            seen = _SEEN.get(self.file_system_id, 0)
            _SEEN[self.file_system_id] = seen + 1
        doc["Lifecycle"] = "CREATING" if seen < CREATING_DESCRIPTIONS else "AVAILABLE"
        if self.file_system_type == "LUSTRE":
            lustre = dict(doc.get("LustreConfiguration") or {})
            lustre.setdefault("MountName", mount_name(self.file_system_id))
            doc["LustreConfiguration"] = lustre
        return doc

    FileSystem.to_dict = to_dict  # type: ignore[method-assign]
    FileSystem._iofleet_lifecycle = True  # type: ignore[attr-defined]
