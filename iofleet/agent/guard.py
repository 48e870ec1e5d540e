"""The guardian between the agent and one workload: no workload outlives its agent.

`run_child` starts `python3 -I -S guard.py LIFE_FD -- ARGV...` instead of ARGV. The
guardian (stdlib only, run as a script: it imports nothing from iofleet):

- becomes a child subreaper (prctl PR_SET_CHILD_SUBREAPER), so every process the
  workload forks stays its descendant even when the intermediate parent exits
  (fio's job processes, a build's background jobs, a double-forked `setsid`
  daemon): they are reparented to the guardian, not to init;
- starts ARGV with PR_SET_PDEATHSIG=SIGKILL (if the guardian itself is killed,
  the workload's main process dies with it);
- watches LIFE_FD, the read end of a pipe whose write end only the agent holds.
  The kernel closes it when the agent dies by any signal, SIGKILL included; on
  EOF the guardian SIGKILLs every descendant and exits;
- on SIGTERM (the agent's time limit or its own interruption) it sends SIGTERM
  to every descendant, waits up to KILL_GRACE_S, then SIGKILLs what is left;
- when the workload's main process exits, it SIGKILLs the stragglers (a build
  script's background jobs) and exits with the workload's status: the same
  code, or the same signal raised on itself.

The guardian exits only once no descendant of it is left in the process table.
"""

from __future__ import annotations

import ctypes
import os
import resource
import select
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
KILL_GRACE_S = 5.0
EXEC_FAILED = "iofleet-guard: cannot run "  # stderr's first line when exec failed (exit 127)
KILL_ROUNDS = 200  # SIGKILL passes over the descendants; each pass is bounded


def prctl(option: int, value: object) -> None:
    """prctl(2) with one argument: an int, or a ctypes.byref() for a GET option."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def stat_fields(pid: int) -> list[bytes] | None:
    """The fields of /proc/PID/stat from the state (field 3) on, None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    return data[data.rindex(b")") + 2 :].split()  # the command name may hold spaces and ')'


def proc_stat(pid: int) -> tuple[int, str] | None:
    """(ppid, state) of a live process, None when it is gone."""
    rest = stat_fields(pid)
    return None if rest is None else (int(rest[1]), rest[0].decode())


def process_table() -> dict[int, tuple[int, str]]:
    """(ppid, state) of every process in /proc now, by pid: one read of the table."""
    table: dict[int, tuple[int, str]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            info = proc_stat(int(name))
            if info is not None:
                table[int(name)] = info
    return table


def live_below(table: dict[int, tuple[int, str]], roots: set[int]) -> list[int]:
    """Pids of the live (non-zombie) processes below any of `roots` in `table` (a
    zombie's children are still below it)."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found: list[int] = []
    todo = list(roots)
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return [p for p in found if table[p][1] not in ("Z", "X")]


def descendants(root: int) -> list[int]:
    """Pids of the live (non-zombie) processes below `root` in the process table."""
    return live_below(process_table(), {root})


_main_pid = 0
_main_status: list[int] = []  # the workload's wait status, once reaped


def _reap() -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if pid == _main_pid:
            _main_status.append(status)


def signal_all(sig: int) -> int:
    me = os.getpid()
    pids = descendants(me)
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
    return len(pids)


def kill_all() -> None:
    """SIGKILL every descendant until none is left (a forking process may add more)."""
    for _ in range(KILL_ROUNDS):
        if signal_all(signal.SIGKILL) == 0:
            _reap()
            return
        _reap()
        time.sleep(0.01)  # let the kernel finish the deaths before the next pass
    _reap()


def _exit_like(status: int) -> None:
    """Exit with the workload's wait status: its exit code, or die by its signal."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        try:
            signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
        except (OSError, ValueError):
            pass
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


def main(argv: list[str]) -> None:
    life_fd = int(argv[1])
    assert argv[2] == "--"
    command = argv[3:]
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    term_r, term_w = os.pipe()
    os.set_blocking(term_w, False)
    signal.set_wakeup_fd(term_w)
    terms: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, frame: terms.append(signum))
    signal.signal(signal.SIGINT, lambda signum, frame: terms.append(signum))
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)  # wakes select()

    global _main_pid
    guardian = os.getpid()
    pid = _main_pid = os.fork()
    if pid == 0:  # the workload
        try:
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() != guardian:  # the guardian died before prctl took effect
                os._exit(128 + signal.SIGKILL)
            for fd in (life_fd, term_r, term_w):
                os.close(fd)
            signal.set_wakeup_fd(-1)
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD):
                signal.signal(sig, signal.SIG_DFL)
            os.execvp(command[0], command)
        except OSError as exc:
            os.write(2, f"{EXEC_FAILED}{command[0]}: {exc.strerror or exc}\n".encode())
            os._exit(127)
        os._exit(127)

    term_deadline: float | None = None
    while True:
        if not _main_status:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                _main_status.append(status)
        if _main_status:
            kill_all()  # stragglers of a finished workload go too
            _exit_like(_main_status[0])
        if terms and term_deadline is None:
            term_deadline = time.monotonic() + KILL_GRACE_S
            signal_all(signal.SIGTERM)
        timeout = 1.0
        if term_deadline is not None:
            timeout = term_deadline - time.monotonic()
            if timeout <= 0:
                kill_all()
                continue
        try:
            ready, _, _ = select.select([life_fd, term_r], [], [], min(timeout, 1.0))
        except InterruptedError:
            ready = []
        if term_r in ready:
            os.read(term_r, 512)
        if life_fd in ready and os.read(life_fd, 1) == b"":  # the agent is dead
            kill_all()
            os._exit(128 + signal.SIGKILL)


if __name__ == "__main__":
    main(sys.argv)
