#!/usr/bin/env python3
"""Record what a real fio says about each probe job file (tests/data/probes/fio-jobs).

    scripts/record_fio_verdicts.py --fio PATH/TO/fio [--out FILE]

Runs `fio --parse-only PROBE` for every probe, in an empty directory, with the probe's
`fio_env` from expected.json, and writes `verdicts-<release>.json` beside the probes
(the release from `fio --version`): per probe its sha256, fio's exit status and the
first non-empty line fio printed (stderr, then stdout; null if none; the probe
directory left out of paths). tests/unit/test_fio_verdicts.py checks iofleet's option
table of that release against it with no fio at hand (CI cannot build one). Rerun it,
for each fio below, after adding or changing a probe.

The recorded fio binaries (docs/decisions.md #42):

- fio 3.33: Debian 12's package (fio 3.33-3), /usr/bin/fio.
- fio 3.28 and 3.36, the releases Ubuntu 22.04 and 24.04 ship, built from fio's git
  tags with Debian 12's gcc 12.2, fio's source unchanged and no extra cflags needed:

      git --git-dir=fio.git archive fio-3.28 | tar -x -C src-3.28 && cd src-3.28
      # libaio's header and link name from Debian 12's libaio-dev 0.3.113-4, unpacked
      # (`apt-get download libaio-dev; dpkg -x libaio-dev_*.deb AIO`, its libaio.so
      # pointed at the system's /usr/lib/x86_64-linux-gnu/libaio.so.1), not installed:
      # Ubuntu's fio has the libaio engine the library jobs use
      LDFLAGS=-LAIO/usr/lib/x86_64-linux-gnu ./configure --disable-native \\
          --extra-cflags=-IAIO/usr/include
      make -j2

  and the same for fio-3.36. The io_uring engine needs no liburing.

Exit status: 0 written; 2 the fio does not run or a probe left a file behind.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

PROBES = Path(__file__).resolve().parents[1] / "tests" / "data" / "probes" / "fio-jobs"


def fio_release(fio: str) -> str:
    """`3.28` from `fio --version` (`fio-3.28`); ValueError for anything else."""
    out = subprocess.run([fio, "--version"], capture_output=True, text=True, check=True).stdout
    m = re.fullmatch(r"fio-(\d+\.\d+)\s*", out)
    if not m:
        raise ValueError(f"{fio} --version says {out.strip()!r}, not a fio release (fio-X.Y)")
    return m[1]


def verdict(fio: str, probe: Path, env: dict[str, str]) -> dict[str, object]:
    """fio's exit status and first line for `fio --parse-only probe`."""
    with tempfile.TemporaryDirectory() as work:
        result = subprocess.run(
            [fio, "--parse-only", str(probe)],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=work,
            env={**os.environ, **env},
            check=False,
        )
        left = sorted(os.listdir(work))
    if left:
        raise ValueError(f"{probe.name}: fio --parse-only left {left} behind")
    lines = [ln.strip() for ln in (result.stderr + result.stdout).splitlines() if ln.strip()]
    return {
        "sha256": hashlib.sha256(probe.read_bytes()).hexdigest(),
        "exit": result.returncode,
        # the probe directory left out of paths fio names (as the check names them)
        "first_line": lines[0].replace(f"{probe.parent}/", "") if lines else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fio", required=True, help="the fio binary to ask")
    parser.add_argument("--out", type=Path, help="default: PROBES/verdicts-<release>.json")
    args = parser.parse_args(argv)
    expected = json.loads((PROBES / "expected.json").read_text(encoding="utf-8"))
    try:
        release = fio_release(args.fio)
        probes = {
            path.stem: verdict(args.fio, path, expected[path.stem].get("fio_env", {}))
            for path in sorted(PROBES.glob("*.fio"))
        }
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        print(f"{args.fio}: {exc}", file=sys.stderr)
        return 2
    out = args.out or PROBES / f"verdicts-{release}.json"
    doc = {
        "fio": f"fio-{release}",
        "made_by": "scripts/record_fio_verdicts.py (its docstring says how that fio was built)",
        "probes": probes,
    }
    out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(f"{out}: {len(probes)} probes, {sum(v['exit'] != 0 for v in probes.values())} refused")
    return 0


if __name__ == "__main__":
    sys.exit(main())
