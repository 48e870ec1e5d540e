"""The yocto-core-image-sato-sdk preset's populate and run steps, exactly as the preset
has them, through a real `iofleet local` run, with no network and no real Yocto.

What is real: `iofleet local` (planner, agents, populate once per cell, two slots,
ingest into DuckDB), the preset's bash (as root it creates the `yocto` user with
useradd, chowns the work and shared directories and drops to it with runuser, as on
an instance), git cloning poky with --depth 1 --branch kirkstone into the shared
directory and each slot cloning that copy.

What is a hand-written stand-in (no network, no hours of build here): the poky
repository (a local git repository on branch kirkstone that
https://git.yoctoproject.org/poky is redirected to through git's url.insteadOf),
its oe-init-build-env (makes build/conf/local.conf, cds there, puts bitbake/bin on
PATH) and bitbake itself, a Python script that refuses what real bitbake refuses
(root, a non-UTF-8 locale), checks the configuration the preset wrote, "fetches"
into DL_DIR on populate, and on a run finds that download with BB_NO_NETWORK set and
writes an image into the slot's build directory. It records what it saw in an
evidence directory, since the runner removes the work directories after the cell.

Everything runs in a private mount namespace so the host is untouched: a copy of
/etc (useradd writes the copy), tmpfs on /home, /var/log and /mnt, the storage
under test bind-mounted at /mnt/storage.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest

from iofleet.plan.apps import get_preset

ROOT = Path(__file__).resolve().parents[2]
YOCTO = "yocto-core-image-sato-sdk"

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not all(shutil.which(t) for t in ("unshare", "useradd", "runuser")),
    reason="a private mount namespace and useradd need root",
)

OE_INIT_BUILD_ENV = """\
# stand-in for poky's oe-init-build-env (sourced): build dir, its conf, bitbake on PATH
OEROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BUILDDIR="$OEROOT/${1:-build}"
mkdir -p "$BUILDDIR/conf"
[ -f "$BUILDDIR/conf/local.conf" ] || printf 'MACHINE ??= "qemux86-64"\\n' > "$BUILDDIR/conf/local.conf"
export BUILDDIR PATH="$OEROOT/scripts:$OEROOT/bitbake/bin:$PATH"
cd "$BUILDDIR" || return 1
echo "### Shell environment set up for builds. ###"
"""

BITBAKE = """\
#!/usr/bin/env python3
# stand-in for bitbake: checks what the preset set up, fetches/builds nothing real
import hashlib, json, locale, os, re, sys, time
from pathlib import Path

def die(msg):
    print("ERROR: " + msg, file=sys.stderr)
    sys.exit(1)

if os.getuid() == 0:
    die("Do not use Bitbake as root.")
if os.environ.get("LANG") != "en_US.UTF-8" or sys.getfilesystemencoding() != "utf-8":
    die("Please use a locale setting which supports UTF-8 (such as LANG=en_US.UTF-8).")
build = Path(os.environ["BUILDDIR"])
if Path.cwd() != build:
    die(f"not in the build directory {build}")
conf = (build / "conf" / "local.conf").read_text()
def setting(name):
    found = re.findall(r'^' + name + r' = "(.*)"$', conf, re.M)
    return found[-1] if found else None
shared = os.environ["IOFLEET_SHARED"]
dl = setting("DL_DIR")
if dl != shared + "/downloads":
    die(f"DL_DIR is {dl!r}, not the cell's shared download cache")
source = Path(dl) / "poky-standin-source.tar"
record = {"args": sys.argv[1:], "uid": os.getuid(), "lang": os.environ.get("LANG"),
          "cwd": str(Path.cwd()), "dl_dir": dl, "workdir": os.environ["IOFLEET_WORKDIR"],
          "no_network": setting("BB_NO_NETWORK"), "mirror": setting("SOURCE_MIRROR_URL"),
          "inherit_own_mirrors": 'INHERIT += "own-mirrors"' in conf}
if sys.argv[1:] == ["core-image-sato-sdk", "--runall", "fetch"]:
    if setting("BB_NO_NETWORK") == "1":
        die("populate must be allowed to fetch")
    source.write_bytes(b"sources fetched once per cell by populate\\n" + os.urandom(16))
    (Path(dl) / "poky-standin-source.tar.done").touch()
    record["phase"] = "populate"
elif sys.argv[1:] == ["core-image-sato-sdk"]:
    if not source.exists():
        die("Fetcher failure: network disabled and the source is not in DL_DIR")
    image = build / "tmp/deploy/images/qemux86-64/core-image-sato-sdk-qemux86-64.rootfs.ext4"
    image.parent.mkdir(parents=True)
    image.write_bytes(source.read_bytes() + os.environ["IOFLEET_WORKDIR"].encode())
    record.update(phase="run", source_sha=hashlib.sha256(source.read_bytes()).hexdigest(),
                  source_uid=source.stat().st_uid, image=str(image), image_bytes=image.stat().st_size)
else:
    die(f"unexpected arguments {sys.argv[1:]}")
