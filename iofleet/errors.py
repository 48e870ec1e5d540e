"""User-facing errors: one line per problem, `PATH: message`."""

from __future__ import annotations

from typing import NamedTuple

# what str.splitlines() breaks a line at: each is written as its escape, so a problem
# that quotes the user's text (a key, a name) is still one line
_LINE_BREAKS = {
    c: repr(chr(c))[1:-1] for c in (0x0A, 0x0B, 0x0C, 0x0D, 0x1C, 0x1D, 0x1E, 0x85, 0x2028, 0x2029)
}


# A problem's line past this many characters is clipped to its head and tail: a last
# guard, each message already quotes the user's text clipped (iofleet/quote.py).
MAX_PROBLEM = 1000
# The file a ValidationFailed names, before its problems: clipped past this many characters
MAX_FILE_NAME = 300


class Problem(NamedTuple):
    path: str  # like `storage[0].iops`; "" for the document itself
    message: str

    def __str__(self) -> str:
        return clipped_line(f"{self.path}: {self.message}" if self.path else self.message)


def clipped_line(text: str) -> str:
    """`text` as one line (`one_line`), clipped to its head and tail past MAX_PROBLEM
    characters: the last guard of every line the command line prints for bad input (a
    5,000-character path given to `--slot` made a 5 KB line)."""
    line = one_line(text)
    if len(line) <= MAX_PROBLEM:
        return line
    return f"{line[: MAX_PROBLEM // 2]}...{line[-100:]} ({len(line)} characters)"


def one_line(text: str) -> str:
    """`text` with every line break written as its escape (a message that quotes a
    file name or a key the user wrote stays one line)."""
    return text.translate(_LINE_BREAKS)


class ValidationFailed(Exception):
    """Bad user input. The CLI prints `lines()` and exits 2.

    `file`: the file the problems are in (a matrix); each line then starts with it,
    `FILE: PATH: message`.
    """

    def __init__(self, problems: list[Problem], file: str | None = None):
        self.problems = list(problems)
        self.file = file
        super().__init__("\n".join(self.lines()))

    def lines(self) -> list[str]:
        if self.file is None:
            return [str(p) for p in self.problems]
        from iofleet.quote import clip

        # a long file name is clipped too (escaped as one_line would, with its length)
        return [f"{clip(self.file, MAX_FILE_NAME)}: {p}" for p in self.problems]

    def in_file(self, file: str) -> ValidationFailed:
        """These problems as found in `file` (unchanged if they already name a file)."""
        return self if self.file is not None else ValidationFailed(self.problems, file)


class UsageError(Exception):
    """A bad command line or missing file; one line, exit 2."""


# Exit statuses of the `iofleet` command (README "Exit status"). 2 means bad input, only.
EXIT_OK = 0
EXIT_FAILED = 1  # a slot or workload failed: partial results kept and reported
EXIT_USAGE = 2  # bad input: matrix, command line, payload, a file given to parse
EXIT_ENVIRONMENT = 3  # the machine, not the input: --out not writable or full, a tool missing
EXIT_BUSY = 4  # --out is in use by another run
EXIT_INTERNAL = 70  # a bug in iofleet (EX_SOFTWARE); IOFLEET_DEBUG=1 shows the traceback
EXIT_INTERRUPTED = 130  # SIGINT; `iofleet local` exits 128 + the signal (local.stopping)


class EnvironmentProblem(Exception):
    """The machine cannot do what was asked (disk full, permission, tool missing); exit 3."""


class OutputBusy(Exception):
    """The output directory is in use by another run; exit 4."""
