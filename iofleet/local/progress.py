"""The `iofleet local` display: a progress line, and the one line said on stderr."""

from __future__ import annotations

import sys
from typing import TextIO


class Progress:
    """One status line per change; redrawn in place on a terminal. A display only: a
    stream that cannot be written any more (the terminal hung up: EIO) is given up,
    never an error of the run."""

    def __init__(self, stream: TextIO, quiet: bool):
        self.stream = stream
        self.quiet = quiet
        self.tty = stream.isatty()
        self._last = ""

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # gone (EIO after a hang-up, EPIPE), or closed
            self.quiet = True

    def line(self, text: str, key: str | None = None) -> None:
        """Show `text`; off a terminal, only when `key` (default: text) changed."""
        if self.quiet:
            return
        key = text if key is None else key
        if self.tty:
            self._write("\r\033[K" + text)
        elif key != self._last:
            self._write(text + "\n")
        self._last = key

    def clear(self) -> None:
        """Take the status line away (on a terminal), before other lines are written."""
        if self.tty and not self.quiet and self._last:
            self._write("\r\033[K")
        self._last = ""

    def done(self, text: str) -> None:
        if self.quiet:
            return
        self._write(("\r\033[K" if self.tty else "") + text + "\n")
        self._last = ""


def say(line: str) -> None:
    """One line on stderr, quiet or not; none when stderr is gone (a hung-up terminal)."""
    try:
        print(f"iofleet: {line}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass
