"""Inputs nobody here wrote, through the command line as users run it.

Every refused input must give exit 2 and exactly one stderr line that starts with the
file (or the option) at fault, no traceback, and create or change nothing: each case
runs in a sandbox (the working directory, the input files, `TMPDIR`) whose every path
and file hash is compared before and after, and no loop device may appear backed by a
file in it (iofleet never makes one; `losetup` is the kernel's list).

Bad matrix *contents* are the probe set of test_plan_cli.py; here: the matrix file
itself (missing, a directory, unreadable, a dangling link), the machine a local run
meets (a `local.path` or `--out` that cannot be a directory), the fio job library, and
the warehouse a reading command is given.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

GOOD: dict[str, object] = {
    "name": "inputs",
    "storage": [{"label": "a", "type": "local", "path": "target"}],
    "workloads": [{"fio": "latency-4k-qd1-randread", "params": {"RUNTIME": 1, "SIZE": "64k"}}],
    "parallelism": [1],
}


class Sandbox:
    """tmp_path laid out as `work/` (the working directory), `in/` (inputs) and `tmp/`
    (TMPDIR of the command)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.work = root / "work"
        self.inputs = root / "in"
        self.tmp = root / "tmp"
        for d in (self.work, self.inputs, self.tmp):
            d.mkdir()

    def matrix(self, doc: object, name: str = "m.json") -> Path:
        path = self.inputs / name
        path.write_text(json.dumps(doc))
        return path

    def state(self) -> dict[str, str]:
        """Every path under the sandbox: a file's SHA-256, 'dir', or a link's target."""
        out: dict[str, str] = {}
        for top, dirs, files in os.walk(self.root):
            for name in dirs + files:
                path = Path(top) / name
                rel = str(path.relative_to(self.root))
                if path.is_symlink():
                    out[rel] = f"-> {os.readlink(path)}"
                elif path.is_dir():
                    out[rel] = "dir"
                elif path.is_fifo():  # reading it would wait for a writer
                    out[rel] = "fifo"
                else:
                    try:
                        out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
                    except PermissionError:
                        out[rel] = "unreadable"
        return out

    def loop_devices(self) -> list[str]:
        """Loop devices backed by a file in the sandbox."""
        listing = subprocess.run(
            ["losetup", "--list", "--json", "--output", "NAME,BACK-FILE"],
            capture_output=True,
            text=True,
            check=False,
        )
        if listing.returncode != 0 or not listing.stdout.strip():
            return []
        devices = json.loads(listing.stdout).get("loopdevices", [])
        return [
            d["name"] for d in devices if str(d.get("back-file") or "").startswith(str(self.root))
        ]

    def run(
        self, *args: str, prefix: tuple[str, ...] = (), env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        full_env = {**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(self.tmp), **(env or {})}
        full_env.pop("IOFLEET_DEBUG", None)
        return subprocess.run(
            [*prefix, sys.executable, "-m", "iofleet.cli", *args],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=self.work,
            env=full_env,
        )

    def refused(
        self, *args: str, prefix: tuple[str, ...] = (), env: dict[str, str] | None = None
    ) -> str:
        """Run a command that must be refused; returns its one stderr line."""
        before = self.state()
        result = self.run(*args, prefix=prefix, env=env)
        assert result.returncode == 2, (result.returncode, result.stderr)
        lines = result.stderr.splitlines()
        assert len(lines) == 1, result.stderr
        assert "Traceback" not in result.stderr and "internal error" not in result.stderr
        assert result.stdout == ""
        assert self.state() == before  # nothing created, nothing changed
        assert self.loop_devices() == []
        return lines[0]


@pytest.fixture
def box(tmp_path: Path) -> Sandbox:
    return Sandbox(tmp_path)


def _local(box: Sandbox, matrix: Path, out: str = "out") -> str:
    return box.refused("local", str(matrix), "--out", out, "-q")


# --- the matrix file itself -----------------------------------------------------------


def test_a_missing_matrix_file(box: Sandbox) -> None:
    path = box.inputs / "absent.json"
    for command in (("plan",), ("local",)):
        extra = ("--out", "out") if command == ("local",) else ()
        assert box.refused(*command, str(path), *extra) == f"{path}: no such matrix file"


def test_a_file_name_with_a_line_break_is_still_one_line(box: Sandbox) -> None:
    # the name is the user's; each command's refusal quotes it with its line break
    # written as an escape, so the error is still one line that names the file
    path = box.inputs / "bad\nname.json"
    path.write_text("{")
    shown = str(path).replace("\n", "\\n")
    assert box.refused("plan", str(path)).startswith(f"{shown}: line 1 column 2: ")
    assert box.refused("parse", str(path)).startswith(f"{shown}: truncated fio JSON")
    missing = box.inputs / "no\rwh.duckdb"
    line = box.refused("report", "--warehouse", str(missing))
    assert (
        line == f"iofleet: --warehouse {str(missing).replace(chr(13), chr(92) + 'r')}: no such file"
    )


def test_a_directory_as_the_matrix(box: Sandbox) -> None:
    line = box.refused("plan", str(box.inputs))
    assert line == f"{box.inputs}: is a directory, expected a matrix JSON file"
    assert _local(box, box.inputs) == line


def test_a_fifo_nobody_writes_to_as_the_matrix(box: Sandbox) -> None:
    # open(2) of a FIFO without a writer waited for ever (the fuzzer's find): now it is
    # read without waiting, and no writer is one line (run's timeout would fail a hang)
    fifo = box.inputs / "m.json"
    os.mkfifo(fifo)
    line = f"{fifo}: cannot read: a FIFO or pipe with no writer"
    assert box.refused("plan", str(fifo)) == line
    assert box.refused("plan", str(fifo), "--target", "local") == line
    assert _local(box, fifo) == line


def test_a_matrix_from_a_pipe_with_a_writer_is_planned(box: Sandbox) -> None:
    # a pipe whose writer is there (what `iofleet plan <(...)` gives) is read as written
    path = box.matrix(GOOD)
    piped = ("sh", "-c", 'cat "$0" | "$@"', str(path))
    result = box.run("plan", "/dev/stdin", "--target", "local", prefix=piped)
    assert result.returncode == 0, result.stderr
    assert "1 cells" in result.stdout or "cell" in result.stdout


def test_a_dangling_link_and_a_link_loop_as_the_matrix(box: Sandbox) -> None:
    dangling = box.inputs / "dangling.json"
    dangling.symlink_to(box.root / "nowhere.json")
    loop = box.inputs / "loop.json"
    loop.symlink_to(loop)
    assert box.refused("plan", str(dangling)) == f"{dangling}: no such matrix file"
    assert box.refused("plan", str(loop)) == (
        f"{loop}: cannot read: Too many levels of symbolic links"
    )


def test_an_unreadable_matrix(box: Sandbox) -> None:
    # given a matrix with mode 000; root reads it anyway (CAP_DAC_OVERRIDE), so the
    # command runs with root's file-permission capabilities dropped
    path = box.matrix(GOOD)
    path.chmod(0)
    no_override = (
        "setpriv",
        "--bounding-set=-dac_override,-dac_read_search",
        "--inh-caps=-dac_override,-dac_read_search",
    )
    line = box.refused("plan", str(path), "--target", "local", prefix=no_override)
    assert line == f"{path}: cannot read: Permission denied"
    assert _local_as(box, path, no_override) == line


def _local_as(box: Sandbox, path: Path, prefix: tuple[str, ...]) -> str:
    return box.refused("local", str(path), "--out", "out", "-q", prefix=prefix)


def test_device_files_as_the_matrix(box: Sandbox) -> None:
    assert box.refused("plan", "/dev/null") == (
        "/dev/null: the matrix is empty (expected a JSON object)"
    )
    # an endless file is read only up to the size limit
    assert box.refused("plan", "/dev/zero") == (
        "/dev/zero: the matrix is over the 1048576 byte limit"
    )


def test_a_yaml_matrix_is_refused_at_its_first_character(box: Sandbox) -> None:
    path = box.inputs / "m.yaml"
    path.write_text("base: &b {type: local}\nstorage:\n  - <<: *b\n    label: a\n")
    assert box.refused("plan", str(path)) == (
        f"{path}: line 1 column 1: Expecting value "
        "(a matrix is JSON, an object starting with '{': no YAML, no comments)"
    )


# --- a local run: the storage paths and --out ------------------------------------------


def _with_paths(box: Sandbox, *paths: str) -> Path:
    storage = [{"label": f"s{i}", "type": "local", "path": p} for i, p in enumerate(paths)]
    return box.matrix(dict(GOOD, storage=storage))


def _path_refused(box: Sandbox, matrix: Path) -> str:
    """The one line `local` refuses a storage path with; `plan --target local` gives the
    same line (it runs local's path checks, creating nothing)."""
    line = _local(box, matrix)
    assert box.refused("plan", str(matrix), "--target", "local") == line
    return line


def test_a_local_path_that_is_a_file(box: Sandbox) -> None:
    afile = box.inputs / "afile"
    afile.write_text("x")
    matrix = _with_paths(box, str(afile))
    assert _path_refused(box, matrix) == (
        f"{matrix}: storage[0].path: {afile} exists and is not a directory"
    )


def test_a_local_path_under_a_file(box: Sandbox) -> None:
    afile = box.inputs / "afile"
    afile.write_text("x")
    matrix = _with_paths(box, f"{afile}/deeper/target")
    assert _path_refused(box, matrix) == (
        f"{matrix}: storage[0].path: {afile} exists and is not a directory"
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="loop devices need root")
def test_a_local_path_that_is_a_block_device_is_refused_untouched(box: Sandbox) -> None:
    # given a loop device holding a known pattern, named as a local storage path
    backing = box.inputs / "disk.img"
    backing.write_bytes(bytes(range(256)) * 4096)  # 1 MiB
    device = subprocess.run(
        ["losetup", "--find", "--show", str(backing)], capture_output=True, text=True, check=True
    ).stdout.strip()
    try:
        matrix = _with_paths(box, device)
        # when
        result = box.run("local", str(matrix), "--out", "out", "-q")
        planned = box.run("plan", str(matrix), "--target", "local")
        with open(device, "rb") as dev:
            after = dev.read()
    finally:
        subprocess.run(["losetup", "-d", device], check=True)
    # then: one line that says what a local run measures and where a device is measured;
    # exit 2, nothing made, the device's bytes as they were
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [
        f"{matrix}: storage[0].path: {device} is a block device, not a directory: a local "
        "run measures a directory (on the file system mounted there); a raw device is "
        "measured by an AWS run (storage type ebs, filesystem raw)"
    ]
    assert after == bytes(range(256)) * 4096
    assert sorted(p.name for p in box.work.iterdir()) == [] and list(box.tmp.iterdir()) == []
    # and `plan --target local` refuses it with the same line
    assert (planned.returncode, planned.stderr) == (2, result.stderr)


def test_a_local_path_through_a_dangling_link(box: Sandbox) -> None:
    link = box.inputs / "link"
    link.symlink_to(box.root / "gone")
    matrix = _with_paths(box, f"{link}/target")
    assert _path_refused(box, matrix) == (
        f"{matrix}: storage[0].path: {link} is a symbolic link to nothing"
    )


def test_a_second_bad_local_path_leaves_the_first_uncreated(box: Sandbox) -> None:
    # given storage[0] missing (it would be made) and storage[1] a file
    afile = box.inputs / "afile"
    afile.write_text("x")
    matrix = _with_paths(box, "new/a", str(afile))
    # then the refusal names storage[1] and work/new was never made (state compared)
    assert _path_refused(box, matrix) == (
        f"{matrix}: storage[1].path: {afile} exists and is not a directory"
    )


def test_a_local_path_the_kernel_cannot_make_removes_what_was_made(box: Sandbox) -> None:
    # given storage[0] creatable here and storage[1] in procfs, where no directory can be made
    matrix = _with_paths(box, "new/a", "/proc/iofleet-no-such/target")
    # then work/new/a, made first, is gone again (state compared)
    assert _local(box, matrix) == (
        f"{matrix}: storage[1].path: cannot create /proc/iofleet-no-such: No such file or directory"
    )


def test_a_local_path_the_machine_refuses_exits_3_and_removes_what_was_made(
    box: Sandbox,
) -> None:
    # given storage[0] creatable here and storage[1] in sysfs, where mkdir is not permitted
    matrix = _with_paths(box, "new/a", "/sys/iofleet-no-such/target")
    before = box.state()
    # when it is run
    result = box.run("local", str(matrix), "--out", "out", "-q")
    # then the machine's refusal: exit 3, one line naming the file and the storage item,
    # and work/new/a, made first, is gone again
    assert result.returncode == 3, result.stderr
    assert result.stderr.splitlines() == [
        f"iofleet: {matrix}: storage[1].path: cannot create /sys/iofleet-no-such: "
        "Operation not permitted"
    ]
    assert box.state() == before


def test_out_under_a_file(box: Sandbox) -> None:
    afile = box.inputs / "afile"
    afile.write_text("x")
    matrix = box.matrix(GOOD)
    out = f"{afile}/out"
    assert _local(box, matrix, out) == (
        f"iofleet: --out {out}: cannot create: {afile} exists and is not a directory"
    )
    fio = REPO / "tests" / "fixtures" / "fio" / "json-randread.json"
    assert box.refused("import", str(fio), "--out", out, "--label", "x") == (
        f"iofleet: --out {out}: cannot create: {afile} exists and is not a directory"
    )


def test_out_a_link_to_nothing(box: Sandbox) -> None:
    # given an --out that is a symbolic link to a path that does not exist
    link = box.inputs / "out-link"
    link.symlink_to(box.root / "gone")
    matrix = box.matrix(GOOD)
    # then local and import refuse it in one line (exit 2, state compared), and the
    # link's target is not made
    assert _local(box, matrix, str(link)) == (
        f"iofleet: --out {link}: cannot create: {link} is a symbolic link to nothing"
    )
    fio = REPO / "tests" / "fixtures" / "fio" / "json-randread.json"
    assert box.refused("import", str(fio), "--out", str(link), "--label", "x") == (
        f"iofleet: --out {link}: cannot create: {link} is a symbolic link to nothing"
    )
    assert not (box.root / "gone").exists()


def test_empty_out_is_refused_not_the_working_directory(box: Sandbox) -> None:
    matrix = box.matrix(GOOD)
    assert _local(box, matrix, "") == (
        "iofleet: --out: must not be empty (a directory for raw/, the warehouse)"
    )
    fio = REPO / "tests" / "fixtures" / "fio" / "json-randread.json"
    assert box.refused("import", str(fio), "--out", "", "--label", "x") == (
        "iofleet: --out: must not be empty (a directory for raw/, the warehouse)"
    )


# --- the fio job library (IOFLEET_FIO_JOBS: the user's own job files) ------------------

BAD_JOB_FILES = {
    "no-description": (b"[x]\ndirectory=${TARGET}\n", "line 1 must be '; <one-line description>'"),
    "not-utf8": (b"; caf\xe9\n[x]\ndirectory=${TARGET}\n", "not UTF-8 (byte offset 5)"),
    "undeclared": (
        b"; d\n; @param TARGET=.\n[x]\ndirectory=${TARGET}\nsize=${SIZE}\n",
        "${SIZE} is used but has no '; @param' line",
    ),
    "empty": (b"", "line 1 must be '; <one-line description>'"),
}


def _library(box: Sandbox, name: str, text: bytes) -> Path:
    library = box.inputs / "jobs"
    library.mkdir()
    for job in (REPO / "fio-jobs").glob("*.fio"):
        (library / job.name).write_bytes(job.read_bytes())
    (library / f"{name}.fio").write_bytes(text)
    return library


@pytest.mark.parametrize("name", sorted(BAD_JOB_FILES))
def test_a_malformed_job_file_is_the_matrix_problem(box: Sandbox, name: str) -> None:
    text, why = BAD_JOB_FILES[name]
    library = _library(box, name, text)
    env = {"IOFLEET_FIO_JOBS": str(library)}
    matrix = box.matrix(dict(GOOD, workloads=[{"fio": name}]))
    expected = (
        f"{matrix}: workloads[0].fio: job {name!r} cannot be used: {library / name}.fio: {why}"
    )
    assert box.refused("plan", str(matrix), "--target", "local", env=env) == expected
    assert box.refused("local", str(matrix), "--out", "out", "-q", env=env) == expected
    # and `iofleet jobs` names the file
    assert box.refused("jobs", env=env) == f"{library / name}.fio: {why}"


# fio options fio refuses (or reads other than written), in a job file of the user's library:
# name -> (the job's option lines, the problem iofleet names)
BAD_OPTION_FILES = {
    "typo": (
        "size=64k\niodepht=32\n",
        "[x] unknown fio option 'iodepht' (did you mean 'iodepth'?)",
    ),
    "enum": (
        "size=64k\nrw=radnread\n",
        "[x] rw=radnread: 'radnread' is not one of read, write, trim, randread, randwrite, "
        "randtrim, rw, readwrite, randrw, trimwrite, randtrimwrite (did you mean 'randread'?)",
    ),
    "unit": ("size=64k\nbs=4q\n", "[x] bs=4q: '4q' is not a number or a size (k, m, g, t, p)"),
}


@pytest.mark.parametrize("name", sorted(BAD_OPTION_FILES))
def test_a_bad_fio_option_in_a_job_file_is_the_matrix_problem(box: Sandbox, name: str) -> None:
    from iofleet.plan import fioopts

    body, why = BAD_OPTION_FILES[name]
    text = f"; d\n; @param TARGET=.\n[x]\ndirectory=${{TARGET}}\n{body}"
    library = _library(box, name, text.encode())
    env = {"IOFLEET_FIO_JOBS": str(library)}
    release = fioopts.release_for_version(fioopts.installed_version(shutil.which("fio")))
    matrix = box.matrix(dict(GOOD, workloads=[{"fio": name}]))
    expected = f"{matrix}: workloads[0].fio: job {name!r} for fio {release}: {name}.fio:6: {why}"
    assert box.refused("plan", str(matrix), "--target", "local", env=env) == expected
    assert box.refused("local", str(matrix), "--out", "out", "-q", env=env) == expected


# Job files that reached outside the slot's target when they ran (an audit of custom jobs,
# docs/decisions.md #85): {ABS} is a directory outside every target, {REL} the same path
# climbing from any slot directory up to / first. Each is refused before anything runs.
ESCAPING_JOBS = {
    "section-name": ("[{REL}/sec]\nrw=write\nbs=4k\n", "a job name without '/'"),
    "name-option": ("[x]\nname={REL}/nm\nrw=write\nbs=4k\n", "a job name without '/'"),
    "exec-engine": (
        "[x]\nioengine=exec\nprogram=/usr/bin/touch\narguments={ABS}/exec\n",
        "ioengine='exec' is not an engine iofleet runs",
    ),
    "filedelete-engine": (
        "[x]\nioengine=filedelete\nrw=write\nbs=4k\n",
        "ioengine='filedelete' is not an engine iofleet runs",
    ),
    "mem-file": (
        "[x]\nmem=mmap:{ABS}/victim\nrw=write\nbs=4k\n",
        "a file behind the I/O buffers is not allowed",
    ),
    # fio strips the blank after ':': this is an absolute path to fio
    "mem-file-blank": (
        "[x]\nmem=mmapshared: {ABS}/victim\nrw=write\nbs=4k\n",
        "a file behind the I/O buffers is not allowed",
    ),
    "iomem-file": (
        "[x]\niomem=mmapshared:{REL}/victim\nrw=write\nbs=4k\n",
        "a file behind the I/O buffers is not allowed",
    ),
    "cgroup": ("[x]\ncgroup={REL}/cg\nrw=write\nbs=4k\n", "cgroup is not allowed"),
    "ioscheduler": ("[x]\nioscheduler=none\nrw=write\nbs=4k\n", "ioscheduler is not allowed"),
    # fio reads a line in 8 KiB pieces: the tail of this one is an option line to fio
    "long-line": (
        "[x]\nrw=write\nbs=4k\ndescription=" + "A" * (8191 - 12) + "exec_prerun=touch {ABS}/ran\n",
        "a line of over 4096 bytes",
    ),
    # fio looks for an include in its working directory, the target, first: iofleet puts
    # in a file beside the job file, so one that is not there is refused
    "include": ("[x]\nrw=write\nbs=4k\ninclude more.inc\n", "no such regular file beside"),
    "include-climbing": ("[x]\nrw=write\nbs=4k\ninclude ../{REL}/victim\n", "beside the job"),
    "include-absolute": ("[x]\nrw=write\nbs=4k\ninclude {ABS}/victim\n", "beside the job"),
    # a log a workload can write, naming files anywhere
    "read-iolog": ("[x]\nrw=write\nbs=4k\nread_iolog=evil.log\n", "read_iolog is not allowed"),
    # $jobname in filename_format is the section name: '..' climbs as a '../' would
    "dots-section": (
        "[..]\nrw=write\nbs=4k\nnrfiles=2\nfilename_format={DOTS}/esc$filenum\n",
        "and not only dots",
    ),
    # fio reads a quoted pattern from that file, as root
    "pattern-file": (
        "[x]\nrw=write\nbs=4k\nbuffer_pattern='{ABS}/victim'\n",
        "a pattern read from a file",
    ),
    # fio runs bc on a value with a host keyword and + - * /, and takes what bc prints
    "bc-iolog": (
        '[x]\nrw=write\nbs=4k\nwrite_iolog=print "{ABS}/iolog", $ncpus*0\n',
        "makes fio run bc",
    ),
    "bc-filename": (
        '[x]\nrw=write\nbs=4k\nfilename_format=print "../../../../victim", $ncpus*0\n',
        "makes fio run bc",
    ),
    # fio puts the client's address, empty here, in for $clientuid: '.$clientuid.' is '..'
    "clientuid-format": (
        "[x]\nrw=write\nbs=4k\nfilename_format=" + ".$clientuid./" * 40 + "{ABSREL}/victim\n",
        "without '..', ${...} or $clientuid",
    ),
    "clientuid-name": (
        "[.$CLIENTUID.]\nrw=write\nbs=4k\nfilename_format=" + "$jobname/" * 40 + "{ABSREL}/v\n",
        "a job name without '/' or '$'",
    ),
    # a pattern is pieces: a 'FILE' after a first piece is read as root all the same
    "pattern-file-later": (
        """[x]\nrw=write\nbs=4k\nbuffer_pattern="A"'{ABS}/victim'\n""",
        "a pattern read from a file",
    ),
    "merge-blktrace": (
        "[x]\nmerge_blktrace_file={ABS}/merged\nrw=write\nbs=4k\n",
        "merge_blktrace_file is not allowed",
    ),
}


@pytest.mark.parametrize("name", sorted(ESCAPING_JOBS))
def test_a_job_file_that_would_reach_outside_the_target_is_refused(box: Sandbox, name: str) -> None:
    # given a job file that, run, created, truncated or deleted files outside the target
    # (or ran a program, or changed the host); a file it would have truncated is there
    outside = box.root / "outside"
    outside.mkdir()
    (outside / "victim").write_bytes(b"data to keep\n" * 100)
    body, why = ESCAPING_JOBS[name]
    body = body.replace("{REL}", "../" * 40 + str(outside).lstrip("/"))
    body = body.replace("{ABS}", str(outside))
    body = body.replace("{DOTS}", "$jobname/" * 40 + str(outside).lstrip("/"))
    body = body.replace("{ABSREL}", str(outside).lstrip("/"))
    text = f"; d\n; @param TARGET=.\n[global]\ndirectory=${{TARGET}}\nsize=64k\n{body}"
    library = _library(box, name, text.encode())
    env = {"IOFLEET_FIO_JOBS": str(library)}
    matrix = box.matrix(dict(GOOD, workloads=[{"fio": name}]))
    # when planned and run here: refused in one line, exit 2, nothing made (box.refused)
    line = box.refused("plan", str(matrix), "--target", "local", env=env)
    assert box.refused("local", str(matrix), "--out", "out", "-q", env=env) == line
    assert line.startswith(f"{matrix}: workloads[0].fio: job {name!r} cannot be used: "), line
    assert why in line, line
    # then nothing outside the target changed: no new file, the victim's bytes as they were
    assert sorted(p.name for p in outside.iterdir()) == ["victim"]
    assert (outside / "victim").read_bytes() == b"data to keep\n" * 100


_EXECVE = re.compile(r'^\d+ +execve\("[^"]*", \[(?P<argv>.*?)\], \[(?P<env>.*)\]\) = (?P<rc>-?\d+)')
# a process or thread started: `P clone3(...) = C`, or its `<... clone3 resumed>` line
_CLONE = re.compile(
    r"^(?P<parent>\d+) +(?:<\.\.\. )?(?:clone3?|v?fork)(?:\(| resumed>).* = (?P<child>\d+)$"
)
_PWRITE = re.compile(
    r"^\d+ +pwrite64\(\d+<(?P<path>[^>]*)>, .*, (?P<n>\d+), \d+\) = (?P<done>\d+)$"
)


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
def test_a_jobs_parameters_and_includes_reach_fio_in_its_job_text(box: Sandbox) -> None:
    # given a job with two parameters the matrix sets, one of them in a file the job
    # includes (a parameter's name used to become a variable in fio's environment, where
    # the loader, glibc and every library fio links could read it; fio looked for an
    # include in its working directory, the target, first: docs/decisions.md #88, #89)
    text = (
        "; d\n; @param TARGET=.\n; @param BLOCK_SIZE:size=4k  b\n; @param FILE_BYTES:size=8k  s\n"
        "[x]\ndirectory=${TARGET}\nrw=write\ninclude sizes.inc\nsize=${FILE_BYTES}\n"
    )
    library = _library(box, "envjob", text.encode())
    (library / "sizes.inc").write_text("; the block size\nbs=${BLOCK_SIZE}\n")
    params = {"BLOCK_SIZE": "2k", "FILE_BYTES": "12k"}
    matrix = box.matrix(dict(GOOD, workloads=[{"fio": "envjob", "params": params}]))
    trace = box.root / "trace"
    # when run here, every process's exec and fio's writes traced by the kernel's view
    strace = ("strace", "-f", "-qq", "-v", "-y", "-s", "1000000", "-o", str(trace))
    strace += ("-e", "trace=execve,openat,pwrite64,clone,clone3,fork,vfork", "-e", "signal=none")
    done = box.run(
        "local", str(matrix), "--out", "out", "-q",
        prefix=strace, env={"IOFLEET_FIO_JOBS": str(library)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = trace.read_text().splitlines()
    execs = [m for m in map(_EXECVE.match, lines) if m]
    # then no process started had either parameter in its environment ...
    assert execs
    assert not [m["env"] for m in execs if "BLOCK_SIZE=" in m["env"] or "FILE_BYTES=" in m["env"]]
    # ... fio ran (the exec that succeeded) with its job on standard input ...
    fio_runs = [
        m["argv"] for m in execs if m["rc"] == "0" and m["argv"].startswith('"fio", "--output')
    ]
    assert fio_runs == ['"fio", "--output-format=json+", "-"']
    # ... never opening the include (only iofleet's Python processes read it) ...
    children: dict[str, list[str]] = {}
    for m in map(_CLONE.match, lines):
        if m:
            children.setdefault(m["parent"], []).append(m["child"])
    fio = [m[0].split()[0] for m in execs if m["rc"] == "0" and m["argv"].startswith('"fio"')]
    while True:  # fio's processes and threads: the exec'd ones and all they started
        more = {c for p in fio for c in children.get(p, []) if c not in fio}
        if not more:
            break
        fio += sorted(more)
    readers = {ln.split()[0] for ln in lines if "openat(" in ln and "sizes.inc" in ln}
    assert readers and fio and not readers & set(fio)
    # ... and both values reached the file: 12 KiB written in 2 KiB writes, in the target
    writes = [m for m in map(_PWRITE.match, lines) if m and m["path"].endswith("/x.0.0")]
    assert writes and {m["n"] for m in writes} == {"2048"}
    assert sum(int(m["done"]) for m in writes) == 12 * 1024
    assert {Path(m["path"]).parent.parent.parent.parent for m in writes} == {box.work / "target"}


@pytest.mark.skipif(shutil.which("fio") is None, reason="the second check needs fio")
def test_what_only_the_installed_fio_refuses_is_refused_by_its_parse_only(box: Sandbox) -> None:
    # a buffer pattern's digits are not in fio's option table (a string): the table check
    # passes it, the local fio's --parse-only does not
    text = "; d\n; @param TARGET=.\n[x]\ndirectory=${TARGET}\nsize=64k\nbuffer_pattern=0xzz\n"
    library = _library(box, "bp", text.encode())
    env = {"IOFLEET_FIO_JOBS": str(library)}
    matrix = box.matrix(dict(GOOD, workloads=[{"fio": "bp"}]))
    line = box.refused("plan", str(matrix), "--target", "local", env=env)
    assert line.startswith(f"{matrix}: workloads[0].fio: job 'bp': fio --parse-only refuses it: ")
    assert "buffer_pattern=0xzz" in line


def test_a_missing_job_library(box: Sandbox) -> None:
    library = box.inputs / "no-such-library"
    env = {"IOFLEET_FIO_JOBS": str(library)}
    matrix = box.matrix(GOOD)
    assert box.refused("plan", str(matrix), "--target", "local", env=env) == (
        f"{matrix}: workloads[0].fio: unknown fio job 'latency-4k-qd1-randread': the fio job "
        f"library {library} (IOFLEET_FIO_JOBS) is not a directory"
    )
    assert box.refused("jobs", env=env) == f"{library}: the fio job library is not a directory"


# --- reading commands: the warehouse they are given ------------------------------------


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real warehouse: one fio result imported (no fio run needed)."""
    out = tmp_path_factory.mktemp("imported")
    fio = REPO / "tests" / "fixtures" / "fio" / "json-randread.json"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "iofleet.cli",
            "import",
            str(fio),
            "--out",
            str(out),
            "--label",
            "x",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert result.returncode == 0, result.stderr
    return out / "warehouse.duckdb"


def _duckdb_file(path: Path, *statements: str) -> None:
    import duckdb

    with duckdb.connect(str(path)) as con:
        for sql in statements:
            con.execute(sql)


def _bad_warehouse(box: Sandbox, kind: str, real: Path) -> tuple[Path, str]:
    """(path, what its refusal says after `--warehouse PATH: `)."""
    path = box.inputs / "warehouse.duckdb"
    data = real.read_bytes()
    if kind == "missing":
        return path, "no such file"
    if kind == "directory":
        path.mkdir()
        return path, "is a directory, expected a warehouse.duckdb file"
    not_duckdb = f'cannot open: IO Error: The file "{path}" exists, but it is not a valid DuckDB'
    if kind == "empty":
        path.write_bytes(b"")
        return path, not_duckdb
    if kind == "json":
        path.write_text('{"runs": []}\n')
        return path, not_duckdb
    if kind == "zeros":
        path.write_bytes(bytes(len(data)))
        return path, not_duckdb
    if kind in ("truncated-half", "truncated-4k"):
        path.write_bytes(data[: len(data) // 2] if kind == "truncated-half" else data[:4096])
        return path, f'cannot open: IO Error: Could not read enough bytes from file "{path}"'
    not_ours = "not an iofleet warehouse (no runs and slots tables with a run_id); left as it is"
    if kind == "blank-duckdb":
        _duckdb_file(path)
        return path, not_ours
    if kind == "foreign-duckdb":  # a user's own database with a `runs` table
        _duckdb_file(path, "CREATE TABLE runs (a INTEGER)", "INSERT INTO runs VALUES (1)")
        return path, not_ours
    raise AssertionError(kind)


WAREHOUSE_KINDS = (
    "missing",
    "directory",
    "empty",
    "json",
    "zeros",
    "truncated-half",
    "truncated-4k",
    "blank-duckdb",
    "foreign-duckdb",
)


@pytest.mark.parametrize("kind", WAREHOUSE_KINDS)
def test_report_and_compare_refuse_a_bad_warehouse_and_leave_it_as_it_was(
    box: Sandbox, kind: str, warehouse: Path
) -> None:
    path, why = _bad_warehouse(box, kind, warehouse)
    start = f"iofleet: --warehouse {path}: {why}"
    # (state() compares the file's bytes: a foreign DuckDB file is not given iofleet's schema)
    assert box.refused("report", "--warehouse", str(path)).startswith(start)
    assert box.refused("report", "--warehouse", str(path), "--format", "json").startswith(start)
    assert box.refused("compare", "--warehouse", str(path), "run-a", "run-b").startswith(start)


def test_a_warehouse_another_process_writes_is_busy(box: Sandbox, warehouse: Path) -> None:
    import duckdb

    # given a warehouse held open for writing by another process (here: this one)
    path = box.inputs / "warehouse.duckdb"
    path.write_bytes(warehouse.read_bytes())
    before = box.state()
    # (state() is not taken while the connection is open: closing any descriptor of the
    # file would drop this process's POSIX lock on it, DuckDB's lock)
    with duckdb.connect(str(path)):
        for args in (("report",), ("compare", "run-a", "run-b")):
            # when a reading command opens it
            result = box.run(*args, "--warehouse", str(path))
            # then exit 4 (busy, README "Exit status"), one line
            assert result.returncode == 4, result.stderr
            assert result.stderr.splitlines() == [
                f"iofleet: --warehouse {path}: in use by another process (pid {os.getpid()})"
            ]
    # and nothing was changed
    assert box.state() == before


def _runs(warehouse: Path) -> list[str]:
    import duckdb

    with duckdb.connect(str(warehouse), read_only=True) as con:
        return sorted(r[0] for r in con.execute("SELECT run_id FROM runs").fetchall())


def _out_with(box: Sandbox, warehouse: Path) -> tuple[Path, Path, list[str]]:
    """An --out holding a copy of `warehouse`: (the --out, its warehouse, its runs)."""
    out = box.work / "out"
    out.mkdir()
    path = out / "warehouse.duckdb"
    path.write_bytes(warehouse.read_bytes())
    return out, path, _runs(path)


def test_an_import_into_an_out_whose_warehouse_another_process_holds_is_busy(
    box: Sandbox, warehouse: Path
) -> None:
    import duckdb

    # given an --out whose warehouse another process (here: this one) holds open
    out, path, before = _out_with(box, warehouse)
    fio = REPO / "tests" / "fixtures" / "fio" / "json-randread.json"
    with duckdb.connect(str(path)):
        # when a file is imported into it
        result = box.run("import", str(fio), "--out", str(out), "--label", "y")
    # then exit 4 (busy, README "Exit status"), one line, not an internal error (70)
    assert result.returncode == 4, result.stderr
    assert result.stderr.splitlines() == [
        f"iofleet: --out {out}: warehouse.duckdb is in use by another process "
        f"(pid {os.getpid()}): nothing imported"
    ]
    # and nothing was imported: no raw/ (there was none), no row in the warehouse
    assert not (out / "raw").exists()
    assert _runs(path) == before


@pytest.mark.skipif(shutil.which("fio") is None, reason="the run needs fio")
def test_a_local_run_into_an_out_whose_warehouse_another_process_holds_is_busy(
    box: Sandbox, warehouse: Path
) -> None:
    import duckdb

    # given an --out whose warehouse another process (here: this one) holds open
    out, path, before = _out_with(box, warehouse)
    matrix = box.matrix(GOOD)
    with duckdb.connect(str(path)):
        # when a run is made into it
        result = box.run("local", str(matrix), "--out", str(out), "-q")
    # then exit 4, one line naming the run it kept, not an internal error (70)
    assert result.returncode == 4, result.stderr
    [run_id] = [p.name for p in (out / "raw").iterdir() if p.name not in before]
    assert result.stderr.splitlines() == [
        f"iofleet: --out {out}: warehouse.duckdb is in use by another process "
        f"(pid {os.getpid()}): run {run_id} is kept in {out / 'raw' / run_id}, not "
        "ingested; the next run into this --out ingests it"
    ]
    assert _runs(path) == before
    # and the next command that writes this --out ingests it, as the line says
    fio = REPO / "tests" / "fixtures" / "fio" / "json-randread.json"
    assert box.run("import", str(fio), "--out", str(out), "--label", "y").returncode == 0
    assert run_id in _runs(path)


def test_a_tool_the_matrix_runs_that_is_not_installed_exits_3_and_creates_nothing(
    box: Sandbox,
) -> None:
    # given a PATH with neither fio nor ioping, and a matrix that runs both
    empty = box.inputs / "bin"
    empty.mkdir()
    fio = {"fio": "latency-4k-qd1-randread", "params": {"RUNTIME": 1, "SIZE": "64k"}}
    doc = {**GOOD, "workloads": [fio, {"ioping": {"count": 2}}]}
    matrix = box.matrix(doc)
    before = box.state()
    # when it is run
    result = box.run("local", str(matrix), "--out", "out", "-q", env={"PATH": str(empty)})
    # then the machine's problem (exit 3, README "Exit status"), one line naming each
    # tool and the first workload that runs it, and nothing was made: not the target,
    # not --out
    assert result.returncode == 3, result.stderr
    assert result.stderr.splitlines() == [
        f"iofleet: {matrix}: workloads[0].fio: fio is not installed (not on PATH); "
        "workloads[1].ioping: ioping is not installed (not on PATH): nothing was run"
    ]
    assert box.state() == before


def test_html_over_the_warehouse_being_read_is_refused(box: Sandbox, warehouse: Path) -> None:
    # given a warehouse, and a link to it
    path = box.inputs / "warehouse.duckdb"
    path.write_bytes(warehouse.read_bytes())
    link = box.inputs / "report.html"
    link.symlink_to(path)
    # then writing the HTML report over it, by its name or through the link, is refused
    # (the warehouse was overwritten with HTML) and it keeps its bytes (state compared)
    for html in (path, link):
        assert box.refused("report", "--warehouse", str(path), "--html", str(html)) == (
            f"iofleet: --html {html}: is the warehouse being read (give another path)"
        )


def test_an_empty_html_path_is_refused(box: Sandbox, warehouse: Path) -> None:
    # given a warehouse, and --html given but left empty (a shell variable not set)
    path = box.inputs / "warehouse.duckdb"
    path.write_bytes(warehouse.read_bytes())
    # then it is refused in one line, exit 2, nothing written (it was ignored: exit 0,
    # no file, the user told nothing)
    assert box.refused("report", "--warehouse", str(path), "--html", "") == (
        "iofleet: --html: empty path (give the file to write)"
    )


def test_a_read_only_warehouse_is_reported_without_a_write(box: Sandbox, warehouse: Path) -> None:
    # given a warehouse file of mode 0444, read by root without its override capability
    path = box.inputs / "warehouse.duckdb"
    path.write_bytes(warehouse.read_bytes())
    path.chmod(0o444)
    before = box.state()
    no_override = (
        "setpriv",
        "--bounding-set=-dac_override,-dac_read_search",
        "--inh-caps=-dac_override,-dac_read_search",
    )
    # when it is reported
    result = box.run("report", "--warehouse", str(path), "--format", "json", prefix=no_override)
    # then the report is printed and the file (and its directory) is unchanged
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["run"]["run_id"].startswith("x-")
    assert box.state() == before


# --- valid but unusual: it must run ----------------------------------------------------


@pytest.mark.slow
def test_an_unusual_valid_matrix_runs_every_slot(box: Sandbox) -> None:
    # given a matrix nobody here would write, every part of it valid: the longest name,
    # odd labels, one directory under three spellings (relative with '+' and a trailing
    # slash, relative without, through a symbolic link), lower-case parameter names (a
    # whole float such as 1.0 is refused since decision 42), ioping's smallest count, an app writing non-ASCII, fleet sizes out
    # of order, repeats, and a description with markup, a right-to-left override and a
    # newline
    (box.work / "t+1").mkdir()
    (box.work / "via-link").symlink_to(box.work / "t+1")
    doc = {
        "name": "a" * 47 + "-",
        "description": "ünïcødé \u202e <script>alert(1)</script>\nline 2",
        "storage": [
            {"label": "x.y_z", "type": "local", "path": "./t+1/"},
            {"label": "0", "type": "local", "path": "t+1"},
            {"label": "l-", "type": "local", "path": "via-link"},
        ],
        "workloads": [
            {
                "fio": "latency-4k-qd1-randread",
                "params": {"runtime": "1s", "size": 65536, "direct": 0},
            },
            {"fio": "latency-4k-qd1-randread", "params": {"RUNTIME": 1, "SIZE": "64k"}},
            {"ioping": {"count": 2, "interval_ms": 0}},
            {"app": {"name": "a..b", "run": "echo 'héllo wörld' > f && test -s f"}},
        ],
        "parallelism": [2, 1],
        "repeats": 2,
    }
    matrix = box.matrix(doc)
    # when it is run
    result = box.run("local", str(matrix), "--out", "out", "-q", "--format", "json")
    # then every slot of every cell ran every workload
    assert result.returncode == 0, result.stderr
    import duckdb

    with duckdb.connect(str(box.work / "out" / "warehouse.duckdb"), read_only=True) as con:
        slots = con.execute("SELECT status, count(*) FROM slots GROUP BY status").fetchall()
        fio = con.execute(
            "SELECT count(DISTINCT (cell_id, slot_index, workload_index)) "
            "FROM fio_results WHERE iops > 0"
        ).fetchone()
        ioping = con.execute("SELECT count(*) FROM ioping_requests").fetchone()
        apps = con.execute(
            "SELECT count(*) FROM app_runs WHERE phase = 'run' AND exit_code = 0"
        ).fetchone()
        (run_id, description) = con.execute("SELECT run_id, description FROM runs").fetchone()
    slot_count = 3 * (2 + 1) * 2
    assert slots == [("SUCCEEDED", slot_count)]
    assert fio == (2 * slot_count,)
    assert ioping == (slot_count,)  # count 2: one timed request after the warm-up
    assert apps == (slot_count,)
    assert description == doc["description"]
    assert run_id.startswith(doc["name"] + "-")
    # the report shows the description as text, never as markup
    html = (box.work / "out" / "report.html").read_text(encoding="utf-8")
    assert "<script>alert(1)" not in html
    # and nothing is left in the target beyond the directory itself, nothing in TMPDIR
    assert list((box.work / "t+1").iterdir()) == []
    assert list(box.tmp.iterdir()) == []
    assert sorted(p.name for p in box.work.iterdir()) == ["out", "t+1", "via-link"]


# --- slot payloads (`iofleet agent --slot`) --------------------------------------------


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"\xcc\x00{}", "not UTF-8 (byte offset 0)"),
        (b"[" * 100_000, "invalid JSON: nested too deeply"),
        (b"{}", "slot payload: "),
        # before: exit 70, "internal error: ValueError: Exceeds the limit (4300 digits)"
        (b'{"version": ' + b"9" * 5000 + b"}", "invalid JSON: a 5000-digit integer (at most 40)"),
    ],
    ids=["not-utf8", "deep", "empty-object", "5000-digit-integer"],
)
def test_a_bad_slot_payload_is_one_line_naming_the_file(
    box: Sandbox, content: bytes, why: str
) -> None:
    path = box.inputs / "slot.json"
    path.write_bytes(content)
    assert box.refused("agent", "--slot", str(path)).startswith(f"iofleet: {path}: {why}")


SLOT = {
    "version": 1,
    "run_id": "r-1",
    "cell": {"cell_id": "c000", "cell_index": 0, "fleet_size": 1, "repeat": 1},
    "slot_index": 0,
    "target": {"kind": "directory", "path": "/nonexistent"},
    "workloads": [],
    "results": {"kind": "directory", "root": "/nonexistent/raw"},
}


@pytest.mark.parametrize(
    ("changes", "line"),
    [
        # before: the whole 5,000-character value in the line
        (
            {"version": "v" * 5000},
            "version: unsupported payload version 'vvvvvvvvvvvvvvvvvvvv"
            "...vvvvvvvv' (5000 characters) (this agent reads 1)",
        ),
        # before: 21 KB, the value written whole
        (
            {"platform": "\u2028x" * 3000},
            "platform: must be one of local, aws, got "
            "'\\u2028x\\u2028x\\u2028...x\\u2028x' (6000 characters)",
        ),
        # before: one line of 300 KB, a problem per workload
        ({"workloads": [{"kind": "fio", "name": "x y"}] * 5000}, "and 4990 more problems"),
    ],
    ids=["long-version", "long-platform", "5000-bad-workloads"],
)
def test_a_slot_payload_refusal_stays_short_whatever_it_holds(
    box: Sandbox, changes: dict, line: str
) -> None:
    path = box.inputs / "slot.json"
    path.write_text(json.dumps({**SLOT, **changes}))
    refusal = box.refused("agent", "--slot", str(path))
    assert refusal.startswith(f"iofleet: {path}: slot payload: ")
    assert refusal.endswith(line)
    assert len(refusal) < 2000


# --- the command line -------------------------------------------------------------------


def test_a_long_value_on_the_command_line_is_clipped_in_its_refusal(box: Sandbox) -> None:
    # given a warehouse with one run
    ioping = REPO / "tests" / "fixtures" / "ioping" / "read-c21.json"
    made = box.run("import", str(ioping), "--out", "out", "--label", "one")
    assert made.returncode == 0, made.stderr
    warehouse = str(box.work / "out" / "warehouse.duckdb")
    long = "r" * 5000
    # when each option that names a run, a target or a label gets 5,000 characters, then
    # each refusal is one short line that says how long the value was (before: the
    # value whole, 5 KB, for --run, --target and --label; compare's cut mid-value)
    for args, start in [
        (("report", "--warehouse", warehouse, "--run", long), "iofleet: --run rrrr"),
        (("report", "--warehouse", warehouse, "--target", long), "iofleet: --target: 'rrrr"),
        (("compare", long, "one", "--warehouse", warehouse), "RUN_A: unknown run 'rrrr"),
        (("import", str(ioping), "--out", "out", "--label", long), "--label: 'rrrr"),
        (("compare", "one", "--warehouse", warehouse, "--a", long, "--b", "x=1"), "--a: expected"),
        (
            ("compare", "one", "--warehouse", warehouse, "--a", long + "=1", "--b", "x=1"),
            "--a: unknown field 'rrrr",
        ),
        (
            ("report", "--warehouse", warehouse, "--target", long + "_x<=1"),
            "iofleet: --target: 'rrrr",
        ),
    ]:
        line = box.refused(*args)
        assert line.startswith(start), line
        assert "...rrrrrrrr" in line and "(5000 characters)" in line, line
        assert len(line) < 300, line
    # and a path no file has: the line's last guard (errors.clipped_line) keeps its head
    # and its end, the reason (before: the path whole, 5 KB)
    line = box.refused("agent", "--slot", long)
    assert line.startswith("iofleet: rrrr") and len(line) < 1000, line
    assert line.endswith(": cannot read: File name too long (5042 characters)"), line


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (("local", "m.json"), "iofleet local: the following arguments are required: --out"),
        (("plan",), "iofleet plan: the following arguments are required: matrix"),
        (
            ("plan", "m.json", "--format", "yaml"),
            "iofleet plan: argument --format: invalid choice: 'yaml' (choose from 'table', 'json')",
        ),
        ((), "iofleet: the following arguments are required: COMMAND"),
        (("plan", ""), "iofleet plan: argument matrix: the matrix path is empty"),
        (("local", "", "--out", "out"), "iofleet local: argument matrix: the matrix path is empty"),
        # argparse writes what was typed whole: before, a line break or U+2028 in it made
        # two lines, and 5,000 characters a 5 KB line
        (("jobs", "a\nb"), "iofleet: unrecognized arguments: a\\nb"),
        (("jobs", "a\u2028b"), "iofleet: unrecognized arguments: a\\u2028b"),
        (
            ("parse", "f", "--kind", "k" * 5000),
            "iofleet parse: argument --kind: invalid choice: 'kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk"
            "...auto', 'fio', 'ioping', 'app') (5080 characters)",
        ),
    ],
    ids=[
        "local-no-out",
        "plan-no-matrix",
        "plan-bad-format",
        "no-command",
        "plan-empty-matrix",
        "local-empty-matrix",
        "line-break",
        "u2028",
        "5000-character-choice",
    ],
)
def test_a_bad_command_line_is_one_line(box: Sandbox, args: tuple[str, ...], line: str) -> None:
    prog = line.split(":", 1)[0]
    assert box.refused(*args) == f"{line} (see {prog} --help)"


def test_a_read_only_warehouse_of_the_per_bin_layout_is_reported_as_migrated(
    box: Sandbox, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # given a warehouse as an iofleet before decision 46 left it (bins as a per-bin
    # table, real fio json+ artifacts), mode 0444, read by root without its override
    from tests.unit.test_bins_histograms import RUN, _old_layout, _raw

    made = tmp_path_factory.mktemp("per-bin")
    _old_layout(made / "old.duckdb", _raw(made))
    path = box.inputs / "warehouse.duckdb"
    path.write_bytes((made / "old.duckdb").read_bytes())
    path.chmod(0o444)
    # and a copy brought up to date, as a writing command (import, local) would
    migrated = made / "migrated.duckdb"
    migrated.write_bytes(path.read_bytes())
    from iofleet.results.warehouse import Warehouse

    Warehouse(migrated).close()
    before = box.state()
    no_override = (
        "setpriv",
        "--bounding-set=-dac_override,-dac_read_search",
        "--inh-caps=-dac_override,-dac_read_search",
    )
    for view in ("cell_percentiles", "fleet_latency"):
        # when it is reported
        args = ("report", "--format", "json", "--run", RUN, "--view", view)
        result = box.run(*args, "--warehouse", str(path), prefix=no_override)
        # then the report is the migrated copy's, and the file (and its directory) is
        # unchanged
        assert result.returncode == 0, result.stderr
        want = box.run(*args, "--warehouse", str(migrated))
        assert want.returncode == 0, want.stderr
        assert json.loads(result.stdout) == json.loads(want.stdout)
        assert json.loads(result.stdout)
    assert box.state() == before


def _refused_on_this_machine(
    box: Sandbox, name: str, option: str, parallelism: tuple[int, ...] = (1,)
) -> tuple[Path, str]:
    """A job of one section with `option`, refused by `local` and by `plan --target local`
    in the same one line (box.refused: exit 2, nothing made): (the matrix, the line)."""
    text = f"; d\n; @param TARGET=.\n[x]\ndirectory=${{TARGET}}\nsize=64k\n{option}\n"
    library = box.inputs / "jobs"
    if library.is_dir():
        (library / f"{name}.fio").write_text(text)
    else:
        _library(box, name, text.encode())
    env = {"IOFLEET_FIO_JOBS": str(library)}
    doc = dict(GOOD, workloads=[{"fio": name}], parallelism=list(parallelism))
    matrix = box.matrix(doc, f"{name}.json")
    line = box.refused("local", str(matrix), "--out", "out", "-q", env=env)
    assert box.refused("plan", str(matrix), "--target", "local", env=env) == line
    return matrix, line


def test_a_job_pinned_to_a_cpu_this_machine_lacks_is_refused_before_anything_is_made(
    box: Sandbox,
) -> None:
    cpus = os.sysconf("SC_NPROCESSORS_CONF")
    matrix, line = _refused_on_this_machine(box, "pin", f"cpus_allowed={cpus}")
    assert line == (
        f"{matrix}: workloads[0].fio: job 'pin': pin.fio:6: cpus_allowed={cpus}: CPU {cpus} "
        f"is beyond this machine's {cpus} CPUs (0 to {cpus - 1}): fio drops the job as it starts"
    )


def test_memory_locked_past_what_this_machine_spares_is_refused_before_anything_is_made(
    box: Sandbox,
) -> None:
    # fio locks `lockmem` in every job process (memory.c fio_pin_memory, capped at the
    # memory less 128 MiB each), and a local fleet's slots share this machine: two
    # processes locking half of it each, or two slots locking 45% each, leave too little
    # (a quarter stays free); nothing is run here, so no memory is locked by the test
    from iofleet.plan.fiojobs import lockable_bytes, memory_bytes

    memory = memory_bytes()
    assert memory
    half, most = -(-memory // 2**21), memory * 45 // 100 // 2**20  # MiB
    matrix, line = _refused_on_this_machine(box, "lock", f"lockmem={half}m\nnumjobs=2")
    assert line.startswith(
        f"{matrix}: workloads[0].fio: job 'lock': lock.fio:6: lockmem={half}m: 2 fio processes lock "
    )
    assert f"can spare of its {memory / 2**30:,.1f} GiB (a quarter" in line
    slots_line = _refused_on_this_machine(box, "lock2", f"lockmem={most}m", (1, 2))[1]
    assert ": 1 fio process x 2 slots lock " in slots_line
    # one slot locking 45% is within what this machine spares: planned (not run)
    assert most * 2**20 <= lockable_bytes(memory)
    matrix = box.matrix(dict(GOOD, workloads=[{"fio": "lock2"}]), "one.json")
    env = {"IOFLEET_FIO_JOBS": str(box.inputs / "jobs")}
    done = box.run("plan", str(matrix), "--target", "local", env=env)
    assert done.returncode == 0, done.stderr


def test_a_numa_node_this_machine_lacks_is_refused_before_anything_is_made(
    box: Sandbox,
) -> None:
    from iofleet.plan.fiojobs import numa_nodes

    nodes = numa_nodes()
    if nodes is None:
        pytest.skip("no Mems_allowed_list in /proc/self/status")
    beyond = max(nodes) + 1
    have = ",".join(map(str, sorted(nodes)))
    matrix, line = _refused_on_this_machine(box, "numa", f"numa_cpu_nodes={beyond}")
    assert line == (
        f"{matrix}: workloads[0].fio: job 'numa': numa.fio:6: numa_cpu_nodes={beyond}: NUMA "
        f"node {beyond} is not one of this machine's ({have}): fio drops the job as it starts"
    )


def test_libaio_events_this_machine_has_not_left_are_refused_before_anything_is_made(
    box: Sandbox,
) -> None:
    from iofleet.plan.fiojobs import aio_events_left

    left = aio_events_left()
    if left is None:
        pytest.skip("no /proc/sys/fs/aio-max-nr")
    option = f"ioengine=libaio\niodepth={left + 1}"
    matrix, line = _refused_on_this_machine(box, "aio", option)
    assert line.startswith(
        f"{matrix}: workloads[0].fio: job 'aio': aio.fio:7: iodepth={left + 1}: libaio asks "
        f"for {left + 1:,} events at once"
    )


def test_huge_page_buffers_without_huge_pages_here_are_refused_before_anything_is_made(
    box: Sandbox,
) -> None:
    from iofleet.plan.fiojobs import huge_pages_reserved

    if huge_pages_reserved():
        pytest.skip("this machine has huge pages reserved")
    matrix, line = _refused_on_this_machine(box, "huge", "mem=shmhuge")
    assert line == (
        f"{matrix}: workloads[0].fio: job 'huge': huge.fio:6: mem=shmhuge: this machine has "
        "no huge pages reserved (vm.nr_hugepages is 0): fio fails every I/O; use mem=malloc "
        "(the default)"
    )
