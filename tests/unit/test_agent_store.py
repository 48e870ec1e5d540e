"""Results store: atomic directory writes, clean keys, pluggable kinds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from iofleet.agent.store import DirectoryStore, StoreError, store_from_config


def test_put_text_writes_under_the_root(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)

    store.put_text("run/cell/slot-0000/w00-ioping.json", "[]\n")

    assert (tmp_path / "run/cell/slot-0000/w00-ioping.json").read_text() == "[]\n"


def test_put_json_round_trips(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)

    store.put_json("run/slot.json", {"status": "SUCCEEDED"})

    assert json.loads((tmp_path / "run/slot.json").read_text()) == {"status": "SUCCEEDED"}


def test_overwrite_leaves_no_temporary_files(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)

    store.put_text("a/b.json", "1")
    store.put_text("a/b.json", "2")

    assert [p.name for p in (tmp_path / "a").iterdir()] == ["b.json"]
    assert (tmp_path / "a/b.json").read_text() == "2"


@pytest.mark.parametrize("relpath", ["/abs.json", "a/../b.json", "", "a//b"])
def test_unclean_keys_are_refused(tmp_path: Path, relpath: str) -> None:
    with pytest.raises(StoreError, match="bad artifact path"):
        DirectoryStore(tmp_path).put_text(relpath, "x")


def test_unwritable_root_is_a_one_line_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")

    with pytest.raises(StoreError, match="cannot write"):
        DirectoryStore(blocker).put_text("x.json", "{}")


def test_directory_kind_from_config(tmp_path: Path) -> None:
    store = store_from_config({"kind": "directory", "root": str(tmp_path)})

    assert isinstance(store, DirectoryStore)


def test_unknown_kind_is_refused() -> None:
    with pytest.raises(StoreError, match="results.kind: must be one of directory, s3"):
        store_from_config({"kind": "ftp"})
