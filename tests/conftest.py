"""For the whole suite: the signals the tests send reach the processes they start.

A shell that starts a job in the background without job control (`make test &` in a
script, `nohup make test`) starts it with SIGINT and SIGQUIT (and, under nohup, SIGHUP)
ignored. An ignored signal stays ignored across fork and exec, so every agent, runner
and fio the tests start would ignore it too, and a test that sends it would wait out
its deadline for a process that never heard it. A handler does not survive exec, so
putting the defaults back here gives every child the defaults.

Hypothesis runs derandomized (the same examples on every run, so a red test is red
again on the next run and never a coin toss in CI); `HYPOTHESIS_PROFILE=explore` lets
it draw new examples, for a search on purpose.
"""

from __future__ import annotations

import os
import signal

from hypothesis import settings

settings.register_profile("ci", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

_DEFAULTS = {
    signal.SIGINT: signal.default_int_handler,  # Python's own: KeyboardInterrupt
    signal.SIGQUIT: signal.SIG_DFL,
    signal.SIGHUP: signal.SIG_DFL,
    signal.SIGTERM: signal.SIG_DFL,
}


def pytest_configure(config: object) -> None:
    for signum, default in _DEFAULTS.items():
        if signal.getsignal(signum) == signal.SIG_IGN:
            signal.signal(signum, default)
