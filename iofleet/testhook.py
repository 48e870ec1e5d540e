"""A test hook: `IOFLEET_TEST_PAUSE_AT=POINT` stops the process (SIGSTOP) when it reaches
the named point, so that a test can deliver a signal at exactly that point (it sees the
process stopped in /proc, signals it, then sends SIGCONT) instead of guessing with
sleeps. Unset (always, outside tests), `pause` does nothing. Stdlib only.

Points: `entry` (the `iofleet` command has held Ctrl-C's default action and not yet
imported its modules: iofleet.__main__), `checks-started` (`iofleet local` has started fio's checks of the matrix and
not yet imported its runner: iofleet.cli), `targets-made` (it has made the matrix's
missing `local.path` directories and not yet taken the --out lock:
iofleet.local.runner), `lock-opened` (a writer of --out has opened its lock file and not
yet locked it: iofleet.results.outdir), `workload-ended` (an agent's workload child has exited, its output not yet
saved: iofleet.agent.process.run_child), `raw-target` (an agent has made a raw
device's scratch directory and not yet claimed the device: iofleet.agent.target),
`workdir-made` (an agent has made its slot's working directory on the target, not yet
`shared`: iofleet.agent.target), `target-mounted` (an agent has mounted the filesystem
it made on a block target, not yet checked it: iofleet.agent.devices), `slot-cleanup`
(an agent's slot has ended, or taken its stop, and is about to clean up its target:
iofleet.agent.slot),
`runner-cleanup` (`iofleet local` has run
its last cell and not yet written run.json: iofleet.local.runner), and four where a
temp file is written and not yet renamed into place (what a SIGKILL there leaves, the
next run removes: iofleet.results.outdir.remove_dead_temps): `temp-json` (the runner's
run.json and payloads: iofleet.local.runner), `temp-artifact` (an agent's raw artifact:
iofleet.agent.store), `temp-load` (a table's rows for the ingest:
iofleet.results.warehouse), `temp-html` (the HTML report: iofleet.report.cli).
"""

from __future__ import annotations

import os
import signal

ENV = "IOFLEET_TEST_PAUSE_AT"


def pause(point: str) -> None:
    if os.environ.get(ENV) == point:
        os.kill(os.getpid(), signal.SIGSTOP)
