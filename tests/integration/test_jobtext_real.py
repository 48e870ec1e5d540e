"""iofleet's one reader of fio job text (iofleet/plan/jobtext.py) against the fio installed
here (Debian's package): what fio parses, and what it then writes.

Two oracles, both fio's own:
- `fio --debug=parse --parse-only` prints every numeric value it parsed (`ret=0, out=N`),
  piece by piece, and starts no I/O: each size and time text is compared with
  jobtext.fio_size / fio_time_us, and a text fio refuses must be one jobtext refuses.
- Real runs on a temporary directory: the files fio leaves (their number and bytes) and
  the I/O counts and bytes per direction in its JSON are compared with the JobProfile
  iofleet plans with (expect.parse_job_text: the ceilings, the room check and the EFS
  layout cost) and with the Mountpoint traffic count.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from iofleet.plan.expect import parse_job_text
from iofleet.plan.jobtext import Percent, fio_size, fio_time_us, read_jobs

FIO = shutil.which("fio")
pytestmark = pytest.mark.skipif(FIO is None, reason="fio is not installed")
U64 = 1 << 64

SIZES = [
    "4k", "4K", "4kb", "4KB", "4ki", "4kib", "4KiB", "4Ki", "4kibble", "4kx", "4m", "1g",
    "1t", "2p", "1MiB", "1gib", "010", "010k", "0", "512", "4b", "4q", "4 k", " 4k", "1.5g",
    "0x1000", "0x10k", "0X20", "+4k", "4k-8k", "4k:8k", "50%", "4%x", "4e3", "10x",
    "18446744073709551616", "k", "", "x4",
]  # fmt: skip
TIMES = ["10", "10s", "10m", "1h", "1d", "500ms", "500msec", "20us", "10x", "1.5", "010", "5 s"]


def _parse_debug(text: str, cwd: Path) -> tuple[int, list[tuple[str, str, int | None]]]:
    """(fio's exit status, [(option, piece, value or None where fio refused the piece)])."""
    job = cwd / "probe.fio"
    job.write_text(text)
    assert FIO is not None
    run = subprocess.run(
        [FIO, "--debug=parse", "--parse-only", str(job)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        check=False,
    )
    found: list[tuple[str, str, int | None]] = []
    pending: tuple[str, str] | None = None
    for line in run.stdout.splitlines():
        m = re.search(r"__handle_option=(\w+), type=\w+, ptr=(.*)$", line)
        if m:
            pending = (m[1], m[2])
            continue
        m = re.search(r"ret=(\d+), out=(\d+)$", line)
        if m and pending:
            found.append((*pending, int(m[2]) if m[1] == "0" else None))
            pending = None
    return run.returncode, found


def _ours(value: int | Percent | None) -> int | None:
    if isinstance(value, Percent):
        return (U64 - 1 - value.value) % U64  # fio's own encoding of a percentage
    return None if value is None else value % U64


@pytest.mark.parametrize("kb_base", [1024, 1000])
@pytest.mark.parametrize("text", SIZES)
def test_every_size_is_read_as_fio_reads_it(text: str, kb_base: int, tmp_path: Path) -> None:
    status, found = _parse_debug(f"[j]\nkb_base={kb_base}\nsize={text}\n", tmp_path)
    ours = fio_size(text, kb_base)
    if ours is None:
        assert status != 0 or not found or found[0][2] is None, found
        return
    assert status == 0
    # the size option's callback gets each piece (4k-8k: 4k, then 8k): the first is `text`'s
    assert found[0][:2] == ("size", text)
    assert found[0][2] == _ours(ours), (text, found)


@pytest.mark.parametrize("text", TIMES)
def test_every_runtime_is_read_as_fio_reads_it(text: str, tmp_path: Path) -> None:
    status, found = _parse_debug(f"[j]\nruntime={text}\n", tmp_path)
    ours = fio_time_us(text, is_seconds=True)
    assert status == 0 and found[0][0] == "runtime"
    assert found[0][2] == ours, (text, found)


def _run(job_text: str, target: Path) -> dict[str, object]:
    path = target / "job.fio"
    path.write_text(job_text)
    assert FIO is not None
    run = subprocess.run(
        [FIO, "--output-format=json", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=target,
        check=False,
    )
    assert run.returncode == 0, run.stderr + run.stdout
    out: dict[str, object] = json.loads(run.stdout[run.stdout.index("{") :])
    return out


def _files(directory: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in sorted(directory.iterdir())}


@pytest.mark.parametrize(
    ("size_line", "expected"),
    [
        ("size=010k", 10 * 1024),  # base 10: not octal, not refused
        ("size=4ki", 4096),  # "ki" is not "kib": the k alone counts
        ("size=4KiB", 4000),  # the compatibility rule of kb_base=1024
        ("size=8k ; a comment", 8192),
        ("size=8k#a comment", 8192),
        ("size = 8k", 8),  # the blank after '=' stays: fio reads the 8, not the unit
        ("size=0x2000", 8192),
    ],
)
def test_the_file_fio_lays_out_is_the_size_iofleet_reads(
    size_line: str, expected: int, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    text = f"[j]\ndirectory={data}\nrw=write\nbs=1\n{size_line}\n"
    (profile,) = parse_job_text(text, {})
    _run(text, tmp_path)
    assert _files(data) == {"j.0.0": expected}
    assert profile.file_bytes == expected


def test_kb_base_applies_where_fio_parses_the_size(tmp_path: Path) -> None:
    # a [global] size is read with the [global]'s kb_base; a section's kb_base applies to
    # every size of that section, even one written above it
    data = tmp_path / "data"
    data.mkdir()
    text = (
        f"[global]\ndirectory={data}\nrw=write\nbs=1\nsize=4k\n"
        "[inherits]\nkb_base=1000\n"
        "[own]\nsize=4k\nkb_base=1000\n"
    )
    profiles = parse_job_text(text, {})
    _run(text, tmp_path)
    assert _files(data) == {"inherits.0.0": 4096, "own.0.0": 4000}
    assert [p.file_bytes for p in profiles] == [4096, 4000]


def test_the_block_size_of_each_direction_is_the_one_fio_uses(tmp_path: Path) -> None:
    # bs=4k,8k: reads of 4k, writes of 8k; bs=4k-8k is the same list (not a range);
    # bs=,8k keeps the read size inherited from [global]; bs=16k, sets the reads only
    data = tmp_path / "data"
    data.mkdir()
    text = (
        f"[global]\ndirectory={data}\nrw=rw\nsize=256k\nbs=2k\n"
        "[comma]\nbs=4k,8k\n"
        "[dash]\nbs=4k-8k\n"
        "[keep]\nbs=,8k\n"
        "[trailing]\nbs=16k,\n"
        "[spaced]\nbs = 4k\n"
    )
    profiles = parse_job_text(text, {})
    out = _run(text, tmp_path)
    measured = {}
    for job in out["jobs"]:  # type: ignore[attr-defined]
        sizes = {}
        for d in ("read", "write"):
            if job[d]["total_ios"]:
                sizes[d] = job[d]["io_bytes"] // job[d]["total_ios"]
        measured[job["jobname"]] = sizes
    assert measured == {
        "comma": {"read": 4096, "write": 8192},
        "dash": {"read": 4096, "write": 8192},
        "keep": {"read": 2048, "write": 8192},
        "trailing": {"read": 16384, "write": 2048},
        "spaced": {"read": 4, "write": 4},
    }
    assert {p.job: p.block_sizes for p in profiles} == measured


def test_numjobs_and_the_global_in_force_make_the_files_fio_makes(tmp_path: Path) -> None:
    # numjobs=010 is ten clones; a [global] after a job does not reach back to it; an
    # include's options count; an alias is its option
    data = tmp_path / "data"
    data.mkdir()
    (tmp_path / "more.inc").write_text("nr_files=2\n")
    text = (
        f"[global]\ndirectory={data}\nrw=write\nbs=4k\nsize=8k\n"
        "[ten]\nnumjobs=010\n"
        "[global]\nsize=16k\n"
        "[two]\ninclude more.inc\n"
    )
    (tmp_path / "job.fio").write_text(text)
    profiles = [p for p in parse_job_text(text, {}, tmp_path / "job.fio")]
    _run(text, tmp_path)
    files = _files(data)
    ten = {k: v for k, v in files.items() if k.startswith("ten.")}
    two = {k: v for k, v in files.items() if k.startswith("two.")}
    assert (len(ten), set(ten.values())) == (10, {8192})
    assert two == {"two.0.0": 8192, "two.0.1": 8192}  # size 16k split between 2 files
    assert [(p.numjobs, p.file_bytes) for p in profiles] == [(10, 10 * 8192), (1, 16384)]
    assert sum(files.values()) == sum(p.file_bytes or 0 for p in profiles)


def test_a_variable_is_replaced_after_the_comment_is_cut(tmp_path: Path) -> None:
    # fio cuts the line at ';' first, then puts ${SIZE} in: a ';' in the value is kept
    # (and then read as fio reads it: 12k;x is 12k); an unset variable is empty
    data = tmp_path / "data"
    data.mkdir()
    text = f"[j]\ndirectory={data}\nrw=write\nbs=4k\nsize=${{SIZE}}\nnumjobs=1${{UNSET}}\n"
    env = {"SIZE": "12k;x"}
    (job,) = read_jobs(tmp_path / "job.fio", env, text.splitlines())
    (tmp_path / "job.fio").write_text(text)
    assert FIO is not None
    subprocess.run(
        [FIO, "--output-format=json", str(tmp_path / "job.fio")],
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        timeout=120,
        check=True,
        cwd=tmp_path,
    )
    assert _files(data) == {"j.0.0": 12288}
    assert job.last_number("size") == 12288


def test_files_of_their_own_size_are_counted_as_fio_lays_them_out(tmp_path: Path) -> None:
    # filesize= makes each of the nrfiles files that size (a range: each somewhere in it),
    # whatever size= says; without size=, fio's size is the files' total
    data = tmp_path / "data"
    data.mkdir()
    text = (
        f"[global]\ndirectory={data}\nbs=4k\n"
        "[bigger]\nrw=read\nsize=64k\nfilesize=256k\nnrfiles=2\n"
        "[nosize]\nrw=write\nfilesize=32k\nnr_files=3\n"
        "[ranged]\nrw=write\nfilesize=16k-64k\nnrfiles=4\n"
    )
    profiles = {p.job: p for p in parse_job_text(text, {})}
    out = _run(text, tmp_path)
    on_disk: dict[str, int] = {}
    for name, size in _files(data).items():
        on_disk[name.split(".")[0]] = on_disk.get(name.split(".")[0], 0) + size
    io = {j["jobname"]: j["read"]["io_bytes"] + j["write"]["io_bytes"] for j in out["jobs"]}  # type: ignore[attr-defined]
    assert on_disk["bigger"] == profiles["bigger"].file_bytes == 2 * 256 * 1024
    assert io["bigger"] == profiles["bigger"].size_bytes == 64 * 1024
    assert on_disk["nosize"] == profiles["nosize"].file_bytes == io["nosize"] == 3 * 32 * 1024
    assert profiles["nosize"].size_bytes == io["nosize"]
    # a range: the room check counts the top of it (at most), the I/O amount is unknown
    assert 4 * 16 * 1024 <= on_disk["ranged"] <= (profiles["ranged"].file_bytes or 0)
    assert profiles["ranged"].file_bytes == 4 * 64 * 1024
    assert profiles["ranged"].size_bytes is None
