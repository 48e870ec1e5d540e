"""A test hook: `IOFLEET_TEST_PAUSE_AT=POINT` stops the process (SIGSTOP) when it reaches
the named point, so that a test can deliver a signal at exactly that point (it sees the
process stopped in /proc, signals it, then sends SIGCONT) instead of guessing with
sleeps. Unset (always, outside tests), `pause` does nothing. Stdlib only.

Points: `workload-ended` (an agent's workload child has exited, its output not yet
saved: iofleet.agent.process.run_child), `runner-cleanup` (`iofleet local` has run
its last cell and not yet written run.json: iofleet.local.runner).
"""

from __future__ import annotations

import os
import signal

ENV = "IOFLEET_TEST_PAUSE_AT"


def pause(point: str) -> None:
    if os.environ.get(ENV) == point:
        os.kill(os.getpid(), signal.SIGSTOP)
