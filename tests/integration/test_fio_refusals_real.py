"""The job options `plan` refuses because fio refuses them as the job starts
(iofleet/plan/fiojobs.py _refused_by_fio and the missing size; docs/decisions.md #85),
run through the real fio in a new, empty directory as a slot's: each one fails there,
and each look-alike the plan accepts runs. The cases are the unit test's."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.unit.test_fiojobs import _HEAD, ACCEPTED_BODIES, REFUSED_BODIES

pytestmark = pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")


def _direct_io_works(directory: Path) -> bool:
    try:
        fd = os.open(directory / "probe", os.O_CREAT | os.O_WRONLY | os.O_DIRECT, 0o600)
    except OSError:
        return False
    os.close(fd)
    (directory / "probe").unlink()
    return True


def _fio(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    target = tmp_path / "slot"
    target.mkdir()
    if "direct=1" in body and not _direct_io_works(target):
        pytest.skip("this file system takes no O_DIRECT")
    job = tmp_path / "j.fio"
    job.write_text(_HEAD + body + "runtime=1\n")
    return subprocess.run(
        ["fio", "--output-format=json", str(job)],
        cwd=target,
        env={**os.environ, "TARGET": str(target)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(("body", "raw_only", "why"), REFUSED_BODIES)
def test_what_the_plan_refuses_fails_in_fio(
    tmp_path: Path, body: str, raw_only: bool, why: str
) -> None:
    result = _fio(tmp_path, body)
    # fio exits non-zero, or its job reports an error
    failed = result.returncode != 0 or '"error" : 0' not in result.stdout
    assert failed, (result.returncode, result.stdout[-500:], result.stderr[-500:])


@pytest.mark.parametrize("body", ACCEPTED_BODIES)
def test_what_the_plan_accepts_runs_in_fio(tmp_path: Path, body: str) -> None:
    result = _fio(tmp_path, body)
    assert result.returncode == 0, result.stderr[-800:]
    assert '"error" : 0' in result.stdout


# each CPU option with what makes fio use it (verify threads, log compression threads,
# io_uring's kernel poll thread)
CPU_OPTION_USES = {
    "cpus_allowed": "",
    "cpumask": "",
    "verify_async_cpus": "rw=randwrite\nverify=crc32c\nverify_async=1\n",
    "log_compression_cpus": "rw=randwrite\nwrite_lat_log=lat\nlog_compression=64k\n",
    "sqthread_poll_cpu": "rw=randwrite\nioengine=io_uring\ndirect=1\nsqthread_poll=1\n",
}


@pytest.mark.parametrize("option", sorted(CPU_OPTION_USES))
def test_a_job_pinned_past_this_machines_cpus_fails_in_fio_and_is_refused_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, option: str
) -> None:
    from iofleet.plan.fiojobs import Host, host_problems

    cpus = os.sysconf("SC_NPROCESSORS_CONF")
    last, beyond = (
        (hex(1 << (cpus - 1)), hex(1 << cpus))
        if option == "cpumask"
        else (str(cpus - 1), str(cpus))
    )
    library = tmp_path / "jobs"
    library.mkdir()
    monkeypatch.setenv("IOFLEET_FIO_JOBS", str(library))
    for value, fails in ((last, False), (beyond, True)):
        body = f"[x]\nsize=1m\n{CPU_OPTION_USES[option]}{option}={value}\n"
        (library / "pin.fio").write_text(_HEAD + body)
        run = tmp_path / value
        run.mkdir()
        result = _fio(run, body)
        failed = result.returncode != 0 or '"error" : 0' not in result.stdout
        # fio drops the job pinned to a CPU the machine lacks, and runs the other
        assert failed is fails, (value, result.stderr[-400:])
        lines = host_problems("pin", {}, Host("this machine", cpus=cpus, huge_pages=True))
        assert bool(lines) is fails, lines


@pytest.mark.parametrize("line", ["mem=shmhuge", "mem=mmaphuge"])
def test_huge_page_buffers_fail_in_fio_without_huge_pages_and_are_refused_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, line: str
) -> None:
    from iofleet.plan.fiojobs import Host, host_problems, huge_pages_reserved

    if huge_pages_reserved():
        pytest.skip("this machine has huge pages reserved")
    library = tmp_path / "jobs"
    library.mkdir()
    monkeypatch.setenv("IOFLEET_FIO_JOBS", str(library))
    body = f"[x]\nsize=64k\nrw=read\n{line}\n"
    (library / "huge.fio").write_text(_HEAD + body)
    # fio fails the job here (no huge pages reserved: vm.nr_hugepages is 0) ...
    result = _fio(tmp_path, body)
    assert result.returncode != 0 or '"error" : 0' not in result.stdout, result.stdout[-400:]
    # ... and the local check says so before anything runs; with pages reserved it would not
    assert host_problems("huge", {}, Host("this machine", cpus=1, huge_pages=False))
    assert host_problems("huge", {}, Host("this machine", cpus=1, huge_pages=True)) == []


def _locked_kib(pid: int) -> int | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    return next((int(ln.split()[1]) for ln in status.splitlines() if ln.startswith("VmLck:")), 0)


@pytest.mark.parametrize(
    ("sections", "processes"),
    [
        ("[x]\nlockmem=16m\nnumjobs=2\n", 2),
        ("[x]\nlockmem=8m\n[y]\nlockmem=16m\nnumjobs=2\n", 3),
        # the stonewalled group runs after: the first group's 1 x 24m is the most at once
        ("[x]\nlockmem=24m\n[y]\nstonewall\nlockmem=8m\nnumjobs=2\n", 1),
    ],
)
def test_the_memory_the_plan_counts_as_locked_is_what_fio_locks(
    tmp_path: Path, sections: str, processes: int
) -> None:
    # the lockmem refusal (fiojobs.host_problems) counts `lockmem` per job process (each
    # numjobs clone, fio's main process none) in the sections that run together; the
    # kernel's VmLck of fio's processes while they run is the same sum
    from iofleet.plan.fiojobs import memory_at_once, memory_bytes
    from iofleet.plan.jobtext import read_jobs

    text = _HEAD + "[global]\nsize=1m\nrw=read\ntime_based=1\nruntime=30\n" + sections
    (tmp_path / "j.fio").write_text(text)
    memory = memory_bytes()
    assert memory
    groups = memory_at_once(read_jobs(tmp_path / "j.fio", {"TARGET": "/t"}), memory)
    most = max(groups, key=lambda g: g.locked)  # the group locking the most at once
    assert most.lock_line is not None and most.locked_processes == processes

    def locked(procs: dict[int, int], fio: int, target: Path) -> int | None:
        kib = [_locked_kib(pid) or 0 for pid in procs]
        total = sum(kib) * 1024
        return total if len([k for k in kib if k]) == processes else None

    assert _while_fio_runs(tmp_path, text, locked) == most.locked


@pytest.mark.parametrize("option", ["numa_cpu_nodes", "numa_mem_policy"])
def test_a_numa_node_this_process_may_not_use_fails_in_fio_and_is_refused_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, option: str
) -> None:
    # fio hands the node list to libnuma as the job is set up ("node argument N is out of
    # range": job dropped); `--parse-only` passes it, so the plan asks this machine
    from iofleet.plan.fiojobs import Host, host_problems, numa_nodes

    nodes = numa_nodes()
    if nodes is None:
        pytest.skip("no Mems_allowed_list in /proc/self/status")
    library = tmp_path / "jobs"
    library.mkdir()
    monkeypatch.setenv("IOFLEET_FIO_JOBS", str(library))
    here = Host("this machine", numa_nodes=nodes)
    beyond = max(nodes) + 1
    policy = "bind:" if option == "numa_mem_policy" else ""
    values = [(f"{policy}{min(nodes)}", False), (f"{policy}{beyond}", True)]
    values += [(f"{policy}{min(nodes)}-{beyond}", True), (f"{policy}!{beyond}", True)]
    if option == "numa_cpu_nodes":
        values.append(("all", False))
    else:
        values += [("local", False), (f"prefer:{min(nodes)}", False)]
    if option == "numa_mem_policy":  # (a review's findings, each run through fio here)
        values += [(f"prefer:{beyond}", False), ("bind", True), ("local:0", True)]
    else:
        values += [("", True), (f"!{','.join(map(str, sorted(nodes)))}", True)]
    for value, fails in values:
        body = f"[x]\nsize=64k\nrw=read\n{option}={value}\n"
        (library / "numa.fio").write_text(_HEAD + body)
        run = tmp_path / (value.replace(":", "_").replace("!", "not").replace(",", "_") or "empty")
        run.mkdir()
        result = _fio(run, body)
        failed = result.returncode != 0 or '"error" : 0' not in result.stdout
        assert failed is fails, (value, result.stderr[-400:])
        lines = host_problems("numa", {}, here)
        assert bool(lines) is fails, (value, lines)


def _while_fio_runs(tmp_path: Path, text: str, probe: Any) -> Any:
    """Run fio on job `text` (its ${TARGET}: tmp_path/slot) until `probe(procs, fio's pid,
    target)` gives a value (bounded), then stop fio and every job process it forked (they
    outlive its main process, outside its process group) and wait until they are gone."""
    from tests.integration.proctable import alive, tree, wait_for

    target = tmp_path / "slot"
    target.mkdir(exist_ok=True)
    fio = subprocess.Popen(
        ["fio", "--output-format=json", "-"],
        cwd=target,
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert fio.stdin is not None
    fio.stdin.write(text.replace("${TARGET}", str(target)))
    fio.stdin.close()
    seen: dict[int, int] = {}

    def value() -> Any:
        procs = tree(fio.pid)
        seen.update(procs)
        return probe(procs, fio.pid, target)

    try:
        return wait_for(value, 60, "fio's job processes")
    finally:
        seen.update(tree(fio.pid))
        fio.kill()
        fio.wait()
        for pid in alive(seen):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        wait_for(lambda: alive(seen) == [], 60, "fio's job processes to be gone")


def _job_vm_kib(tmp_path: Path, text: str) -> int:
    """VmSize of fio's job process while it runs `text` (time_based)."""

    def job_vm(procs: dict[int, int], fio: int, target: Path) -> int | None:
        # the job process (below fio's main one) once it has its file open: fio sets the
        # buffers up before it opens the job's files (backend.c thread_main)
        for pid in procs:
            if pid != fio and _has_open(pid, target):
                return _status_kib(pid, "VmSize:")
        return None

    vm = _while_fio_runs(tmp_path, text, job_vm)
    assert isinstance(vm, int)
    return vm


