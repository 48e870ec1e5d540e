"""Results store: where the agent puts raw artifacts.

A directory locally; S3 on AWS (a subclass added by the AWS side, importing
boto3 lazily). Keys are relative paths in the raw layout of docs/internals.md.

Stdlib only.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from pathlib import Path

from iofleet.quote import quote
from iofleet.testhook import pause

# A DirectoryStore's temp file: `.NAME.XXXXXXXX` beside NAME (tempfile.mkstemp adds 8
# characters of [a-z0-9_]); what an agent killed between the write and the rename leaves
PARTIAL = re.compile(r"^\..+\.[a-z0-9_]{8}$")


def remove_partial(directory: Path) -> list[str]:
    """Remove the temp files (`PARTIAL`) a dead agent left in its slot's folder, the
    artifact it was writing when it died; only for a folder whose agent has exited.
    Returns their names."""
    removed: list[str] = []
    try:
        with os.scandir(directory) as it:
            found = [e for e in it if PARTIAL.match(e.name) and e.is_file(follow_symlinks=False)]
    except OSError:
        return removed
    for entry in found:
        try:
            os.unlink(entry.path)
        except OSError:
            continue
        removed.append(entry.name)
    return removed


class StoreError(Exception):
    """The results store cannot be used; one-line message."""


def check_relpath(relpath: str) -> str:
    """A clean relative key: no leading '/', no '..', no empty parts."""
    parts = relpath.split("/")
    if any(p in ("..", ".", "") for p in parts):
        raise StoreError(f"bad artifact path {relpath!r}")
    return relpath


class ResultsStore(ABC):
    """Write-only sink for raw artifacts."""

    @abstractmethod
    def put_text(self, relpath: str, text: str) -> str:
        """Store text under relpath; returns a human-readable location."""

    def put_json(self, relpath: str, doc: object) -> str:
        return self.put_text(relpath, json.dumps(doc, indent=2, sort_keys=False) + "\n")

    @abstractmethod
    def describe(self) -> str:
        """Where the results go, for messages."""


class DirectoryStore(ResultsStore):
    """Raw artifacts under a local root; every write is atomic (temp file + rename)."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def put_text(self, relpath: str, text: str) -> str:
        target = self.root / check_relpath(relpath)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    handle.write(text)
                    handle.flush()
                    os.fsync(handle.fileno())
                pause("temp-artifact")  # a test SIGKILLs the run here (iofleet.testhook)
                os.replace(tmp, target)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError as exc:
            raise StoreError(f"cannot write {target}: {exc.strerror or exc}") from None
        return str(target)

    def describe(self) -> str:
        return str(self.root)


StoreFactory = Callable[[Mapping[str, object]], ResultsStore]
_FACTORIES: dict[str, StoreFactory] = {}


def register_store(kind: str, factory: StoreFactory) -> None:
    """Make `{"kind": kind, ...}` usable in a slot payload's `results`."""
    _FACTORIES[kind] = factory


def _directory(config: Mapping[str, object]) -> ResultsStore:
    root = config.get("root")
    if not isinstance(root, str) or not root:
        raise StoreError("results.root: required for a directory store")
    return DirectoryStore(Path(root))


def _s3(config: Mapping[str, object]) -> ResultsStore:
    # Imported only when used: the S3 store needs boto3, the rest of the agent does not.
    try:
        from iofleet.agent.s3store import from_config  # type: ignore[import-not-found]
    except ImportError as exc:
        raise StoreError(f"results.kind s3 is not available here: {exc}") from None
    store: ResultsStore = from_config(config)
    return store


register_store("directory", _directory)
register_store("s3", _s3)


def store_from_config(config: Mapping[str, object]) -> ResultsStore:
    kind = config.get("kind")
    factory = _FACTORIES.get(kind) if isinstance(kind, str) else None
    if factory is None:
        raise StoreError(
            f"results.kind: must be one of {', '.join(sorted(_FACTORIES))}, got {quote(kind)}"
        )
    return factory(config)
