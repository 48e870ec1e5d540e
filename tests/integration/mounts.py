"""A tmpfs mounted for one test (needs root, as the loop-device tests do)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def tmpfs(point: Path, size: str, source: str) -> Iterator[Path]:
    """A tmpfs of `size` named `source` mounted on `point` (made here), unmounted after;
    the test is skipped where this machine cannot mount one."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("needs root to mount a tmpfs")
    point.mkdir()
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", source, str(point)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {proc.stderr.strip()}")
    try:
        yield point
    finally:
        subprocess.run(["umount", str(point)], capture_output=True, check=False)
