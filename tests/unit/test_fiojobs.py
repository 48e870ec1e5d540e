"""The fio job library loader: headers, parameters, command rendering."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from iofleet.plan import fiojobs
from iofleet.plan.fiojobs import (
    JobFileError,
    RawLayout,
    check_params,
    get_job,
    jobs_dir,
    list_jobs,
    load_job_file,
    raw_layout,
    render_command,
    render_job,
)
from iofleet.plan.jobtext import size_bytes

REQUIRED_JOBS = {
    "randwrite-16k-psync-16jobs",
    "randread-16k-psync-16jobs",
    "randrw-4k-80-20-qd64",
    "logging-steady-write-burst-read",
    "latency-4k-qd1-randread",
    "latency-4k-qd1-randwrite",
    "seq-read-1m-qd32",
    "seq-write-1m-qd32",
}

GOOD = """; A tiny job
; @param TARGET=.     where
; @param RUNTIME:duration=5    seconds
[global]
directory=${TARGET}
runtime=${RUNTIME}
[x]
rw=read
"""


@pytest.fixture
def library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("IOFLEET_FIO_JOBS", str(tmp_path))
    return tmp_path


def _write(directory: Path, name: str, text: str) -> Path:
    path = directory / f"{name}.fio"
    path.write_text(text, encoding="utf-8")
    return path


def _percentiles(path: Path) -> set[float]:
    match = re.search(r"^percentile_list=(\S+)$", path.read_text(), re.MULTILINE)
    assert match, f"{path.name} has no percentile_list"
    return {float(p) for p in match.group(1).split(":")}


# --- the shipped library ---------------------------------------------------------


def test_library_holds_the_required_jobs() -> None:
    assert REQUIRED_JOBS <= {j.name for j in list_jobs()}


def test_list_jobs_is_sorted_by_name() -> None:
    names = [j.name for j in list_jobs()]
    assert names == sorted(names)


def test_default_jobs_dir_is_next_to_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("IOFLEET_FIO_JOBS", raising=False)
    assert (jobs_dir() / "randrw-4k-80-20-qd64.fio").is_file()


@pytest.mark.parametrize("name", sorted(REQUIRED_JOBS))
def test_every_job_has_a_description_and_defaults(name: str) -> None:
    job = get_job(name)
    assert job.description and "\n" not in job.description
    assert job.params["TARGET"] == "."
    assert all(job.params.values())


@pytest.mark.parametrize("name", sorted(REQUIRED_JOBS))
def test_every_job_lists_the_schema_percentiles(name: str) -> None:
    assert {50, 75, 90, 98, 99, 99.9, 99.99} <= _percentiles(get_job(name).path)


@pytest.mark.parametrize("name", sorted(REQUIRED_JOBS))
def test_no_job_uses_gtod_reduce(name: str) -> None:
    assert "gtod_reduce" not in get_job(name).path.read_text()


def test_seed_000_defaults() -> None:
    job = get_job("randwrite-16k-psync-16jobs")
    text = job.path.read_text()
    assert job.params["NUM_JOBS"] == "16" and job.params["RUNTIME"] == "180"
    for line in ("ioengine=psync", "rw=randwrite", "bs=16k", "norandommap", "time_based"):
        assert re.search(rf"^{line}$", text, re.MULTILINE), line


def test_seed_002_logging_job_declares_its_parameters() -> None:
    job = get_job("logging-steady-write-burst-read")
    assert list(job.params)[:3] == ["TARGET", "RUNTIME", "SIZE"]
    assert job.params["NUM_JOBS"] == "16"
    assert job.params["BURST_START"] == "25" and job.params["BURST_RUNTIME"] == "5"


def test_to_dict_is_json_ready() -> None:
    d = get_job("seq-read-1m-qd32").to_dict()
    assert d["name"] == "seq-read-1m-qd32"
    assert isinstance(d["path"], str)
    assert d["params"]["IO_DEPTH"] == "32"


def test_get_job_unknown_raises_key_error() -> None:
    with pytest.raises(KeyError):
        get_job("no-such-job")


def test_get_job_refuses_path_tricks() -> None:
    with pytest.raises(KeyError):
        get_job("../fio-jobs/seq-read-1m-qd32")


# --- loader validation ---------------------------------------------------------


def test_params_keep_declaration_order_and_help(library: Path) -> None:
    job = load_job_file(_write(library, "tiny", GOOD))
    assert job.params == {"TARGET": ".", "RUNTIME": "5"}
    assert list(job.params) == ["TARGET", "RUNTIME"]
    assert job.param_help["RUNTIME"] == "seconds"
    assert job.description == "A tiny job"


def test_missing_description_is_rejected(library: Path) -> None:
    with pytest.raises(JobFileError, match="line 1"):
        load_job_file(_write(library, "x", GOOD.replace("; A tiny job\n", "")))


def test_undeclared_variable_is_rejected(library: Path) -> None:
    text = GOOD + "size=${SIZE}\n"
    with pytest.raises(JobFileError, match=r"\$\{SIZE\}"):
        load_job_file(_write(library, "x", text))


def test_unused_parameter_is_rejected(library: Path) -> None:
    text = GOOD.replace("[global]", "; @param SIZE:size=1g  unused\n[global]")
    with pytest.raises(JobFileError, match="SIZE is declared but never used"):
        load_job_file(_write(library, "x", text))


def test_gtod_reduce_is_rejected(library: Path) -> None:
    with pytest.raises(JobFileError, match="gtod_reduce"):
        load_job_file(_write(library, "x", GOOD + "gtod_reduce=1\n"))


def test_filename_option_is_rejected(library: Path) -> None:
    with pytest.raises(JobFileError, match="filename"):
        load_job_file(_write(library, "x", GOOD + "filename=/dev/sdb\n"))


def test_directory_target_is_required(library: Path) -> None:
    text = GOOD.replace("directory=${TARGET}", "directory=/tmp\nsize=${TARGET}")
    with pytest.raises(JobFileError, match=r"directory=\$\{TARGET\}"):
        load_job_file(_write(library, "x", text))


def test_lower_case_parameter_is_rejected(library: Path) -> None:
    text = GOOD.replace("RUNTIME", "runtime_s")
    with pytest.raises(JobFileError, match="UPPER_CASE"):
        load_job_file(_write(library, "x", text))


def test_malformed_param_line_is_rejected(library: Path) -> None:
    text = GOOD.replace("; @param RUNTIME:duration=5    seconds", "; @param RUNTIME")
    with pytest.raises(JobFileError, match="@param NAME=default"):
        load_job_file(_write(library, "x", text))


def test_loader_errors_are_one_line(library: Path) -> None:
    with pytest.raises(JobFileError) as info:
        load_job_file(_write(library, "x", GOOD + "size=${SIZE}\n"))
    assert "\n" not in str(info.value)


def test_jobs_dir_override(library: Path) -> None:
    _write(library, "b-job", GOOD)
    _write(library, "a-job", GOOD)
    assert [j.name for j in list_jobs()] == ["a-job", "b-job"]


# --- check_params ------------------------------------------------------------


def test_check_params_accepts_known_keys_case_insensitively() -> None:
    assert check_params("randrw-4k-80-20-qd64", {"runtime": 1, "Size": "8m"}) == []


def test_check_params_names_the_known_parameters() -> None:
    problems = check_params("latency-4k-qd1-randread", {"FOO": "1"})
    assert problems == ["unknown parameter FOO (known: RUNTIME, SIZE, DIRECT)"]


def test_check_params_rejects_non_token_values() -> None:
    problems = check_params("seq-read-1m-qd32", {"SIZE": "1g; rm -rf /"})
    assert problems == [
        "parameter SIZE: must be a size (bytes, or with fio's units k m g t p) from 1 to 64t, "
        "got '1g; rm -rf /'"
    ]


def test_check_params_rejects_target() -> None:
    problems = check_params("seq-read-1m-qd32", {"target": "/mnt"})
    assert len(problems) == 1 and "TARGET" in problems[0]


def test_check_params_rejects_non_scalar_values() -> None:
    problems = check_params("seq-read-1m-qd32", {"SIZE": ["1g"], "RUNTIME": True})
    assert len(problems) == 2


def test_check_params_unknown_job_is_a_problem() -> None:
    problems = check_params("nope", {})
    assert len(problems) == 1 and problems[0].startswith("unknown fio job 'nope' (known: ")


# --- render_command ----------------------------------------------------------


def test_render_command_argv_reads_the_job_from_stdin() -> None:
    argv, _ = render_command("seq-write-1m-qd32", {}, "/mnt/data")
    assert argv == ["fio", "--output-format=json+", "-"]


def test_render_command_puts_params_over_defaults_into_the_job_text() -> None:
    job = get_job("seq-write-1m-qd32")
    _, text = render_command("seq-write-1m-qd32", {"runtime": 2, "IO_DEPTH": "4"}, "/mnt/data")
    expected = job.path.read_text()
    for name, value in {
        "TARGET": "/mnt/data",
        "RUNTIME": "2",
        "SIZE": "4g",
        "IO_DEPTH": "4",
    }.items():
        expected = expected.replace("${" + name + "}", value)
    expected = expected.replace("${NUM_JOBS}", "1").replace("${DIRECT}", "1")
    assert text == expected
    assert "${" not in "".join(ln for ln in text.splitlines() if not ln.startswith(";"))


def test_render_job_keeps_comments_and_lines_as_fio_reads_them(library: Path) -> None:
    # a comment's ${VAR} fio never reads stays; a '\r' before '\n' goes (fio strips it)
    text = (
        "; d ${NOT_A_PARAM}\r\n; @param TARGET=.  t\n; @param BS:size=4k  b\n[j]\r\n"
        "directory=${TARGET}\nbs=${BS} ; ${ALSO_NOT}\nrw=write\nsize=1m"
    )
    job = load_job_file(_write(library, "r", text))
    assert render_job(job, {"TARGET": "/t", "BS": "8k"}) == (
        "; d ${NOT_A_PARAM}\n; @param TARGET=.  t\n; @param BS:size=4k  b\n[j]\n"
        "directory=/t\nbs=8k ; ${ALSO_NOT}\nrw=write\nsize=1m\n"
    )


def test_render_job_leaves_a_section_header_as_fio_reads_it(library: Path) -> None:
    # fio puts variables into options only: filled in, a ${TARGET} from the 255th character
    # on would change the name fio reads (a helper's audit: with 253 A's it ended in '/';
    # such a name, holding '$' where the loader cuts it, is refused now)
    header = "[" + "A" * 254 + "${TARGET}]"
    text = f"; d\n; @param TARGET=.  t\n[global]\ndirectory=${{TARGET}}\n{header}\nsize=4k\n"
    job = load_job_file(_write(library, "hdr", text))
    rendered = render_job(job, {"TARGET": "/t"})
    assert f"\ndirectory=/t\n{header}\nsize=4k\n" in rendered


@pytest.mark.parametrize(
    "line",
    [
        'write_iolog=print "/tmp/outside/iolog", $ncpus*0',  # bc prints the path
        'filename_format=print "../../victim", $pagesize-4096',
        "numjobs=$ncpus/2",
        "size=$mb_memory+1",
        "name=a$ncpus${SIZE}",  # a value may hold '/', '+' or '-'
    ],
)
def test_a_host_keyword_with_arithmetic_is_refused_fio_would_run_bc(
    library: Path, line: str
) -> None:
    # fio hands such a value to `sh -c "echo ... | bc"` and takes what bc prints: a path
    # option became any path after every check (a helper's audit, docs/decisions.md #92)
    text = GOOD.replace("; @param TARGET=.", "; @param TARGET=.\n; @param SIZE:size=1m  s")
    with pytest.raises(JobFileError, match=r"makes fio run bc \(a program, as root\)"):
        load_job_file(_write(library, "x", text + "size=${SIZE}\n" + line + "\n"))


@pytest.mark.parametrize(
    "header",
    [
        "[.$clientuid.]",  # $jobname in filename_format, then $clientuid: '..'
        "[" + "A" * 253 + "${TARGET}]",  # the name fio reads ends in '$'
        "[a$b]",
    ],
)
def test_a_section_named_with_a_dollar_is_refused(library: Path, header: str) -> None:
    text = f"; d\n; @param TARGET=.  t\n[global]\ndirectory=${{TARGET}}\n{header}\nsize=4k\n"
    with pytest.raises(JobFileError, match=r"a job name without '/' or '\$'"):
        load_job_file(_write(library, "x", text))


def test_a_host_keyword_alone_is_left_to_the_plan(library: Path) -> None:
    # a keyword alone is only the host's number: the loader takes it (the plan refuses it
    # in the options it needs: reading_problems)
    load_job_file(_write(library, "x", GOOD + "iodepth=$ncpus\n"))


def test_render_job_refuses_a_line_its_values_make_too_long(library: Path) -> None:
    text = "; d\n; @param TARGET=.  t\n[j]\ndirectory=${TARGET}\nrw=write\nsize=1m\n"
    job = load_job_file(_write(library, "long", text))
    with pytest.raises(ValueError, match=r"fio job long:4: a line of over 4096 bytes.* once its"):
        render_job(job, {"TARGET": "/" + "d" * 4090})


def test_render_command_floats_are_rendered_as_checked() -> None:
    # a whole float is checked as the integer fio reads ("4"), and put in as such
    _, text = render_command("seq-write-1m-qd32", {"IO_DEPTH": 4.0}, "/mnt/data")
    assert "iodepth=4\n" in text


def test_render_command_device_and_regions_go_before_the_job_file() -> None:
    argv, text = render_command(
        "randwrite-16k-psync-16jobs",
        {},
        "/tmp/scratch",
        device="/dev/nvme1n1",
        device_bytes=1 << 40,
    )
    # absolute: fio resolves --filename before it reads the job file's directory=
    assert argv[2:] == ["--filename=/dev/nvme1n1", f"--offset_increment={1 << 30}", "-"]
    assert "directory=/tmp/scratch\n" in text


@pytest.mark.parametrize("device", ["nvme1n1", "/dev/a b", "/dev/../etc/x", "/dev/a:b", ""])
def test_render_command_rejects_bad_device(device: str) -> None:
    with pytest.raises(ValueError, match="device"):
        render_command("seq-read-1m-qd32", {}, "/tmp/s", device=device, device_bytes=1 << 40)


def test_render_command_refuses_regions_beyond_the_device() -> None:
    # 16 job processes x 1 GiB do not fit on 8 GiB: fio would silently idle the last 8
    with pytest.raises(ValueError) as info:
        render_command(
            "randwrite-16k-psync-16jobs", {}, "/tmp/s", device="/dev/sdz", device_bytes=8 << 30
        )
    assert str(info.value) == (
        "fio job randwrite-16k-psync-16jobs on /dev/sdz: needs 16384 MiB of the device "
        "(16 job processes x 1024 MiB, one region each) but it has 8192 MiB; "
        "lower SIZE or NUM_JOBS"
    )


def test_raw_layout_of_a_multi_section_file_takes_the_largest_section() -> None:
    job = get_job("logging-steady-write-burst-read")
    env = {**job.params, "SIZE": "8m", "NUM_JOBS": "3"}
    assert raw_layout(job, env, 1 << 30) == RawLayout(8 << 20, 3, 24 << 20)


@pytest.mark.parametrize(
    ("size", "block", "region"),
    [
        ("4000000", 512, 4001792),  # rounded up to whole 4 KiB blocks
        ("4000000", 4096, 4001792),
        ("4000000", 65536, 4063232),  # a device with larger logical blocks
        ("4m", 4096, 4 << 20),  # already whole: unchanged
    ],
)
def test_raw_layout_starts_every_region_on_a_whole_block(
    size: str, block: int, region: int
) -> None:
    job = get_job("randwrite-16k-psync-16jobs")
    env = {**job.params, "SIZE": size, "NUM_JOBS": "2"}
    layout = raw_layout(job, env, 1 << 30, block)
    assert (layout.region_bytes, layout.needed_bytes) == (region, region + size_bytes(size))


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("offset=1g", "sets offset"),
        ("offset_increment=4k", "sets offset_increment"),
        ("nrfiles=4", "sets nrfiles"),
        ("nr_files=4", "sets nrfiles"),  # an alias is the option it names
    ],
)
def test_raw_layout_refuses_options_that_move_io_off_the_region(
    library: Path, line: str, problem: str
) -> None:
    (library / "other.inc").write_text("offset=1g\n", encoding="utf-8")
    job = load_job_file(_write(library, "x", GOOD + line + "\n"))
    with pytest.raises(ValueError, match=problem):
        raw_layout(job, {**job.params, "TARGET": "/tmp"}, 1 << 40)


def test_raw_layout_needs_a_size(library: Path) -> None:
    text = "; d\n; @param TARGET=.  t\n[global]\ndirectory=${TARGET}\n[j]\nrw=write\n"
    job = load_job_file(_write(library, "nosize", text))
    with pytest.raises(ValueError, match=r"\[j\] has no size"):
        raw_layout(job, {"TARGET": "/tmp"}, 1 << 40)


@pytest.mark.parametrize("target", ["/mnt/a:b", "/mnt/with space", ""])
def test_render_command_rejects_bad_target(target: str) -> None:
    with pytest.raises(ValueError, match="target directory"):
        render_command("seq-read-1m-qd32", {}, target)


def test_render_command_bad_params_is_a_one_line_value_error() -> None:
    with pytest.raises(ValueError) as info:
        render_command("seq-read-1m-qd32", {"SIZE": "$(reboot)"}, "/mnt")
    message = str(info.value)
    assert "\n" not in message and message.startswith("fio job seq-read-1m-qd32: ")


def test_render_command_unknown_job_raises_key_error() -> None:
    with pytest.raises(KeyError):
        render_command("nope", {}, "/mnt")


def test_module_is_stdlib_only() -> None:
    source = Path(fiojobs.__file__).read_text()
    imports = re.findall(r"^(?:from|import) (\S+)", source, re.MULTILINE)
    assert {i.split(".")[0] for i in imports} <= {
        "__future__",
        "math",
        "os",
        "re",
        "collections",
        "dataclasses",
        "pathlib",
        "iofleet",
    }


def test_raw_seed_matrices_fit_their_volumes() -> None:
    # every fio workload of an example with a raw EBS target fits on that volume's size
    examples = Path(fiojobs.__file__).resolve().parents[2] / "examples"
    checked = 0
    for path in sorted(examples.glob("*.json")):
        doc = json.loads(path.read_text())
        raw_sizes = [
            s["size_gib"] << 30 for s in doc.get("storage", []) if s.get("filesystem") == "raw"
        ]
        for size in raw_sizes:
            for w in doc.get("workloads", []):
                if "fio" in w:
                    argv, _ = render_command(
                        w["fio"], w.get("params", {}), "/tmp/s", device="/dev/x", device_bytes=size
                    )
                    assert argv[2] == "--filename=/dev/x"
                    checked += 1
    assert checked >= 2  # seed 002: io2 and gp2, 8 GiB each


# --- typed parameters (; @param NAME:TYPE=default) ----------------------------------


def test_every_library_parameter_but_target_declares_a_type() -> None:
    for job in list_jobs():
        assert set(job.param_types) == set(job.params) - {"TARGET"}, job.name


def test_untyped_parameter_is_rejected(library: Path) -> None:
    text = GOOD.replace("RUNTIME:duration=5", "RUNTIME=5")
    with pytest.raises(JobFileError, match="parameter RUNTIME needs a type"):
        load_job_file(_write(library, "x", text))


def test_unknown_type_is_rejected(library: Path) -> None:
    text = GOOD.replace("RUNTIME:duration=5", "RUNTIME:seconds=5")
    with pytest.raises(JobFileError, match="unknown type 'seconds'"):
        load_job_file(_write(library, "x", text))


def test_default_outside_its_type_is_rejected(library: Path) -> None:
    text = GOOD.replace("RUNTIME:duration=5", "RUNTIME:duration(10..)=5")
    with pytest.raises(JobFileError, match="default of RUNTIME must be a duration"):
        load_job_file(_write(library, "x", text))


def test_declared_range_narrows_the_type(library: Path) -> None:
    _write(library, "x", GOOD.replace("RUNTIME:duration=5", "RUNTIME:duration(2..60)=5"))
    assert check_params("x", {"RUNTIME": "1m"}) == []
    assert check_params("x", {"RUNTIME": 61}) == [
        "parameter RUNTIME: must be a duration (seconds, or with fio's units us ms s m h d) "
        "from 2s to 1m, got '61'"
    ]


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("SIZE", "4096"),
        ("SIZE", "4k"),
        ("SIZE", "256M"),
        ("SIZE", "1g"),
        ("SIZE", "1GiB"),
        ("SIZE", "4kib"),
        ("SIZE", "2tb"),
        ("SIZE", "64t"),
        ("RUNTIME", 90),
        ("RUNTIME", 90.0),
        ("RUNTIME", "1500ms"),
        ("RUNTIME", "30s"),
        ("RUNTIME", "5m"),
        ("RUNTIME", "2h"),
        ("RUNTIME", "7d"),
        ("NUM_JOBS", 1024),
        ("IO_DEPTH", "1"),
        ("DIRECT", 0),
        ("READ_RATE", "16m"),
        ("BURST_START", 0),
    ],
)
def test_values_fio_takes_are_accepted(key: str, value: object) -> None:
    assert check_params("logging-steady-write-burst-read", {key: value}) == []


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("NUM_JOBS", 0),
        ("NUM_JOBS", 1025),
        ("NUM_JOBS", -1),
        ("NUM_JOBS", 2.5),
        ("NUM_JOBS", float("nan")),
        ("IO_DEPTH", "1e3"),
        ("RUNTIME", -60),
        ("RUNTIME", 0),
        ("RUNTIME", "nan"),
        ("RUNTIME", "inf"),
        ("RUNTIME", float("inf")),
        ("RUNTIME", "999ms"),
        ("RUNTIME", "8d"),
        ("RUNTIME", "60\n"),
        ("SIZE", "../../etc"),
        ("SIZE", "/dev/sda"),
        ("SIZE", "0"),
        ("SIZE", "65t"),
        ("SIZE", "1x"),
        ("SIZE", "1.5g"),
        ("DIRECT", 2),
        ("DIRECT", "true"),
        ("READ_RATE", "0"),
        ("BURST_START", -1),
    ],
)
def test_values_fio_cannot_run_are_refused(key: str, value: object) -> None:
    problems = check_params("logging-steady-write-burst-read", {key: value})
    assert len(problems) == 1 and problems[0].startswith(f"parameter {key}: must be")


def test_render_command_refuses_a_value_outside_its_type() -> None:
    with pytest.raises(ValueError, match="parameter NUM_JOBS: must be an integer from 1"):
        render_command("seq-read-1m-qd32", {"NUM_JOBS": "0"}, "/mnt/data")


def test_name_rules_are_full_string_matches() -> None:
    # Python's `$` matches before a trailing newline; the rules must not
    with pytest.raises(ValueError, match="target directory"):
        render_command("seq-read-1m-qd32", {}, "/mnt/data\n")


@pytest.mark.parametrize(
    "line",
    [
        "directory = ${TARGET}",  # fio keeps the blank: a directory " /mnt/..." (relative)
        "directory=${TARGET}/sub",
        "directory=/tmp",
    ],
)
def test_directory_must_be_the_target_as_fio_reads_it(library: Path, line: str) -> None:
    text = GOOD.replace("directory=${TARGET}", line)
    with pytest.raises(JobFileError, match=r"use directory=\$\{TARGET\}"):
        load_job_file(_write(library, "x", text))


@pytest.mark.parametrize(
    "line",
    [
        "gtod_reduce=1",
        "gtod_reduce = 1",
        "filename = /dev/sda",
        "filename=/dev/sda ; a comment",
    ],
)
def test_refused_options_are_found_however_fio_spells_them(library: Path, line: str) -> None:
    with pytest.raises(JobFileError, match="gtod_reduce|never filename"):
        load_job_file(_write(library, "x", GOOD + line + "\n"))


def test_an_include_beside_the_job_is_put_into_the_text_fio_reads(library: Path) -> None:
    # fio would look for more.inc in the slot's target first (docs/decisions.md #86, #89):
    # its lines go into the job text in the include line's place, nested ones too
    (library / "more.inc").write_text("norandommap\ninclude most.inc\n", encoding="utf-8")
    (library / "most.inc").write_text("bs=${BS} ; b\r\n", encoding="utf-8")
    text = GOOD.replace("; @param TARGET=.", "; @param TARGET=.\n; @param BS:size=4k  b")
    job = load_job_file(_write(library, "x", text + "include more.inc\nrw=write\n"))
    rendered = render_job(job, {"TARGET": "/t", "BS": "8k"})
    assert rendered.endswith("\nnorandommap\nbs=8k ; b\nrw=write\n")
    assert "include" not in rendered


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("include /etc/passwd", "include '/etc/passwd': must name a file beside the job file"),
        ("include ../x.inc", "include '../x.inc': must name a file beside the job file"),
        ("include .hidden", "include '.hidden': must name a file beside the job file"),
        ("include  more.inc", "include ' more.inc': must name a file beside the job file"),
        ("include gone.inc", "include 'gone.inc': no such regular file beside the job file"),
        ("include fifo.inc", "include 'fifo.inc': no such regular file beside the job file"),
        ("include sub", "include 'sub': no such regular file beside the job file"),
        ("include link.inc", "include 'link.inc': a link: the included file must be a regular"),
        ("include bad.inc", "bad.inc:1: ioengine='exec' is not an engine iofleet runs"),
        ("include sec.inc", "sec.inc:1: no new sections in included files"),
    ],
)
def test_an_include_not_beside_the_job_or_refused_inside_is_refused(
    library: Path, line: str, why: str
) -> None:
    import os

    os.mkfifo(library / "fifo.inc")  # read, it would never end
    (library / "sub").mkdir()
    (library / "link.inc").symlink_to(library / "bad.inc")
    (library / "bad.inc").write_text("ioengine=exec\n")
    (library / "sec.inc").write_text("[y]\n")
    with pytest.raises(JobFileError) as caught:
        load_job_file(_write(library, "x", GOOD + line + "\n"))
    assert why in str(caught.value), caught.value


def test_an_option_only_in_a_comment_is_not_an_option(library: Path) -> None:
    # fio cuts a line at ';' or '#': the words after it are not read
    job = load_job_file(_write(library, "x", GOOD + "rw=read ; gtod_reduce=1 filename=x\n"))
    assert job.name == "x"


@pytest.mark.parametrize(
    "line",
    [
        "filename_format=../../../../escape.$jobnum",
        "filename_format=/var/tmp/x.$jobnum",
        "filename_format=a/../../x",
        "write_bw_log=/root/bw",
        "write_lat_log=../lat",
        "write_iolog=/etc/iolog",
        "read_iolog=../../trace",
        "opendir=/home",
        "verify_state_save=../state",
        "write_iops_log=${RUNTIME}",
        "replay_redirect=/dev/sdb",
        "exec_prerun=rm -rf /",
        "exec_postrun=touch /x",
    ],
)
def test_options_reaching_outside_the_target_are_rejected(library: Path, line: str) -> None:
    # given a custom job with an option whose path (or command) leaves the slot's target
    key = line.split("=")[0]
    # then it is refused when the library is read, naming the line and the option
    with pytest.raises(JobFileError, match=rf"x\.fio:\d+: {key}"):
        load_job_file(_write(library, "x", GOOD + line + "\n"))


@pytest.mark.parametrize(
    "line",
    ["filename_format=data.$jobnum.$filenum", "write_bw_log=logs/bw", "write_lat_log", "opendir=d"],
)
def test_paths_below_the_target_are_accepted(library: Path, line: str) -> None:
    load_job_file(_write(library, "x", GOOD + line + "\n"))


def test_a_job_file_whose_name_no_matrix_can_give_is_named_with_the_rule(library: Path) -> None:
    # given a library with a good job, and one whose file name has a space
    _write(library, "good", GOOD)
    _write(library, "sp ace", GOOD)
    # then a matrix naming it learns why, and the known jobs do not list it
    [problem] = check_params("sp ace", {})
    assert problem.startswith("fio job 'sp ace': a job's name (its file name without .fio) is")
    assert problem.endswith("(known: good)")
    # and listing the library names the file (before, it was listed, then refused as unknown)
    with pytest.raises(JobFileError, match=r"sp ace\.fio: a job's name"):
        fiojobs.list_jobs()


# --- what fio refuses as the job starts, seen at plan (docs/decisions.md #85) -----------

_HEAD = "; d\n; @param TARGET=.\n[global]\ndirectory=${TARGET}\nioengine=psync\n"


# (job body, raw devices only, why); tests/integration/test_fio_refusals_real.py runs
# each through the real fio, where each fails
REFUSED_BODIES = [
    ("[x]\nsize=1m\nnumjobs=0\n", False, "numjobs=0: numjobs=0 runs no job"),
    (
        "[x]\nsize=1m\nrw=randwrite\nrate=1m\nrate_iops=100\n",
        False,
        "rate_iops=100: rate and rate_iops together",
    ),
    (  # fio refuses them even in different directions
        "[x]\nsize=1m\nrw=randrw\nrate=1m,\nrate_iops=,100\n",
        False,
        "rate_iops=,100: rate and rate_iops together",
    ),
    (
        "[x]\nsize=1m\nrw=randrw\nrate_min=1k\nrate_iops_min=1\n",
        False,
        "rate_iops_min=1: rate_min and rate_iops_min together",
    ),
    ("[x]\nsize=1m\nrw=randtrim\n", False, "rw=randtrim: trims are for raw devices"),
    (  # the value fio 3.28 lacks: said, whichever fio runs (the option table says it too)
        "[x]\nsize=1m\nrw=randtrimwrite\n",
        False,
        "(error 25) (and fio 3.28, Ubuntu 22.04's, has no randtrimwrite)",
    ),
    ("[x]\nsize=1m\nzonemode=zbd\n", False, "zonemode=zbd: zonemode=zbd is for zoned"),
    ("[x]\nsize=1m\ndirect=1\nbs=1000\n", False, "bs=1000: direct I/O of 1000 bytes"),
    ("[x]\nsize=1m\nrw=rw\ndirect=1\nbs=4k,1100\n", False, "bs=4k,1100: direct I/O of 1100 bytes"),
    ("[x]\nrw=read\n", False, "[x]: no size= or filesize="),
    # fio checks wait_for as it adds each job, after --parse-only has stopped
    (
        "[a]\nsize=64k\nrw=write\nwait_for=b\n[b]\nsize=64k\n",
        False,
        "wait_for=b: no job named 'b' before this one",
    ),
    ("[a]\nsize=64k\nwait_for=a\n", False, "a job cannot wait for itself"),
    ("[global]\nwait_for=a\n[a]\nsize=64k\n[b]\nsize=64k\n", False, "cannot wait for itself"),
    (
        "[a]\nsize=64k\n[a]\nsize=64k\n[c]\nsize=64k\nwait_for=a\n",
        False,
        "2 jobs are named 'a'",
    ),
    # O_DIRECT needs the start in the file and the buffer in memory aligned too
    (
        "[x]\nsize=1m\nrw=randwrite\ndirect=1\noffset=1\n",
        False,
        "offset=1: direct I/O with an I/O starting at 1 bytes",
    ),
    (
        "[x]\nsize=1m\nrw=randwrite\ndirect=1\nmem_align=1\n",
        False,
        "mem_align=1: direct I/O with I/O buffers starting 1 bytes",
    ),
    (
        "[x]\nsize=1m\nrw=randwrite\ndirect=1\nnumjobs=2\noffset_increment=100\n",
        False,
        "offset_increment=100: direct I/O with a clone's I/O starting 100 bytes",
    ),
    ("[x]\nsize=1m\nrw=randread\ndirect=1\npre_read=1\n", False, "pre_read=1: pre_read reads"),
    (
        "[x]\nsize=1m\nrw=randwrite\nioengine=io_uring\niodepth=32769\n",
        False,
        "iodepth=32769: io_uring takes at most 32,768 entries",
    ),
    # with filesize=, I/O from the offset on must hold a block
    ("[x]\nrw=randread\nfilesize=1m\noffset=1m\n", False, "less than a block (4096 bytes)"),
    ("[x]\nrw=randread\nfilesize=1m\noffset=2m\n", False, "I/O starts at 2097152"),
    # fio names the files SECTION.0.0: 252 + 4 bytes is past a file name's 255, whatever
    # name= says
    ("[" + "n" * 252 + "]\nsize=64k\n", False, "more than the 255 a file name may have"),
    ("[" + "n" * 252 + "]\nname=short\nsize=64k\n", False, "more than the 255 a file"),
    # buffered=0 is direct=1
    (
        "[x]\nsize=1m\nrw=randwrite\nbuffered=0\noffset=100\n",
        False,
        "offset=100: direct I/O with an I/O starting at 100 bytes",
    ),
    # fio sets up at most 4,088 job processes per file, all groups at once (it fails
    # before starting any: cheap to run for real)
    ("[x]\nsize=4k\nnumjobs=4089\n", False, "numjobs=4089: the job file's sections run 4,089"),
    (
        "[a]\nsize=4k\nnumjobs=2048\n[b]\nstonewall\nsize=4k\nnumjobs=2041\n",
        False,
        "numjobs=2041: the job file's sections run 4,089 job processes",
    ),
    # fio's fixup_options, an audit's findings on fio 3.36 and 3.28 (and 3.33 here)
    ("[x]\nsize=1m\nrate=1m\nrate_min=2m\n", False, "rate_min=2m: rate_min above rate"),
    (
        "[x]\nsize=1m\nrw=randwrite\nrate_iops=,100\nrate_iops_min=,200\n",
        False,
        "rate_iops_min=,200: rate_iops_min above rate_iops",
    ),
    ("[x]\nsize=1m\nzonesize=256k\n", False, "zonesize=256k: zonesize without zonemode"),
    ("[x]\nsize=1m\nzonemode=strided\n", False, "zonemode=strided: zonemode=strided needs"),
    (
        "[x]\nsize=1m\nrw=write\nioengine=mmap\nfile_append=1\n",
        False,
        "file_append=1: file_append with ioengine=mmap",
    ),
    (
        "[x]\nsize=1m\nnrfiles=2\nblock_error_percentiles=1\n",
        False,
        "block_error_percentiles=1: block_error_percentiles with more than one file",
    ),
    ("[x]\nsize=1m\ncpumask=0\n", False, "cpumask=0: cpumask=0 names no CPU"),
    (
        "[global]\ngroup_reporting\nsize=64k\n[a]\nlat_percentiles=1\n[b]\nlat_percentiles=0\n",
        False,
        "lat_percentiles=0: job 'b' and job 'a' of one group_reporting group differ",
    ),
    (
        "[x]\nsize=1m\ncontinue_on_error=all\nignore_error=EFOO\n",
        False,
        "ignore_error=EFOO: 'EFOO' is not an error fio knows",
    ),
    ("[x]\nsize=1m\nignore_error=EIO,EIO,EIO,EIO\n", False, "more than three error lists"),
    ("[x]\nsize=1m\nignore_error=,abc\n", False, "'abc' is not an error fio knows"),
    # atoi cuts it to a 32-bit int: 0 (a review's finding)
    ("[x]\nsize=1m\nignore_error=EIO:4294967296\n", False, "'4294967296' is not an error"),
    # disable_lat turns lat_percentiles off before fio compares the group (init.c)
    (
        "[a]\nsize=64k\nlat_percentiles=1\ndisable_lat=1\n"
        "[b]\nsize=64k\nlat_percentiles=1\ngroup_reporting\n",
        False,
        "lat_percentiles=1: job 'b' and job 'a' of one group_reporting group differ",
    ),
    # an empty CPU set however written, and a negative I/O priority (error 22)
    ("[x]\nsize=1m\ncpumask=0k\n", False, "cpumask=0k: cpumask=0 names no CPU"),
    ("[x]\nsize=1m\ncpus_allowed=\n", False, "an empty cpus_allowed names no CPU"),
    ("[x]\nsize=1m\nprio=-1\n", False, "prio=-1: a negative prio"),
    ("[x]\nsize=1m\nprioclass=-1\n", False, "prioclass=-1: a negative prioclass"),
    (  # only the later job's own group_reporting counts (fio checks it as it adds b)
        "[a]\nsize=64k\nlat_percentiles=1\n[b]\nsize=64k\ngroup_reporting\n",
        False,
        "lat_percentiles=1: job 'b' and job 'a' of one group_reporting group differ",
    ),
]


@pytest.mark.parametrize(("body", "raw_only", "why"), REFUSED_BODIES)
def test_what_fio_refuses_as_a_job_starts_is_a_plan_problem(
    library: Path, body: str, raw_only: bool, why: str
) -> None:
    _write(library, "j", _HEAD + body)
    [(where, message)] = fiojobs.reading_problems("j", {}, raw_only)
    assert where == "fio"
    assert why in message, message


# and look-alikes fio runs (the real-fio test runs them too)
ACCEPTED_BODIES = [
    "[a]\nsize=64k\nrw=write\n[b]\nsize=64k\nrw=read\nwait_for=a\n",
    "[a]\nname=zed\nsize=64k\n[b]\nsize=64k\nwait_for=zed\n",  # by its name=
    "[x]\nsize=1m\nrate=1m\nrate_iops_min=1\n",  # a cap in bytes/s, a floor in IOPS
    "[x]\nsize=1m\ndirect=1\nbs=4k,1m\n",
    "[x]\nsize=1m\nrw=read\ndirect=1\nbs=4k,1100\n",  # reads only: 1100 is never used
    "[x]\nsize=1m\ndirect=0\nbs=1000\n",  # buffered: any size
    "[x]\nfilesize=1m\n",
    "[x]\nsize=1m\nzonemode=strided\nzonesize=256k\nzonerange=512k\n",  # files: fine
    "[x]\nsize=1m\nnumjobs=2\n",
    "[x]\nsize=1m\nrw=randwrite\ndirect=1\noffset=512\nmem_align=4096\n",
    "[x]\nsize=1m\nrw=randread\ndirect=0\npre_read=1\n",  # buffered: fio reads ahead
    "[" + "n" * 251 + "]\nsize=64k\n",  # 255 bytes with .0.0
    "[x]\nrw=randread\nfilesize=1m\noffset=1020k\n",  # one block left
    "[x]\nrw=read\nfilesize=1m\noffset=512k\nbs=4k,1m\n",  # fio: the smallest block
    "[a]\nname=" + "n" * 260 + "\nrw=write\nsize=64k\n",  # files named after [a]
    "[x]\nsize=1m\nrw=randwrite\ndirect=1\noffset_increment=100\n",  # one clone
    "[x]\nsize=1m\nrw=randwrite\nioengine=mmap\ndirect=1\noffset=100\nmem_align=100\n",
    "[x]\nsize=1m\nrw=randread\ndirect=1\nbuffered=1\noffset=100\npre_read=1\n",
    "[x]\nsize=1m\nrate=2m\nrate_min=1m\n",
    "[x]\nsize=1m\nrw=randwrite\nrate_iops=100,200\nrate_iops_min=,150\n",  # per direction
    "[x]\nsize=1m\nzonemode=strided\nzonesize=256k\n",
    "[x]\nsize=1m\nrw=write\nfile_append=1\n",  # psync extends the file
    "[x]\nsize=1m\nrw=write\nblock_error_percentiles=1\n",
    "[x]\nsize=1m\ncpumask=1\n",
    "[x]\nsize=1m\ncontinue_on_error=all\nignore_error=EIO:ENOSPC,5,\n",
    "[x]\nsize=1m\nignore_error=4294967301\n",  # atoi: 5
    "[a]\nsize=64k\nlat_percentiles=1\ndisable_lat=1\n[b]\nsize=64k\ngroup_reporting\n",
    "[x]\nsize=1m\nprio=0\nprioclass=0\n",
    # another reporting group, the first job's group_reporting alone, or clones alike
    "[global]\ngroup_reporting\nsize=64k\n[a]\nlat_percentiles=1\n[b]\nnew_group\n",
    "[a]\nsize=64k\ngroup_reporting\nlat_percentiles=1\n[b]\nsize=64k\n",
    "[global]\ngroup_reporting\nsize=64k\n[a]\nlat_percentiles=1\nnumjobs=2\n",
]


@pytest.mark.parametrize("body", ACCEPTED_BODIES)
def test_what_fio_runs_is_not_refused(library: Path, body: str) -> None:
    _write(library, "j", _HEAD + body)
    assert fiojobs.reading_problems("j", {}) == []


def test_as_many_job_processes_as_fio_sets_up_are_not_refused(library: Path) -> None:
    # 4,088 ran through fio 3.33 here (forking that many is too much for every test run)
    _write(library, "j", _HEAD + "[a]\nsize=4k\nnumjobs=4000\n[b]\nsize=4k\nnumjobs=88\n")
    assert fiojobs.reading_problems("j", {}) == []


def test_on_raw_devices_only_trims_and_a_missing_size_are_fine(library: Path) -> None:
    # a device has a size of its own and takes trims
    _write(library, "j", _HEAD + "[x]\nrw=randtrim\n")
    assert fiojobs.reading_problems("j", {}, raw_only=True) == []
    assert len(fiojobs.reading_problems("j", {}, raw_only=False)) == 2


def test_fill_device_is_for_raw_devices_only(library: Path) -> None:
    # on a file system it writes until the file system is full: the host's disk locally
    _write(library, "j", _HEAD + "[x]\nsize=1m\nrw=write\nfill_fs=1\n")
    [(where, message)] = fiojobs.reading_problems("j", {}, raw_only=False)
    assert "fill_fs=1: fill_device writes until the file system is full" in message
    assert fiojobs.reading_problems("j", {}, raw_only=True) == []


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("ioengine=null", "ioengine='null' is not an engine iofleet runs"),
        ("ioengine=external:x.so", "ioengine='external:x.so' is not an engine iofleet runs"),
        ("mem=mmap:../x", "a file behind the I/O buffers is not allowed"),
        ("mem=mmap: /etc/x", "a file behind the I/O buffers is not allowed"),  # blank stripped
        ("iomem=mmapshared:buf", "a file behind the I/O buffers is not allowed"),
        ("gtod_cpu=1", "gtod_cpu is not allowed"),
        ("disable_clat", "disable_clat is not allowed"),
        ("clat_percentiles=0", "clat_percentiles=0 is not allowed"),
        ("create_only=1", "create_only=1 is not allowed"),
        ("create_only=${X}", "write the value out"),
        ("donorname=/etc/x", "donorname='/etc/x' must be a relative path"),
    ],
)
def test_options_that_reach_past_the_job_or_its_results_are_refused(
    library: Path, line: str, why: str
) -> None:
    params = "; @param ENGINE=psync\n; @param X:bool=0\n" if "${" in line else ""
    text = (
        f"; d\n; @param TARGET=.\n{params}[global]\ndirectory=${{TARGET}}\n{line}\n[x]\nsize=1m\n"
    )
    if "${ENGINE}" in line:
        text = text.replace("; @param ENGINE=psync\n; @param X:bool=0\n", "; @param ENGINE=psync\n")
    elif "${X}" in line:
        text = text.replace("; @param ENGINE=psync\n", "")
    path = _write(library, "j", text)
    with pytest.raises(fiojobs.JobFileError) as caught:
        fiojobs.load_job_file(path)
    assert why in str(caught.value), caught.value


@pytest.mark.parametrize(
    "line",
    ["mem=mmap", "mem=malloc", "clat_percentiles=1", "disable_slat=1", "ioengine=libaio"],
)
def test_options_that_stay_in_the_target_are_accepted(library: Path, line: str) -> None:
    text = f"; d\n; @param TARGET=.\n[global]\ndirectory=${{TARGET}}\n{line}\n[x]\nsize=1m\n"
    fiojobs.load_job_file(_write(library, "j", text))


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (  # the section comes before the [global] that sets the directory
            "[x]\nsize=1m\n[global]\ndirectory=${TARGET}\n[y]\nsize=1m\n",
            "j.fio:3: section [x] has no directory=${TARGET} in force",
        ),
        (
            "[global]\ndirectory=${TARGET}\n[x]\nsize=1m\ninclude a.inc\n",
            "j.fio:7: include 'a.inc'",
        ),
        ("[global]\ndirectory=${TARGET}\n[x]\nsize=1m\x0b\n", "j.fio:6: character '\\x0b'"),
        ("[global]\ndirectory=${TARGET}\n[x]\nsize=1m\x00ioengine=exec\n", "character '\\x00'"),
        ("[global]\ndirectory=${TARGET}\n[x]\nsize=1m\rioengine=exec\n", "character '\\r'"),
        ("[global]\ndirectory=${TARGET}\n[x]\ndescription=" + "a" * 4084 + "\n", "over 4096 bytes"),
    ],
)
def test_what_fio_would_read_otherwise_is_refused(library: Path, text: str, why: str) -> None:
    path = _write(library, "j", "; d\n; @param TARGET=.\n" + text)
    with pytest.raises(fiojobs.JobFileError) as caught:
        fiojobs.load_job_file(path)
    assert why in str(caught.value), caught.value


def test_a_line_just_inside_the_limit_and_crlf_endings_are_read() -> None:
    from iofleet.plan.jobtext import fio_lines

    line = "description=" + "a" * (4095 - 12)  # 4095 bytes and its line break
    assert fio_lines(f"[x]\r\n{line}\r\n", "j") == ["[x]", line]


@pytest.mark.parametrize(
    "name", ["LD_PRELOAD", "LD_LIBRARY_PATH", "PATH", "TMPDIR", "GCONV_PATH", "FIO_X"]
)
def test_a_parameter_may_not_be_an_environment_variable_fio_s_process_reads(
    library: Path, name: str
) -> None:
    # fio got parameters as its environment: LD_PRELOAD=1 loaded ./1/1, a file an earlier
    # workload wrote, into fio as root (docs/decisions.md #87). iofleet now puts them into
    # the job text (#88); run by hand, plain fio still reads them from its environment
    text = GOOD.replace("; @param TARGET=.", f"; @param TARGET=.\n; @param {name}:int=1")
    text += f"bs=${{{name}}}k\n"
    with pytest.raises(JobFileError, match=f"parameter {name} is an environment variable"):
        load_job_file(_write(library, "x", text))


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("buffer_pattern='/etc/shadow'", "a pattern read from a file"),
        ("verify_pattern= 'x'", "a pattern read from a file"),
        ("profile=tiobench", "profile is not allowed"),
        ("name=..", "and not only dots"),
        # a pattern is a series of pieces: a 'FILE' after the first is read as root too
        ("""buffer_pattern="A"'/etc/shadow'""", "a pattern read from a file"),
        ("verify_pattern=0x41'x'", "a pattern read from a file"),
        # fio puts the client's address in for $clientuid (any case): empty, '.$x.' is '..'
        ("filename_format=.$clientuid./.$clientuid./v", "without '..', ${...} or $clientuid"),
        ("filename_format=.$CLIENTUID./v", "without '..', ${...} or $clientuid"),
        ("name=.$clientuid.", "a job name without '/' or '$'"),
        ("name=a$jobnum", "a job name without '/' or '$'"),
        ("stats=0", "stats=0 is not allowed (fio keeps no statistics"),
    ],
)
def test_patterns_from_files_profiles_and_dot_names_are_refused(
    library: Path, line: str, why: str
) -> None:
    with pytest.raises(JobFileError, match=re.escape(why)):
        load_job_file(_write(library, "x", GOOD + line + "\n"))


def test_a_section_named_only_dots_is_refused(library: Path) -> None:
    text = GOOD + "[...]\nrw=read\n"
    with pytest.raises(JobFileError, match=r"section \[\.\.\.\]: a job name"):
        load_job_file(_write(library, "x", text))
    assert load_job_file(_write(library, "y", GOOD + "[a.b]\nrw=read\n")).name == "y"


def test_a_long_section_name_is_fine_on_raw_devices(library: Path) -> None:
    # fio is given --filename there (render_command): no file is named after the section
    _write(library, "j", _HEAD + "[" + "n" * 252 + "]\nsize=64k\n")
    assert fiojobs.reading_problems("j", {}, raw_only=True) == []
    assert len(fiojobs.reading_problems("j", {}, raw_only=False)) == 1


@pytest.mark.parametrize(
    ("lines", "limit", "refused"),
    [
        ("nrfiles=240\n", 256, False),  # fio needs a few of its own: it ran 248 of 250
        ("nrfiles=250\n", 256, True),
        ("nrfiles=1000\nopenfiles=100\n", 256, False),  # fio keeps 100 open
        # threads share one process's descriptors: 4 x 100 (a review's finding)
        ("thread\nnumjobs=4\nnrfiles=100\n", 256, True),
        ("numjobs=4\nnrfiles=100\n", 256, False),  # processes: 100 each
    ],
)
def test_open_files_are_counted_per_process_as_fio_opens_them(
    library: Path, lines: str, limit: int, refused: bool
) -> None:
    _write(library, "j", _HEAD + f"[x]\nrw=write\nbs=1k\nsize=1m\n{lines}")
    lines_out = fiojobs.host_problems("j", {}, fiojobs.Host("here", open_files=limit))
    assert bool(lines_out) is refused, lines_out


@pytest.mark.parametrize(
    "line",
    [
        "lockmem=99999999999999999999999",
        "offset=99999999999999999999p",
        "numjobs=99999999999999999999999",
    ],
)
def test_a_number_past_64_bits_is_refused_as_fio_refuses_it(library: Path, line: str) -> None:
    # fio: "failed parsing ...", job dropped (strtoll's ERANGE); the check crashed with an
    # AssertionError (exit 70) before
    _write(library, "j", _HEAD + f"[x]\nsize=64k\n{line}\n")
    [(where, message)] = fiojobs.option_problems("j", {}, "3.33")
    assert where == "fio" and message.endswith("is past the largest number fio reads (64 bits)")