def _has_open(pid: int, directory: Path) -> bool:
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False
    for fd in fds:
        with contextlib.suppress(OSError):
            if Path(os.readlink(fd)).parent == directory:
                return True
    return False


def _status_kib(pid: int, key: str) -> int | None:
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return None
    return next((int(ln.split()[1]) for ln in lines if ln.startswith(key)), None)


@pytest.mark.parametrize("engine", ["psync", "libaio"])
def test_the_io_buffers_the_plan_counts_are_what_a_fio_job_process_maps(
    tmp_path: Path, engine: str
) -> None:
    # fio maps iodepth x the largest block size of I/O buffers in every job process, for
    # a synchronous engine too (the plan's memory check: fiojobs.memory_at_once)
    from iofleet.plan.fiojobs import memory_at_once
    from iofleet.plan.jobtext import read_jobs

    head = _HEAD.replace("ioengine=psync", f"ioengine={engine}")
    body = "[x]\nsize=4m\nrw=write\nbs=1m,4k\ntime_based=1\nruntime=30\n"
    sizes = []
    for depth in (1, 257):
        text = head + body + f"iodepth={depth}\n"
        (tmp_path / str(depth)).mkdir()
        vm = _job_vm_kib(tmp_path / str(depth), text)
        (tmp_path / "count.fio").write_text(text)
        (group,) = memory_at_once(read_jobs(tmp_path / "count.fio", {"TARGET": "/t"}), 1 << 40)
        sizes.append((vm * 1024, group.buffers))
    (vm1, counted1), (vm257, counted257) = sizes
    assert counted257 - counted1 == 256 << 20
    # the job process maps that much more, within 2% (its other mappings are the same)
    assert abs((vm257 - vm1) - (counted257 - counted1)) < (256 << 20) * 0.02


