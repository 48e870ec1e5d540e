"""fio job options checked at plan time against fio's own option tables
(iofleet/plan/fioopts.py, iofleet/plan/data/fio-options-*.json).

The probe job files (tests/data/probes/fio-jobs) are also run through the real fio
by tests/integration/test_fio_options_real.py: this file checks iofleet's verdict and
message for each; that one checks that the installed fio agrees, and
tests/unit/test_fio_verdicts.py that the recorded verdicts of real fio 3.28, 3.33 and
3.36 do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from iofleet.errors import ValidationFailed
from iofleet.plan import fiojobs, fioopts
from iofleet.plan.matrix import build_plan, validate_matrix_dict
from tests.fio_probes import EXPECTED, PROBES, problem, verdict

# the fio releases the tables were generated from (git tags of github.com/axboe/fio)
PINNED = {
    "3.28": "d83ac9d3d30d5f5dc6d0e425e4ba945a772839f6",
    "3.33": "72bcaffd7d56d4c2ebad6d0a1e465e0e9db8be40",
    "3.36": "624e263f6acb1563471a83601ce19dfb77ac5694",
}


def _first_problem(path: Path, release: str = "3.33") -> str | None:
    try:
        problems = [p.text() for p in fioopts.check_job_file(path, {}, release)]
    except fioopts.JobTextError as exc:
        problems = [str(exc)]
    return problems[0].replace(f"{PROBES}/", "") if problems else None


def test_every_probe_file_has_an_entry_and_every_entry_a_file() -> None:
    assert {p.stem for p in PROBES.glob("*.fio")} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_probe_job_file_gets_its_verdict(name: str) -> None:
    # given a job file fio accepts (accepted-*), refuses (refused-*) or reads other than
    # written (stricter-*); when checked; then exactly the expected first problem (a
    # release-* probe's with each release's table: tests/unit/test_fio_verdicts.py)
    expected = problem(name, "3.33")
    assert (expected is None) == (verdict(name, "3.33") == "accepted")
    assert _first_problem(PROBES / f"{name}.fio") == expected


@pytest.mark.parametrize("release", fioopts.RELEASES)
def test_tables_name_their_fio_release_and_commit(release: str) -> None:
    table = fioopts.table(release)
    assert (table["fio"], table["tag"], table["commit"]) == (
        release,
        f"fio-{release}",
        PINNED[release],
    )
    assert {"rw", "bs", "iodepth", "ioengine", "size", "runtime"} <= set(table["options"])
    assert table["options"]["rw"]["values"][:2] == ["read", "write"]
    assert "userspace_reap" in table["engines"]["libaio"]["options"]
    assert "fixedbufs" in table["engines"]["io_uring"]["options"]


@pytest.mark.parametrize("release", fioopts.RELEASES)
def test_every_library_job_passes_with_its_defaults(release: str) -> None:
    for job in fiojobs.list_jobs():
        assert fiojobs.option_problems(job.name, {}, release) == [], job.name


@pytest.mark.parametrize(
    ("version", "release"),
    [
        ("fio-3.33", "3.33"),
        ("fio-3.35", "3.33"),
        ("fio-3.41", "3.36"),
        ("fio-3.16", "3.28"),
        (None, "3.36"),
        ("garbage", "3.36"),
    ],
)
def test_a_fio_version_maps_to_the_newest_table_not_newer(
    version: str | None, release: str
) -> None:
    assert fioopts.release_for_version(version) == release


def test_hosts_map_to_their_distribution_fio() -> None:
    assert fioopts.release_for_host("22.04") == "3.28"
    assert fioopts.release_for_host("24.04") == "3.36"
    assert fioopts.release_for_host(None) == "3.36"


def _write(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / f"{name}.fio"
    path.write_text(body, encoding="utf-8")
    return path


def test_an_option_of_a_newer_fio_is_refused_on_an_older_one(tmp_path: Path) -> None:
    path = _write(tmp_path, "new", "[a]\nsize=1m\nlog_entries=4096\n")
    assert _first_problem(path, "3.33") is None
    assert fioopts.check_job_file(path, {}, "3.28")[0].message == (
        "log_entries needs fio 3.33 or newer (this run has fio 3.28)"
    )


def test_a_value_or_engine_option_of_a_newer_fio_is_named_so(tmp_path: Path) -> None:
    path = _write(
        tmp_path, "new", "[a]\nsize=1m\nioengine=libaio\nreadwrite=randtrimwrite\ncmdprio_hint=1\n"
    )
    assert [p.message for p in fioopts.check_job_file(path, {}, "3.28")] == [
        "readwrite=randtrimwrite: 'randtrimwrite' needs fio 3.33 or newer (this run has fio 3.28)",
        "cmdprio_hint needs fio 3.36 or newer (this run has fio 3.28)",
    ]
    assert fioopts.check_job_file(path, {}, "3.36") == []


@pytest.mark.parametrize(
    ("body", "refused"),
    [  # fio 3.36's own verdicts when the job starts (checked with fio-3.36 built from its tag)
        ("[global]\nss_interval=2s\n[a]\nss_dur=4\n", None),
        ("[a]\nss_dur=2\n", None),
        ("[a]\nss_dur=1\n", "ss_dur=1: fio 3.36 needs a steady-state duration"),
        ("[a]\nss_dur=3s\nss_interval=2\n", "ss_dur=3s: fio 3.36 needs"),
        ("[a]\nss_dur=10\nss_interval=500ms\n", "steadystate_check_interval must be at least"),
        ("[a]\nss_dur=${D}\n", None),  # fio's environment fills it in: not checked
    ],
)
def test_fio_3_36s_steady_state_rule_is_checked(
    tmp_path: Path, body: str, refused: str | None
) -> None:
    path = _write(tmp_path, "ss", body.replace("[a]\n", "[a]\nsize=1m\nsteadystate=iops:50%\n"))
    found = [p.message for p in fioopts.check_job_file(path, {}, "3.36")]
    assert [m[: len(refused)] for m in found] == ([refused] if refused else [])
    # 3.28 and 3.33 take any duration (ss_interval itself is 3.36's)
    assert [
        p.message for p in fioopts.check_job_file(path, {}, "3.33") if "ss_dur" in p.message
    ] == []


@pytest.mark.parametrize(
    ("body", "refused"),
    [  # fio 3.36's verdicts when the jobs start (fio-3.36 built from its tag): "conflicting
        # ss_check_interval: 2000000 and 1000000, must be globally equal"; --parse-only passes
        ("[a]\nsize=1m\n[b]\nsize=1m\nss_interval=2s\n", ("b", "job 'b' checks every 2s")),
        ("[a]\nsize=1m\nss_interval=2s\n[b]\nsize=1m\n", ("b", "job 'b' checks every 1s")),
        ("[global]\nss_interval=2s\n[a]\nsize=1m\n[b]\nsize=1m\n", None),
        ("[a]\nsize=1m\nss_interval=1s\n[b]\nsize=1m\n", None),  # 1 s is the default
        ("[a]\nsize=1m\nss_interval=${I}\n[b]\nsize=1m\n", None),  # from fio's environment
    ],
)
def test_fio_3_36_needs_one_steady_state_check_interval_per_run(
    tmp_path: Path, body: str, refused: tuple[str, str] | None
) -> None:
    path = _write(tmp_path, "ssi", body)
    found = [(p.section, p.message) for p in fioopts.check_job_file(path, {}, "3.36")]
    if refused is None:
        assert found == []
    else:
        [(section, message)] = found
        assert section == refused[0] and message.startswith(
            f"steadystate_check_interval: {refused[1]}"
        )
        assert message.endswith(
            "fio 3.36 needs one interval for every job of a run and "
            "refuses the jobs when they start"
        )


# fio's limits written with macros of its headers (os/os-linux.h IOPRIO_MAX_PRIO and
# IOPRIO_MAX_PRIO_CLASS, iolog.h DEF_LOG_ENTRIES and MAX_LOG_ENTRIES, flow.h, zbd_types.h)
# or with sizeof(struct verify_header): (releases, lines, refused, accepted at the limit);
# `fio --parse-only` of fio 3.28 and 3.36 built from their tags and Debian's 3.33 refused
# each refused line with "<option>: max/min value out of range: ..." and took the other
MACRO_LIMITS = [
    (fioopts.RELEASES, "prio=8", "prio=8: '8' is above fio's maximum 7", "prio=7"),
    (fioopts.RELEASES, "prioclass=4", "prioclass=4: '4' is above fio's maximum 3", "prioclass=3"),
    (
        fioopts.RELEASES,
        "ioengine=libaio\ncmdprio=8",
        "cmdprio=8: '8' is above fio's maximum 7",
        "ioengine=libaio\ncmdprio=7",
    ),
    (
        fioopts.RELEASES,
        "ioengine=io_uring\ncmdprio_class=4",
        "cmdprio_class=4: '4' is above fio's maximum 3",
        "ioengine=io_uring\ncmdprio_class=3",
    ),
    (
        fioopts.RELEASES,
        "ioengine=libaio\ncmdprio_class=0",  # IOPRIO_MIN_PRIO_CLASS + 1
        "cmdprio_class=0: '0' is below fio's minimum 1",
        "ioengine=libaio\ncmdprio_class=1",
    ),
    (
        fioopts.RELEASES,
        "verify=crc32c\nverify_interval=4",
        "verify_interval=4: '4' is below fio's minimum 80",
        "verify=crc32c\nverify_interval=80",
    ),
    (
        fioopts.RELEASES,
        "verify=crc32c\nverify_offset=39",
        "verify_offset=39: '39' is below fio's minimum 40",
        "verify=crc32c\nverify_offset=40",
    ),
    (
        ("3.33", "3.36"),
        "log_entries=1",
        "log_entries=1: '1' is below fio's minimum 1024",
        "log_entries=1024",
    ),
    (("3.33", "3.36"), "log_entries=1023", "log_entries=1023: '1023' is below", "log_entries=1024"),
    (
        ("3.33", "3.36"),
        "log_entries=2000000",
        "log_entries=2000000: '2000000' is above fio's maximum 1048576",
        "log_entries=1048576",
    ),
    (
        ("3.36",),
        "priohint=1024",
        "priohint=1024: '1024' is above fio's maximum 1023",
        "priohint=1023",
    ),
    (
        ("3.36",),
        "ioengine=libaio\ncmdprio_hint=1024",
        "cmdprio_hint=1024: '1024' is above fio's maximum 1023",
        "ioengine=libaio\ncmdprio_hint=1023",
    ),
    (fioopts.RELEASES, "flow=1001", "flow=1001: '1001' is above fio's maximum 1000", "flow=1000"),
    (
        fioopts.RELEASES,
        "max_open_zones=4097",
        "max_open_zones=4097: '4097' is above fio's maximum 4096",
        "max_open_zones=4096",
    ),
    (
        fioopts.RELEASES,
        "log_compression=1g",
        "log_compression=1g: '1g' is above fio's maximum 536870912",
        "log_compression=512m",
    ),
]


@pytest.mark.parametrize(
    ("release", "lines", "refused", "accepted"),
    [(r, lines, refused, ok) for rels, lines, refused, ok in MACRO_LIMITS for r in rels],
)
def test_a_limit_fio_writes_with_a_macro_is_checked(
    tmp_path: Path, release: str, lines: str, refused: str, accepted: str
) -> None:
    # given a value past a limit written with a macro of one of fio's headers
    bad = _write(tmp_path, "bad", f"[a]\nsize=1m\n{lines}\n")
    # then the plan refuses it in one line, like its other range refusals
    (problem,) = fioopts.check_job_file(bad, {}, release)
    assert problem.message.startswith(refused)
    # and the value at the limit passes
    good = _write(tmp_path, "good", f"[a]\nsize=1m\n{accepted}\n")
    assert fioopts.check_job_file(good, {}, release) == []


@pytest.mark.parametrize("release", fioopts.RELEASES)
def test_more_percentiles_than_fio_keeps_are_refused(tmp_path: Path, release: str) -> None:
    # fio (stat.h FIO_IO_U_LIST_MAX_LEN) says 'the list exceeding max length 20', keeps the
    # first 20 percentiles and runs (exit 0): the plan refuses the 21st
    twenty = ":".join(str(n) for n in range(1, 21))
    path = _write(tmp_path, "p", f"[a]\nsize=1m\npercentile_list={twenty}\n")
    assert fioopts.check_job_file(path, {}, release) == []
    path = _write(tmp_path, "p", f"[a]\nsize=1m\npercentile_list={twenty}:99.9\n")
    (problem,) = fioopts.check_job_file(path, {}, release)
    assert problem.message.endswith(
        f": 21 values, fio {release} takes at most 20 (it keeps the first 20 and drops the rest)"
    )


@pytest.mark.parametrize("release", fioopts.RELEASES)
def test_the_tables_have_the_limits_fio_writes_with_macros(release: str) -> None:
    options = fioopts.table(release)["options"]
    assert (options["prio"]["max"], options["prioclass"]["max"]) == (7, 3)
    assert (options["verify_interval"]["min"], options["verify_offset"]["min"]) == (80, 40)
    assert options["percentile_list"]["maxlen"] == 20
    for engine in ("libaio", "io_uring"):
        cmdprio = fioopts.table(release)["engines"][engine]["options"]
        assert (cmdprio["cmdprio"]["max"], cmdprio["cmdprio_class"]["max"]) == (7, 3)
    if release != "3.28":
        assert (options["log_entries"]["min"], options["log_entries"]["max"]) == (1024, 1048576)


def test_an_io_uring_option_on_libaio_names_its_engine(tmp_path: Path) -> None:
    path = _write(tmp_path, "e", "[global]\nioengine=libaio\n[a]\nsize=1m\nfixedbufs\n")
    assert fioopts.check_job_file(path, {}, "3.36")[0].message == (
        "fixedbufs is an option of ioengine io_uring or io_uring_cmd, not of this job's "
        "ioengine libaio"
    )


def test_a_value_from_a_known_variable_is_checked_and_an_unknown_one_is_not(
    tmp_path: Path,
) -> None:
    path = _write(tmp_path, "v", "[a]\nsize=1m\nrw=${MODE}\n")
    assert fioopts.check_job_file(path, {}, "3.36") == []  # fio's environment fills it
    (problem,) = fioopts.check_job_file(path, {"MODE": "radnread"}, "3.36")
    assert problem.variables == ("MODE",)
    assert problem.message.startswith("rw=radnread: 'radnread' is not one of read, write")


# ------------------------------------------------------------------ through the plan


LIBRARY_HEAD = "; probe job\n; @param TARGET=.  where\n; @param DEPTH:int=1  queue depth\n"


def _library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "probe.fio").write_text(LIBRARY_HEAD + body, encoding="utf-8")
    monkeypatch.setenv("IOFLEET_FIO_JOBS", str(tmp_path / "lib"))


def _aws_doc(**extra: Any) -> dict[str, Any]:
    return {
        "name": "opts",
        "instance_types": ["m6i.large"],
        "storage": [{"type": "ebs", "label": "gp3", "volume_type": "gp3", "size_gib": 100}],
        "workloads": [{"fio": "probe", **extra}],
        "parallelism": [1],
    }


def _aws_lines(doc: dict[str, Any]) -> list[str]:
    with pytest.raises(ValidationFailed) as info:
        build_plan(validate_matrix_dict(doc), target="aws")
    return info.value.lines()


def test_a_typo_in_a_library_job_refuses_the_aws_plan_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _library(tmp_path, monkeypatch, "[a]\ndirectory=${TARGET}\nsize=1m\niodepht=${DEPTH}\n")
    assert _aws_lines(_aws_doc()) == [
        "workloads[0].fio: job 'probe' for fio 3.36: probe.fio:7: [a] unknown fio option "
        "'iodepht' (did you mean 'iodepth'?)"
    ]


def test_a_bad_value_from_a_matrix_parameter_is_the_parameters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # DEPTH is an int, 2 is a valid one, but it lands in direct=, a boolean
    _library(tmp_path, monkeypatch, "[a]\ndirectory=${TARGET}\nsize=1m\ndirect=${DEPTH}\n")
    build_plan(validate_matrix_dict(_aws_doc()), target="aws")  # the default, 1, is fine
    assert _aws_lines(_aws_doc(params={"depth": 2})) == [
        "workloads[0].params.depth: job 'probe' for fio 3.36: probe.fio:7: [a] direct=2: "
        "expected 0 to 1"
    ]


def test_the_host_release_picks_the_fio_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _library(tmp_path, monkeypatch, "[a]\ndirectory=${TARGET}\nsize=1m\niodepth=${DEPTH}\nfdp=0\n")
    build_plan(validate_matrix_dict(_aws_doc()), target="aws")  # Ubuntu 24.04: fio 3.36
    assert _aws_lines({**_aws_doc(), "ubuntu_release": "22.04"}) == [
        "workloads[0].fio: job 'probe' for fio 3.28: probe.fio:8: [a] fdp needs fio 3.36 or "
        "newer (this run has fio 3.28)"
    ]


def test_a_whole_float_parameter_is_refused_like_an_integer_field() -> None:
    doc = _aws_doc()
    doc["workloads"] = [{"fio": "latency-4k-qd1-randread", "params": {"RUNTIME": 60.0}}]
    with pytest.raises(ValidationFailed) as info:
        validate_matrix_dict(doc)
    assert info.value.lines() == [
        "workloads[0].params.RUNTIME: must be a valid integer or a string, got 60.0"
    ]
    doc["parallelism"] = [1.0]
    doc["workloads"] = [{"fio": "latency-4k-qd1-randread", "params": {"RUNTIME": 60}}]
    with pytest.raises(ValidationFailed) as info:
        validate_matrix_dict(doc)
    assert info.value.lines() == ["parallelism[0]: must be a valid integer, got 1.0"]


@pytest.mark.parametrize(
    ("value", "refused"),
    [  # each tried with fio 3.33 (here) and fio 3.36 (built from its tag): str_rw_cb
        ("read:4k", {}),
        ("read:-4k", {}),  # a sequential mode's postfix is a number, either sign ...
        ("read:4abc", {}),  # ... read up to what is not one (str_to_decimal)
        ("read:1.5k", {}),
        ("read:10%", {}),
        ("read:abc", {r: "'abc' after ':' is not a number (fio" for r in ("3.28", "3.33", "3.36")}),
        ("read:", {r: "'' after ':' is not a number" for r in ("3.28", "3.33", "3.36")}),
        (
            "read:(4*1024)",
            {r: "'(4*1024)' after ':' is not a number" for r in ("3.28", "3.33", "3.36")},
        ),
        ("randread: 8", {}),
        ("randread:1.5", {}),
        # a random mode's is a number of I/Os, checked from fio 3.36 on
        ("randread:abc", {"3.36": "'abc' after ':' is not a number of I/Os (fio 3.36 fails"}),
        ("randread:(4)", {"3.36": "'(4)' after ':' is not a number of I/Os"}),
        ("randrw:0", {"3.36": "'0' after ':' is out of range"}),
        ("randread:4294967296", {"3.36": "'4294967296' after ':' is out of range"}),
    ],
)
def test_the_number_after_an_rw_mode_is_read_as_each_fio_reads_it(
    tmp_path: Path, value: str, refused: dict[str, str]
) -> None:
    path = _write(tmp_path, "rw", f"[a]\nsize=1m\nrw={value}\n")
    for release in ("3.28", "3.33", "3.36"):
        found = [p.message for p in fioopts.check_job_file(path, {}, release)]
        if release not in refused:
            assert found == [], (release, found)
        else:
            [message] = found
            assert message.startswith(f"rw={value}: {refused[release]}"), (release, message)


@pytest.mark.parametrize(
    ("value", "refused"),
    [
        ("1000000usecs", False),  # fio takes any unit starting with us or ms (parse.c)
        ("1000msecs", False),
        ("1000000usx", False),  # any letters after us (a review ran it: 1 s)
        ("5S", False),  # case-blind
        ("5min", True),  # fio reads only s, m, h, d whole: 5 microseconds, not as written
        ("5sec", True),
        ("10x", True),
    ],
)
def test_a_time_is_taken_with_the_units_fio_reads_as_written(
    tmp_path: Path, value: str, refused: bool
) -> None:
    path = _write(tmp_path, "t", f"[a]\nsize=1m\ntime_based\nruntime={value}\n")
    found = [p.message for p in fioopts.check_job_file(path, {}, "3.36")]
    assert bool(found) is refused, found
