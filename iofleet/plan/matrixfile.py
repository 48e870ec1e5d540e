"""Reading a matrix file's bytes without waiting on it. Stdlib only: `iofleet local`
reads the file before its imports (fiojobs.start_parse_only_checks)."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


def read_matrix_bytes(path: str | Path, limit: int) -> bytes:
    """At most `limit` bytes of the file at `path`; OSError as open and read raise it.

    Opened without blocking: a FIFO no process writes to would block open(2) for
    ever; opened so, reading it finds no writer and gets end of file at once: an
    OSError that says so. A pipe with a writer (`iofleet plan <(...)`) is read as it
    is written."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        os.set_blocking(fd, True)  # a writer that is there but slow is waited for
        handle = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with handle:
        data = handle.read(limit)
        if not data and stat.S_ISFIFO(os.fstat(handle.fileno()).st_mode):
            raise OSError(errno.ENODATA, "a FIFO or pipe with no writer")
        return data
