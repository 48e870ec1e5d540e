"""How the agent builds ioping commands and judges fio output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from iofleet.agent.payload import Workload
from iofleet.agent.slot import _ioping_complaint, fio_job_errors, ioping_argv

IOPING_VERSIONS = Path(__file__).resolve().parents[1] / "fixtures" / "ioping" / "versions"


def _ioping(**fields: object) -> Workload:
    return Workload(index=1, kind="ioping", name="ioping", **fields)  # type: ignore[arg-type]


def test_ioping_reads_with_json_count_and_zero_interval() -> None:
    argv = ioping_argv(_ioping(count=5, interval_ms=0.0), "/data/slot-0000", raw_device=False)

    assert argv == ["ioping", "-J", "-c", "5", "-i", "0", "/data/slot-0000"]


def test_ioping_interval_in_microseconds() -> None:
    argv = ioping_argv(_ioping(count=5, interval_ms=1.5), "/d", raw_device=False)

    assert argv[argv.index("-i") + 1] == "1500us"


def test_ioping_write_on_a_directory_uses_single_w() -> None:
    argv = ioping_argv(_ioping(count=5, write=True), "/d", raw_device=False)

    assert "-W" in argv and "-WWW" not in argv


def test_ioping_write_on_a_raw_device_needs_triple_w() -> None:
    argv = ioping_argv(_ioping(count=5, write=True), "/dev/nvme1n1", raw_device=True)

    assert "-WWW" in argv


def test_ioping_size_and_direct() -> None:
    argv = ioping_argv(_ioping(count=5, size="16k", direct=True), "/d", raw_device=False)

    assert argv[argv.index("-s") + 1] == "16k"
    assert "-D" in argv


def test_an_ioping_without_json_is_named_from_its_own_complaint() -> None:
    # the real stderr of ioping 1.1 given -J: its complaint, then its usage text
    stderr = (IOPING_VERSIONS / "v1.1" / "stderr-J.txt").read_text()

    assert _ioping_complaint(stderr) == (
        "ioping: invalid option -- 'J' (iofleet runs ioping -J: ioping 1.2 or later)"
    )


def test_ioping_complaint_is_its_last_message_line() -> None:
    stderr = "ioping: request returned less than expected: 2048\nioping: request failed: EIO\n"

    assert _ioping_complaint(stderr) == "ioping: request failed: EIO"


def _fio_text(*errors: int, preamble: str = "") -> str:
    jobs = [{"jobname": f"j{i}", "error": e} for i, e in enumerate(errors)]
    return preamble + json.dumps({"fio version": "fio-3.33", "jobs": jobs}, indent=2)


def test_clean_fio_output_has_no_problems() -> None:
    assert fio_job_errors(_fio_text(0, 0)) == []


def test_fio_job_error_is_reported() -> None:
    assert fio_job_errors(_fio_text(0, 5)) == ["fio job 'j1' reported error 5"]


def test_text_before_the_json_is_skipped() -> None:
    text = _fio_text(0, preamble="fio: file hash not empty on exit\n")

    assert fio_job_errors(text) == []


def test_output_without_json_is_a_problem() -> None:
    assert fio_job_errors("fio: failed parsing\n") == ["fio printed no JSON"]


def test_agent_modules_import_only_the_standard_library() -> None:
    # the agent runs on a bare EC2 instance with the distro's python3
    code = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "import iofleet.agent.slot, iofleet.agent.devices, iofleet.results.parsers.ioping\n"
        "import iofleet.results.parsers.app, iofleet.plan.fiojobs\n"
        "new = {m.split('.')[0] for m in set(sys.modules) - before}\n"
        "print(' '.join(sorted(new - set(sys.stdlib_module_names) - {'iofleet'})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert out.stdout.strip() == ""
