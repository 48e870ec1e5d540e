"""What `iofleet.local.runtemp.remove_recorded` removes: only a run temp directory of
ours, whatever path a dead run's run.json or mark names. Real directories in tmp_path."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from iofleet.local import runtemp


@pytest.fixture
def temp_here(tmp_path: Path) -> Path:
    """A run temp directory made the way the runner makes one, holding an app's files."""
    with runtemp.temp_root(tmp_path):
        made = runtemp.make_run_temp()
    assert made.parent == tmp_path and made.name.startswith(runtemp.PREFIX)
    slot = runtemp.slot_temp(made, 0, 1)
    (slot / "iofleet-app-1-abcdefgh").mkdir()
    (slot / "iofleet-app-1-abcdefgh" / "cc.s").write_text("x")
    return made


def test_a_run_temp_directory_is_removed_whole(temp_here: Path) -> None:
    assert runtemp.remove_recorded(str(temp_here)) is None
    assert not temp_here.exists()


@pytest.mark.parametrize(
    "recorded",
    [None, 7, ["x"], "", "relative/iofleet-local-abcdefgh"],
    ids=["null", "a number", "a list", "empty", "relative"],
)
def test_a_recorded_value_that_is_no_absolute_path_is_ignored(recorded: object) -> None:
    assert runtemp.remove_recorded(recorded) is None


def test_a_directory_of_another_name_is_left_alone(tmp_path: Path, temp_here: Path) -> None:
    for name in ("iofleet-local-", "iofleet-local-abcdefghi", "iofleet-localxabcdefgh", "home"):
        other = tmp_path / name
        other.mkdir()
        (other / "f").write_text("keep")
        runtemp.remove_recorded(str(other))
        assert (other / "f").read_text() == "keep", name


def test_a_link_to_a_run_temp_directory_is_not_followed(tmp_path: Path, temp_here: Path) -> None:
    link = tmp_path / "iofleet-local-linklink"
    link.symlink_to(temp_here)
    runtemp.remove_recorded(str(link))
    assert link.is_symlink() and (temp_here / "cell-0000-slot-0001").is_dir()


def test_a_file_of_that_name_is_left_alone(tmp_path: Path) -> None:
    file = tmp_path / "iofleet-local-filefile"
    file.write_text("keep")
    runtemp.remove_recorded(str(file))
    assert file.read_text() == "keep"


@pytest.mark.skipif(os.getuid() != 0, reason="making another user's directory needs root")
def test_another_users_directory_is_left_alone(temp_here: Path) -> None:
    os.chown(temp_here, 4242, 4242)
    runtemp.remove_recorded(str(temp_here))
    assert (temp_here / "cell-0000-slot-0001").is_dir()


def test_temp_root_is_undone_after_the_block(tmp_path: Path) -> None:
    before = tempfile.gettempdir()
    with runtemp.temp_root(tmp_path):
        assert tempfile.gettempdir() == str(tmp_path)
    assert tempfile.gettempdir() == before


def test_a_temp_dir_that_cannot_be_made_is_one_environment_line(tmp_path: Path) -> None:
    from iofleet.errors import EnvironmentProblem
    from iofleet.local.runner import _make_run_temp

    gone = tmp_path / "gone"  # the temp dir chosen (tempfile.tempdir), since removed
    with runtemp.temp_root(gone), pytest.raises(EnvironmentProblem) as caught:
        _make_run_temp()
    assert str(caught.value) == (
        f"TMPDIR {gone}: cannot create the run's temp directory: No such file or directory"
    )
    assert list(tmp_path.iterdir()) == []
