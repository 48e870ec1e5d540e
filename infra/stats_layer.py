"""The Summarize Lambda's "stats" layer: numpy + scipy for the report's repeat-noise
section (docs/decisions.md, "The AWS report's repeat noise").

Built by `make layer` (a prerequisite of `make bootstrap`, `make synth` and the
test targets) from requirements-layer-stats.txt: pip, PyPI as the only network,
wheels only, every file hash-checked, for the Lambda's Python (cp314, x86_64,
manylinux_2_28), installed under `python/` (the directory Lambda puts on
sys.path from a layer), trimmed of what the runtime never imports, and zipped
reproducibly (sorted, fixed timestamps: the same pins give the same asset hash,
so a rebuild does not publish a new layer version) into `.layers/stats.zip`, the
layer's asset as CDK uploads it. The zip is generated (.gitignore): synth refuses
to run without it rather than deploy a Summarize that cannot compute the section.

    python -m infra.stats_layer build    # what `make layer` runs
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REQUIREMENTS = ROOT / "requirements-layer-stats.txt"
LAYER_ZIP = ROOT / ".layers" / "stats.zip"  # the asset: python/<packages>
PACKAGES = ("numpy", "scipy")
PYTHON_VERSION = "3.14"  # infra.constructs.functions.RUNTIME
ABI = "cp314"
PLATFORM = "manylinux_2_28_x86_64"  # pip also accepts the older manylinux tags under it
# Lambda's limit for a function's code and all its layers, unzipped
LAMBDA_UNZIPPED_LIMIT = 250 * 1024 * 1024
# what this layer may take of it: the rest is for the function's asset (~2 MB) and the
# Powertools layer (Powertools, pydantic, X-Ray SDK: ~20 MB unzipped)
LAYER_BUDGET = 160 * 1024 * 1024
# removed after install: test suites (25 MB), bytecode (Lambda compiles on import),
# console scripts (f2py, numpy-config)
TRIM_DIRS = ("tests", "__pycache__")
TRIM_TOP = ("bin",)


class LayerMissing(RuntimeError):
    pass


def layer_zip() -> Path:
    """The built layer's zip, or LayerMissing naming the command that builds it."""
    if not LAYER_ZIP.is_file():
        raise LayerMissing(
            f"{LAYER_ZIP}: the stats layer (numpy, scipy for the Summarize Lambda) is not "
            "built: run `make layer` (or `make bootstrap`)"
        )
    return LAYER_ZIP


def trim(site: Path) -> None:
    """Remove test suites, bytecode caches and console scripts from an installed tree."""
    for name in TRIM_TOP:
        shutil.rmtree(site / name, ignore_errors=True)
    for path in sorted(site.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        if path.is_dir() and path.name in TRIM_DIRS:
            shutil.rmtree(path)
        elif path.suffix == ".pyc":
            path.unlink()


def dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def unzipped_size(zip_path: Path) -> int:
    with zipfile.ZipFile(zip_path) as z:
        return sum(i.file_size for i in z.infolist())


def write_zip(src: Path, dest: Path) -> None:
    """`src`'s files into `dest`, paths relative to `src`, sorted, timestamps fixed,
    modes kept (the .so files stay readable and executable)."""
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as z:
        for path in sorted(p for p in src.rglob("*") if p.is_file()):
            info = zipfile.ZipInfo(path.relative_to(src).as_posix(), (1980, 1, 1, 0, 0, 0))
            info.external_attr = (path.stat().st_mode & 0o777 | 0o100000) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            with path.open("rb") as f, z.open(info, "w") as out:
                shutil.copyfileobj(f, out, 1 << 20)


def build(dest: Path = LAYER_ZIP, requirements: Path = REQUIREMENTS) -> Path:
    """pip-install the pinned wheels under a scratch python/, trim, zip to `dest`;
    atomic: a failed build leaves the previous zip (or none), never half of one."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.stem + ".build")
    shutil.rmtree(tmp, ignore_errors=True)
    site = tmp / "python"
    cmd = [
        sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
        "--no-input", "--no-deps", "--no-compile", "--require-hashes", "--only-binary=:all:",
        "--implementation", "cp", "--python-version", PYTHON_VERSION, "--abi", ABI,
        "--platform", PLATFORM, "--target", str(site), "-r", str(requirements),
    ]  # fmt: skip
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull}  # no user index or cache settings
    part = dest.with_name(dest.name + ".part")
    try:
        subprocess.run(cmd, check=True, env=env)  # noqa: S603 - our interpreter, fixed argv
        trim(site)
        size = dir_size(tmp)
        if size > LAYER_BUDGET:
            raise RuntimeError(
                f"{requirements}: the layer takes {size / 2**20:.0f} MiB unzipped, over its "
                f"{LAYER_BUDGET / 2**20:.0f} MiB budget of Lambda's 250 MiB"
            )
        write_zip(tmp, part)
        part.replace(dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        part.unlink(missing_ok=True)
    return dest


def main(argv: list[str]) -> int:
    if argv != ["build"]:
        print("usage: python -m infra.stats_layer build", file=sys.stderr)
        return 2
    try:
        out = build()
    except subprocess.CalledProcessError as exc:  # pip said why above
        print(
            f"{REQUIREMENTS}: pip exited {exc.returncode}: every pin needs a hash-matching "
            f"{ABI} {PLATFORM} wheel on PyPI",
            file=sys.stderr,
        )
        return 1
    except RuntimeError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    print(f"stats layer: {out} ({unzipped_size(out) / 2**20:.0f} MiB unzipped)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
