"""The `iofleet` command's entry point (and `python -m iofleet`).

It holds Ctrl-C's default action until the command line is parsed. Python turns SIGINT
into KeyboardInterrupt from its start, so a Ctrl-C while `iofleet.cli` imports its
modules (argparse, the error types: the first 30 ms or so) printed a traceback from
inside an import. Until `iofleet.cli.main` hands over, SIGINT ends the process the way
SIGTERM and SIGHUP do before any command has set its handlers: by the signal (a shell
shows 130), silently, with nothing made. A SIGINT inherited as ignored (a background
job of a script) stays ignored. Kept to the standard library and this one import so the
window it cannot close (the interpreter's own start) stays as short as it is.
"""

from __future__ import annotations

import signal
import sys


def main() -> int:
    held = signal.getsignal(signal.SIGINT) is signal.default_int_handler
    if held:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    from iofleet.testhook import pause

    pause("entry")  # a test delivers a signal here (iofleet.testhook)
    from iofleet.cli import main as run

    return run(sigint=signal.default_int_handler if held else None)


if __name__ == "__main__":
    sys.exit(main())
