"""scripts/gen_fio_options.py on a small fio-like git repository: limits the option
tables write with macros of fio's headers (os/os-linux.h's IOPRIO_MAX_PRIO, not
os/os.h's fallback; iolog.h's DEF_LOG_ENTRIES; stat.h's FIO_IO_U_LIST_MAX_LEN) and with
`sizeof(struct verify_header)` are evaluated, as in a Linux x86_64 build."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.scripts import load_script

pytestmark = pytest.mark.skipif(
    shutil.which("cpp") is None or shutil.which("git") is None, reason="needs cpp and git"
)


gen = load_script("gen_fio_options")

FILES = {
    "options.c": """#include <stdio.h>
#include "fio.h"
#include "verify.h"
struct fio_option fio_options[FIO_MAX_OPTS] = {
	{ .name = "prio", .type = FIO_OPT_INT, .minval = IOPRIO_MIN_PRIO, .maxval = IOPRIO_MAX_PRIO, },
	{ .name = "verify_interval", .type = FIO_OPT_INT,
		.minval = 2 * sizeof(struct verify_header), },
	{ .name = "verify_offset", .type = FIO_OPT_INT, .minval = sizeof(struct verify_header), },
	{ .name = "log_entries", .type = FIO_OPT_INT,
		.minval = DEF_LOG_ENTRIES, .maxval = MAX_LOG_ENTRIES, },
	{ .name = "log_compression", .type = FIO_OPT_INT, .maxval = 512 * 1024 * 1024ULL, },
	{ .name = "percentile_list", .type = FIO_OPT_FLOAT_LIST, .maxlen = FIO_IO_U_LIST_MAX_LEN, },
	{ .name = "filename", .type = FIO_OPT_STR_STORE, .maxlen = PATH_MAX, },
	{ .name = NULL, },
};
""",
    "fio.h": '#include "os/os.h"\n#include "iolog.h"\n#include "stat.h"\n',
    "os/os.h": """#ifndef FIO_OS_H
#define FIO_OS_H
#if defined(__linux__)
#include "os-linux.h"
#else
#error "unsupported os"
#endif
#ifndef FIO_HAVE_IOPRIO
#define IOPRIO_MIN_PRIO 0
#define IOPRIO_MAX_PRIO 0
#endif
#endif
""",
    "os/os-linux.h": """#include <linux/limits.h>
#define FIO_HAVE_IOPRIO
#define IOPRIO_MIN_PRIO		0	/* highest priority */
#define IOPRIO_MAX_PRIO		7	/* lowest priority */
""",
    "iolog.h": "#define DEF_LOG_ENTRIES\t\t1024\n#define MAX_LOG_ENTRIES\t\t(1024 * DEF_LOG_ENTRIES)\n",
    "stat.h": "#define FIO_IO_U_LIST_MAX_LEN 20 /* the default and user-specified list */\n",
    "verify.h": """#include <stdint.h>
struct verify_header {
	uint16_t magic;
	uint16_t verify_type;
	uint32_t len;
	uint64_t rand_seed;
	uint64_t offset;
	uint32_t time_sec;
	uint32_t time_nsec;
	uint16_t thread;
	uint16_t numberio;
	uint32_t crc32;
};
""",
    "engines/cmdprio.h": '#include "../fio.h"\n',
    "engines/libaio.c": """#include <libaio.h>
#include "../fio.h"
#include "cmdprio.h"
static struct fio_option options[] = {
	{ .name = "cmdprio", .type = FIO_OPT_INT, .maxval = IOPRIO_MAX_PRIO, },
	{ .name = NULL, },
};
static struct ioengine_ops ioengine = { .name = "libaio", .options = options, };
""",
}


@pytest.fixture(scope="module")
def fio_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = tmp_path_factory.mktemp("fio")
    for name, text in FILES.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text, encoding="utf-8")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "fio"], check=True)
    subprocess.run([*git, "tag", "fio-9.9"], check=True)
    return repo


def test_limits_written_with_header_macros_are_evaluated(fio_repo: Path) -> None:
    table = gen.release_table(fio_repo, "9.9")
    options = table["options"]
    # os/os-linux.h's value, not os/os.h's fallback for systems without ioprio (0)
    assert options["prio"] == {"fio_type": "FIO_OPT_INT", "max": 7}
    # 2 * sizeof(struct verify_header): 40 bytes on x86_64
    assert options["verify_interval"] == {"fio_type": "FIO_OPT_INT", "min": 80}
    assert options["verify_offset"] == {"fio_type": "FIO_OPT_INT", "min": 40}
    assert options["log_entries"] == {"fio_type": "FIO_OPT_INT", "min": 1024, "max": 1048576}
    assert options["log_compression"]["max"] == 512 * 1024 * 1024
    assert options["percentile_list"]["maxlen"] == 20
    # the system's PATH_MAX is not fio's: left out
    assert "maxlen" not in options["filename"]
    assert table["engines"]["libaio"]["options"]["cmdprio"]["max"] == 7


@pytest.mark.parametrize(
    ("expr", "value"),
    [
        ("(1024 * 1024)", 1048576),
        ("512 * 1024 * 1024ULL", 536870912),
        ("((1 << 10) - 1)", 1023),
        ("0 + 1", 1),
        ("-20", -20),
        ("0x10UL", 16),
        ("7 / 2", 3),
        ("IOPRIO_MAX_PRIO", None),
        ("sizeof(struct x)", None),
    ],
)
def test_a_c_integer_expression_is_evaluated(expr: str, value: int | None) -> None:
    assert gen._eval_int(expr) == value