def test_libaio_events_past_what_this_machine_has_left_fail_in_fio_and_are_refused_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # every libaio job process asks io_setup for its iodepth of events; the kernel
    # refuses past fs.aio-max-nr less what is in use (EAGAIN: fio error 11, as the job
    # starts; --parse-only passes it)
    from iofleet.plan.fiojobs import Host, aio_events_left, host_problems

    left = aio_events_left()
    if left is None or not 2 <= left <= 300_000:
        pytest.skip(f"fs.aio-max-nr leaves {left} events (buffers of that depth: too many)")
    library = tmp_path / "jobs"
    library.mkdir()
    monkeypatch.setenv("IOFLEET_FIO_JOBS", str(library))
    here = Host("this machine", aio_events=left)
    for depth, fails in ((left // 2, False), (left + 1, True)):
        body = f"[x]\nsize=1m\nrw=write\nioengine=libaio\niodepth={depth}\n"
        (library / "aio.fio").write_text(_HEAD + body)
        run = tmp_path / f"d{depth}"
        run.mkdir()
        result = _fio(run, body)
        failed = result.returncode != 0 or '"error" : 0' not in result.stdout
        assert failed is fails, (depth, result.stdout[-300:], result.stderr[-300:])
        assert bool(host_problems("aio", {}, here)) is fails
    # two slots of this machine at half the depth each and one more: refused, not run
    body = f"[x]\nsize=1m\nrw=write\nioengine=libaio\niodepth={left // 2 + 1}\n"
    (library / "aio.fio").write_text(_HEAD + body)
    (line,) = host_problems("aio", {}, Host("this machine", aio_events=left, slots=2))
    assert (
        f"libaio asks for {2 * (left // 2 + 1):,} events at once (iodepth x job processes x 2 slots)"
        in line
    )


@pytest.mark.parametrize(
    "sections",
    [
        "[x]\nrw=read\ntime_based\nruntime=1\nramp_time=1\n",
        "[a]\nrw=read\ntime_based\nruntime=1\n[b]\nrw=read\nwait_for=a\ntime_based\nruntime=1\n",
        "[x]\nrw=write\nrate=32k\n",
        "[x]\nrw=randread\nrate_iops=8\n",
        "[x]\nrw=randrw\nrate=16k,16k\n",
        "[x]\nrw=write\nrate=64k\nloops=2\n",  # 1 s, twice
        "[x]\nrw=read\nthinktime=125ms\n",  # a pause after each of the 16 reads
        "[x]\nrw=read\nthinktime=500ms\nthinktime_blocks=4\n",  # 4 pauses
        # one after the last block too, each pass (a review's finding: 3 pauses counted)
        "[x]\nrw=read\nthinktime=250ms\nthinktime_blocks=4\nloops=2\n",
        "[a]\nrw=read\ntime_based\nruntime=1\n[b]\nrw=read\nwait_for=a\nstartdelay=1\n"
        "time_based\nruntime=1\n",
        "[a]\nrw=read\ntime_based\nruntime=1\n[b]\nstonewall\nrw=read\nstartdelay=1\n"
        "time_based\nruntime=1\n",
    ],
)
def test_fio_lasts_at_least_what_the_slot_time_check_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sections: str
) -> None:
    # the plan refuses a slot_timeout_s below what a job lasts at the least
    # (expect.JobProfile.least_seconds, matrix._fio_least_seconds): fio takes that long
    import time

    from iofleet.plan.matrix import FioWorkload, _fio_least_seconds

    text = _HEAD + "[global]\nbs=4k\nsize=64k\n" + sections
    library = tmp_path / "jobs"
    library.mkdir()
    (library / "slow.fio").write_text(text)
    monkeypatch.setenv("IOFLEET_FIO_JOBS", str(library))
    counted = _fio_least_seconds(FioWorkload(fio="slow"))
    assert counted >= 2.0
    target = tmp_path / "slot"
    target.mkdir()
    started = time.monotonic()
    result = subprocess.run(
        ["fio", "--output-format=json", "-"],
        input=text.replace("${TARGET}", str(target)),
        cwd=target,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    took = time.monotonic() - started
    assert result.returncode == 0 and '"error" : 0' in result.stdout, result.stderr[-300:]
    assert took >= counted, (took, counted)


@pytest.mark.parametrize(
    ("lines", "fails"),
    [
        # the poll thread's CPU is used only with sqthread_poll (a review's finding) ...
        ("sqthread_poll_cpu={beyond}\n", False),
        ("sqthread_poll=0\nsqthread_poll_cpu={beyond}\n", False),
        # ... and fio reads it in any base
        ("sqthread_poll=1\nsqthread_poll_cpu={beyond_hex}\n", True),
    ],
)
def test_io_urings_poll_cpu_is_checked_as_fio_uses_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lines: str, fails: bool
) -> None:
    from iofleet.plan.fiojobs import Host, host_problems

    cpus = os.sysconf("SC_NPROCESSORS_CONF")
    text = lines.format(beyond=cpus + 3, beyond_hex=hex(cpus + 14))
    body = f"[x]\nsize=1m\nrw=randwrite\nioengine=io_uring\ndirect=1\n{text}"
    library = tmp_path / "jobs"
    library.mkdir()
    (library / "ur.fio").write_text(_HEAD + body)
    monkeypatch.setenv("IOFLEET_FIO_JOBS", str(library))
    result = _fio(tmp_path, body)
    failed = result.returncode != 0 or '"error" : 0' not in result.stdout
    assert failed is fails, result.stdout[-300:] + result.stderr[-300:]
    assert bool(host_problems("ur", {}, Host("this machine", cpus=cpus))) is fails
