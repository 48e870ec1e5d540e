"""The plan refuses storage that a slot's (EBS) or a cell's (FSx) fio files do not fit
(iofleet/plan/matrix.py _capacity_problems; docs/decisions.md #84). The FSx side is in
tests/unit/test_fsx_plan.py; what fio leaves in a slot's directory, which the count
follows, is checked against real fio in tests/integration/test_local_room.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from iofleet.errors import ValidationFailed
from iofleet.plan.matrix import build_plan, validate_matrix_dict


def _plan(size_gib: int, filesystem: str, *sizes: str) -> None:
    doc: dict[str, Any] = {
        "name": "room",
        "instance_types": ["m6a.xlarge"],
        "storage": [
            {
                "type": "ebs",
                "label": "v",
                "volume_type": "gp3",
                "size_gib": size_gib,
                "filesystem": filesystem,
            }
        ],
        "workloads": [{"fio": "seq-write-1m-qd32", "params": {"SIZE": s}} for s in sizes],
        "parallelism": [1, 4],
    }
    build_plan(validate_matrix_dict(doc))


@pytest.mark.parametrize(
    ("size_gib", "fits", "too_big"),
    [
        (1, "950m", "955m"),  # 93% of 1 GiB: xfs left 93.7%, ext4 95.1% (mkfs, measured)
        (4, "3932m", "3933m"),  # 96%
        (100, "99328m", "99329m"),  # 97%
    ],
)
@pytest.mark.parametrize("filesystem", ["xfs", "ext4"])
def test_a_slots_files_must_fit_its_formatted_volume(
    size_gib: int, fits: str, too_big: str, filesystem: str
) -> None:
    # each slot has its own volume: the fleet size (up to 4) does not multiply the files
    _plan(size_gib, filesystem, fits)
    with pytest.raises(ValidationFailed) as caught:
        _plan(size_gib, filesystem, too_big)
    [problem] = caught.value.problems
    assert problem.path == "storage[0].size_gib"
    assert f"a {size_gib} GiB volume formatted {filesystem} leaves about" in problem.message
    assert problem.message.endswith("use a larger size_gib or a smaller SIZE")


def test_a_section_run_twice_counts_once_at_its_larger_size() -> None:
    # seq-write 600m then 900m: one file (seqwrite.0.0) grown to 900m, not 1.5 GiB
    _plan(1, "xfs", "600m", "900m")
    with pytest.raises(ValidationFailed):
        _plan(1, "xfs", "900m", "600m", "960m")


def test_a_raw_volume_is_left_to_the_raw_device_check() -> None:
    # no file system takes a share: 1 GiB of regions on a 1 GiB raw volume plans
    _plan(1, "raw", "1g")


def _one_job_on_aws(name: str, instance_types: list[str]) -> dict[str, Any]:
    """An AWS matrix running library job `name` once, on a 10 GiB gp3 volume."""
    return {
        "name": name,
        "instance_types": instance_types,
        "storage": [{"type": "ebs", "label": "v", "volume_type": "gp3", "size_gib": 10}],
        "workloads": [{"fio": name}],
        "parallelism": [1],
    }


def test_a_job_pinned_past_the_smallest_instance_types_vcpus_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a job pinned to CPUs 0 and 3, planned on c6a.large (2 vCPUs) and m6a.xlarge (4)
    monkeypatch.setenv("IOFLEET_FIO_JOBS", str(tmp_path))
    (tmp_path / "pin.fio").write_text(
        "; d\n; @param TARGET=.\n[global]\ndirectory=${TARGET}\nsize=1m\n"
        "cpus_allowed=0,3\n[x]\nrw=read\n[y]\nrw=read\n"
    )
    doc = _one_job_on_aws("pin", ["c6a.large", "m6a.xlarge"])
    with pytest.raises(ValidationFailed) as caught:
        build_plan(validate_matrix_dict(doc))
    # then one line (the [global] line both sections inherit), naming the smaller type
    assert [(p.path, p.message) for p in caught.value.problems] == [
        (
            "workloads[0].fio",
            "job 'pin': pin.fio:6: cpus_allowed=0,3: CPU 3 is beyond c6a.large's 2 CPUs "
            "(0 to 1): fio drops the job as it starts",
        )
    ]
    doc["instance_types"] = ["m6a.xlarge"]
    build_plan(validate_matrix_dict(doc))


def _host_refusal(doc: dict[str, Any]) -> str | None:
    """The one line the AWS plan refuses `doc` with, at workloads[0].fio (the host checks'
    path); None when it plans."""
    try:
        build_plan(validate_matrix_dict(doc))
    except ValidationFailed as exc:
        ((path, message),) = [(p.path, p.message) for p in exc.problems]
        assert path == "workloads[0].fio"
        return message
    return None


def _locking(tmp_path: Path, sections: str) -> None:
    (tmp_path / "lock.fio").write_text(
        f"; d\n; @param TARGET=.\n[global]\ndirectory=${{TARGET}}\nsize=1m\n{sections}"
    )


@pytest.mark.parametrize(
    ("sections", "refused"),
    [
        # 2 x 2 GiB locked at once on c6a.large (4 GiB: 3 GiB may be locked)
        ("[x]\nlockmem=2g\nnumjobs=2\n", "2 fio processes lock 4.0 GiB"),
        ("[x]\nlockmem=2g\n[y]\nlockmem=2g\n", "2 fio processes lock 4.0 GiB"),
        # fio caps a process at the memory less 128 MiB: 3.9 GiB, alone over 3 GiB
        ("[x]\nlockmem=64g\n", "1 fio process locks 3.9 GiB"),
        ("[x]\nlockmem=-1\n", "1 fio process locks 3.9 GiB"),  # fio: all it may lock
        ("[x]\nlockmem=1000m\nnumjobs=3\n", None),  # 2.9 GiB and 12 KiB of buffers
        ("[x]\nlockmem=2g\n[y]\nstonewall\nlockmem=2g\n", None),  # one after the other
        ("[x]\nlockmem=0\nnumjobs=64\n", None),
    ],
)
def test_memory_locked_past_what_the_smallest_instance_type_spares_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sections: str, refused: str | None
) -> None:
    # given a job locking memory (lockmem, per job process), planned on c6a.large (2 vCPUs,
    # 4 GiB) and m5.large (2 vCPUs, 8 GiB)
    monkeypatch.setenv("IOFLEET_FIO_JOBS", str(tmp_path))
    _locking(tmp_path, sections)
    doc = _one_job_on_aws("lock", ["m5.large", "c6a.large"])
    message = _host_refusal(doc)
    if refused is None:
        assert message is None
        return
    # then one line naming the type with the least memory and what it can spare
    assert message is not None
    assert message.startswith("job 'lock': lock.fio:")
    assert f": {refused} at once, more than the 3.0 GiB c6a.large can spare of its " in message
    assert message.endswith(
        "4.0 GiB (a quarter, at least 1 GiB, stays free): the host would run out of memory"
    )
    doc["instance_types"] = ["m5.large"]  # 8 GiB: 6 GiB may be locked
    if "64g" in sections or "-1" in sections:  # capped at 7.9 GiB by fio: too much anywhere
        with pytest.raises(ValidationFailed):
            build_plan(validate_matrix_dict(doc))
    else:
        build_plan(validate_matrix_dict(doc))


@pytest.mark.parametrize("line", ["mem=shmhuge", "iomem=mmaphuge"])
def test_huge_page_buffers_are_refused_on_aws_whose_instances_reserve_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, line: str
) -> None:
    monkeypatch.setenv("IOFLEET_FIO_JOBS", str(tmp_path))
    (tmp_path / "huge.fio").write_text(
        f"; d\n; @param TARGET=.\n[global]\ndirectory=${{TARGET}}\nsize=1m\n[x]\n{line}\n"
    )
    doc = _one_job_on_aws("huge", ["m6a.xlarge"])
    with pytest.raises(ValidationFailed) as caught:
        build_plan(validate_matrix_dict(doc))
    assert [(p.path, p.message) for p in caught.value.problems] == [
        (
            "workloads[0].fio",
            f"job 'huge': huge.fio:7: {line}: m6a.xlarge has no huge pages reserved "
            "(vm.nr_hugepages is 0): fio fails every I/O; use mem=malloc (the default)",
        )
    ]
    (tmp_path / "huge.fio").write_text(
        "; d\n; @param TARGET=.\n[global]\ndirectory=${TARGET}\nsize=1m\n[x]\nmem=malloc\n"
    )
    build_plan(validate_matrix_dict(doc))


@pytest.mark.parametrize(
    ("params", "refused"),
    [
        # 4,096 x 1 MiB of I/O buffers in one process: more than c6a.large's 3 GiB
        ({"IO_DEPTH": 4096}, "1 fio process holds 4.0 GiB at once (4.0 GiB of I/O buffers"),
        # 8 processes x 512 x 1 MiB
        ({"IO_DEPTH": 512, "NUM_JOBS": 8}, "8 fio processes hold 4.0 GiB at once"),
        ({"IO_DEPTH": 2048}, None),  # 2 GiB
        ({}, None),  # the default: 32 MiB
    ],
)
def test_io_buffers_past_what_the_smallest_instance_type_spares_are_refused(
    params: dict[str, int], refused: str | None
) -> None:
    # fio gives every job process iodepth x its largest block size of buffers, and fills
    # them (a shipped job, its parameters at values its own ranges allow)
    doc = _one_job_on_aws("seq-write-1m-qd32", ["c6a.large", "m5.large"])
    doc["workloads"][0]["params"] = {"RUNTIME": 10, "SIZE": "1g", **params}
    message = _host_refusal(doc)
    if refused is None:
        assert message is None
        return
    assert message is not None
    assert "iodepth=${IO_DEPTH}: " in message  # the line as the job writes it
    assert refused in message, message
    assert "iodepth x the largest block size), more than the 3.0 GiB c6a.large can spare" in message


def _slow_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sections: str) -> None:
    """Library job `slow`: 1 MiB in 4 KiB blocks, then `sections`."""
    monkeypatch.setenv("IOFLEET_FIO_JOBS", str(tmp_path))
    (tmp_path / "slow.fio").write_text(
        f"; d\n; @param TARGET=.\n[global]\ndirectory=${{TARGET}}\nbs=4k\nsize=1m\n{sections}"
    )


@pytest.mark.parametrize(
    ("sections", "seconds"),
    [
        # time_based: the ramp runs before the runtime
        ("[x]\nrw=read\ntime_based\nruntime=3\nramp_time=5\n", 8),
        # b waits for a: one after the other, not side by side
        (
            "[a]\nrw=read\ntime_based\nruntime=4\n[b]\nrw=read\nwait_for=a\ntime_based\nruntime=4\n",
            8,
        ),
        # size-based under a rate cap: 1 MiB at 4 KiB/s, or at 2 I/Os of 4 KiB a second
        ("[x]\nrw=write\nrate=4k\n", 256),
        ("[x]\nrw=randread\nrate_iops=2\n", 128),
        # a runtime ends a rate-capped job sooner
        ("[x]\nrw=write\nrate=4k\nruntime=10\n", 10),
        # loops run it again: 3 x 256 s, or what the runtime (over all loops) allows
        ("[x]\nrw=write\nrate=4k\nloops=3\n", 768),
        ("[x]\nrw=write\nrate=4k\nloops=3\nruntime=300\n", 300),
        # thinktime (bare numbers are microseconds) after each of the 256 I/Os, the last
        # too, or after every thinktime_blocks of them
        ("[x]\nrw=read\nthinktime=250000\n", 64),
        ("[x]\nrw=read\nthinktime=4s\nthinktime_blocks=16\n", 64),
        ("[x]\nrw=read\nthinktime=1s\nloops=2\n", 512),
    ],
)
def test_a_slot_time_limit_below_what_the_job_lasts_at_the_least_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sections: str, seconds: int
) -> None:
    _slow_job(tmp_path, monkeypatch, sections)
    doc = {**_one_job_on_aws("slow", ["m5.large"]), "slot_timeout_s": seconds}
    with pytest.raises(ValidationFailed) as caught:
        build_plan(validate_matrix_dict(doc))
    (line,) = caught.value.lines()
    assert line.startswith(f"slot_timeout_s: workloads[0] lasts at least {seconds} s ("), line
    doc["slot_timeout_s"] = seconds + 1
    build_plan(validate_matrix_dict(doc))


@pytest.mark.parametrize(
    ("sections", "seconds"),
    [
        # a start delay counts from fio's start, not from the job waited for ...
        (
            "[a]\nrw=read\ntime_based\nruntime=100\n[b]\nrw=read\nwait_for=a\nstartdelay=100\n"
            "time_based\nruntime=100\n",
            200,
        ),  # fmt: skip
        # ... nor from the end of the group before
        (
            "[a]\nrw=read\ntime_based\nruntime=100\n[b]\nstonewall\nrw=read\nstartdelay=100\n"
            "time_based\nruntime=100\n",
            200,
        ),  # fmt: skip
        # io_size and number_ios end a size-based job sooner: no bound from its size
        ("[x]\nrw=read\nrate=4k\nio_size=8k\n", 0),
        ("[x]\nrw=read\nrate_iops=1\nnumber_ios=2\n", 0),
        # fio moves on to the direction a cap leaves free: both capped, the sum bounds it
        ("[x]\nrw=randrw\nrate=1k,1m\n", 1),
        ("[x]\nrw=randrw\nrate=,4k\n", 0),
        # a ramp's I/O counts toward a size-based job's size
        ("[x]\nrw=read\nrate=4k\nramp_time=1000\n", 256),
    ],
)
def test_what_a_job_lasts_at_the_least_counts_only_what_is_sure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sections: str, seconds: int
) -> None:
    # each planned with a time limit just above what it is sure to last (before: refused,
    # fio ran each in far less than the old count; a review's findings)
    from iofleet.plan.matrix import FioWorkload, _fio_least_seconds

    _slow_job(tmp_path, monkeypatch, sections)
    assert _fio_least_seconds(FioWorkload(fio="slow")) == pytest.approx(seconds, abs=0.01)
    doc = {**_one_job_on_aws("slow", ["m5.large"]), "slot_timeout_s": int(seconds) + 1}
    build_plan(validate_matrix_dict(doc))


@pytest.mark.parametrize(
    ("engine", "rw", "refused"),
    [
        ("psync", "randread", False),  # one read at a time: one buffer resident
        ("psync", "randwrite", True),  # fio fills every buffer of a writer
        ("libaio", "randread", True),  # 1,024 reads in flight land in their buffers
        # trimwrite modes write each block they trim (fio's td_write): every buffer filled
        ("psync", "trimwrite", True),
        ("psync", "randtrimwrite", True),
        ("psync", "randtrim", False),
    ],
)
def test_io_buffers_count_as_fio_makes_them_resident(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: str, rw: str, refused: bool
) -> None:
    # 4 processes x 1,024 x 1 MiB mapped on c6a.large (3 GiB spare); a review measured a
    # psync reader's 64 x 1 MiB as 7.9 MB resident, a writer's as 72 MB
    monkeypatch.setenv("IOFLEET_FIO_JOBS", str(tmp_path))
    (tmp_path / "buf.fio").write_text(
        f"; d\n; @param TARGET=.\n[x]\ndirectory=${{TARGET}}\nsize=1g\nbs=1m\nrw={rw}\n"
        f"ioengine={engine}\niodepth=1024\nnumjobs=4\n"
    )
    doc = _one_job_on_aws("buf", ["c6a.large"])
    if "trim" in rw:  # trims are for raw devices
        doc["storage"][0]["filesystem"] = "raw"
    message = _host_refusal(doc)
    assert (message is not None) is refused, message


@pytest.mark.parametrize(
    ("sections", "refused"),
    [
        # 65 x 16,384 libaio events at once: past the 1,048,576 the bootstrap gives
        (
            "[x]\nioengine=libaio\nnumjobs=65\niodepth=16384\n",
            "iodepth=16384: libaio asks for 1,064,960 events at once",
        ),
        ("[x]\nioengine=libaio\nnumjobs=64\niodepth=16384\n", None),  # exactly the limit
        ("[x]\nioengine=psync\nnumjobs=65\niodepth=16384\n", None),  # no io_setup
        # a process opening more files than the limit the bootstrap sets, less fio's own
        ("[x]\nnrfiles=1048561\n", "nrfiles=1048561: a fio process opens 1,048,561 files"),
        ("[x]\nnrfiles=1048560\n", None),
    ],
)
def test_libaio_events_and_open_files_past_what_the_bootstrap_gives_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sections: str, refused: str | None
) -> None:
    # the AWS plan checks against what iofleet.aws.userdata sets before the agent runs
    # (tests/integration/test_user_data_host.py runs that script), not Ubuntu's defaults
    monkeypatch.setenv("IOFLEET_FIO_JOBS", str(tmp_path))
    (tmp_path / "many.fio").write_text(
        f"; d\n; @param TARGET=.\n[global]\ndirectory=${{TARGET}}\nrw=randread\nbs=4k\n"
        f"size=64m\ntime_based\nruntime=5\n{sections}"
    )
    message = _host_refusal(_one_job_on_aws("many", ["m6i.4xlarge"]))
    if refused is None:
        assert message is None
        return
    assert message is not None
    assert message.startswith("job 'many': many.fio:")
    assert refused in message, message
    assert "an iofleet instance" in message