name = f"{record['phase']}-{os.getpid()}.json"
Path("/mnt/evidence", name).write_text(json.dumps(record))
"""

SANDBOX = """\
set -euo pipefail
T=$1
cp -a /etc "$T/etc"
mount --bind "$T/etc" /etc
for d in /home /var/log /mnt; do mount -t tmpfs -o mode=0755 tmpfs "$d"; done
for d in storage standin evidence; do mkdir "/mnt/$d"; mount --bind "$T/$d" "/mnt/$d"; done
chmod 0777 /mnt/evidence
git config --system url.file:///mnt/standin/poky.insteadOf https://git.yoctoproject.org/poky
git config --system --add safe.directory /mnt/standin/poky/.git
cd "$T"
exec "$2" -m iofleet.cli local matrix.json --out out -q
"""


def _standin_poky(path: Path) -> None:
    (path / "bitbake" / "bin").mkdir(parents=True)
    (path / "oe-init-build-env").write_text(OE_INIT_BUILD_ENV)
    bitbake = path / "bitbake" / "bin" / "bitbake"
    bitbake.write_text(BITBAKE)
    bitbake.chmod(0o755)
    git = ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run(["git", "init", "-q", "-b", "kirkstone", str(path)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "stand-in poky"], check=True)


@pytest.fixture(scope="module")
def yocto_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("yocto")
    for d in ("storage", "evidence"):
        (tmp / d).mkdir()
    _standin_poky(tmp / "standin" / "poky")
    preset = get_preset(YOCTO)
    matrix = {
        "name": "yocto-standin",
        "storage": [{"type": "local", "label": "standin", "path": "/mnt/storage"}],
        # the preset is AWS-only in a plan (it needs the network); its own steps, inline
        "workloads": [{"app": {"name": YOCTO, "populate": preset.populate, "run": preset.run}}],
        "parallelism": [2],
    }
    (tmp / "matrix.json").write_text(json.dumps(matrix))
    out = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "--", "bash", "-c", SANDBOX, "-"]
        + [str(tmp), sys.executable],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    evidence = [json.loads(p.read_text()) for p in sorted((tmp / "evidence").iterdir())]
    passwd = (tmp / "etc" / "passwd").read_text().splitlines()
    yocto_uid = next(int(line.split(":")[2]) for line in passwd if line.startswith("yocto:"))
    return {"tmp": tmp, "out": out, "evidence": evidence, "yocto_uid": yocto_uid}


def test_the_local_run_of_the_presets_steps_succeeds(yocto_run: dict[str, Any]) -> None:
    out = yocto_run["out"]
    assert out.returncode == 0, out.stdout + out.stderr
    # and the host was not touched: the user exists only in the sandbox's /etc
    assert "yocto:" not in Path("/etc/passwd").read_text()


def test_populate_fetched_once_into_the_cells_shared_cache_as_the_build_user(
    yocto_run: dict[str, Any],
) -> None:
    (populate,) = [e for e in yocto_run["evidence"] if e["phase"] == "populate"]
    assert populate["uid"] == yocto_run["yocto_uid"] != 0
    assert populate["lang"] == "en_US.UTF-8"
    assert populate["dl_dir"].startswith("/mnt/storage/iofleet-yocto-standin-")
    assert populate["dl_dir"].endswith("/shared/downloads")
    assert populate["no_network"] is None


def test_every_slot_built_offline_from_that_cache_in_its_own_work_dir(
    yocto_run: dict[str, Any],
) -> None:
    (populate,) = [e for e in yocto_run["evidence"] if e["phase"] == "populate"]
    runs = [e for e in yocto_run["evidence"] if e["phase"] == "run"]
    assert len(runs) == 2
    assert sorted(r["workdir"].rsplit("/", 1)[1] for r in runs) == ["slot-0000", "slot-0001"]
    assert len({r["source_sha"] for r in runs}) == 1  # the one download populate made
    for r in runs:
        assert r["uid"] == r["source_uid"] == yocto_run["yocto_uid"]
        assert r["dl_dir"] == populate["dl_dir"]
        assert r["no_network"] == "1" and r["inherit_own_mirrors"]
        assert r["mirror"] == "file://" + populate["dl_dir"]
        assert r["cwd"] == r["workdir"] + "/poky/build"  # on the storage under test
        assert r["image"].startswith(r["cwd"] + "/tmp/deploy/images/") and r["image_bytes"] > 0


def test_the_warehouse_has_the_timed_phases_and_the_hosts_release(
    yocto_run: dict[str, Any],
) -> None:
    con = duckdb.connect(str(yocto_run["tmp"] / "out" / "warehouse.duckdb"), read_only=True)
    try:
        phases = con.execute("SELECT phase, count(*) FROM app_runs GROUP BY phase").fetchall()
        hosts = con.execute("SELECT DISTINCT distro, distro_release FROM slots").fetchall()
    finally:
        con.close()
    assert sorted(phases) == [("populate", 1), ("run", 2)]
    shell = subprocess.run(
        ["bash", "-c", '. /etc/os-release; echo "$ID|$VERSION_ID"'],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert hosts == [tuple(v or None for v in shell.split("|"))]
