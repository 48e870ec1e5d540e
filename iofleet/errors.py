"""User-facing errors: one line per problem, `PATH: message`."""

from __future__ import annotations

from typing import NamedTuple


class Problem(NamedTuple):
    path: str  # like `storage[0].iops`; "" for the document itself
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class ValidationFailed(Exception):
    """Bad user input. The CLI prints `lines()` and exits 2."""

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))

    def lines(self) -> list[str]:
        return [str(p) for p in self.problems]


class UsageError(Exception):
    """A bad command line or missing file; one line, exit 2."""
