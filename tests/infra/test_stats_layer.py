"""Summarize's stats layer (numpy + scipy for report.html's repeat noise; infra/stats_layer.py).

Read off the synthesized template and the asset CDK staged for the layer in cdk.out
(the zip `cdk deploy` uploads): on Summarize only; wheels built for the Lambda's
Python (cp314, manylinux, x86_64) at the pinned versions; trimmed; small enough
for Lambda's 250 MiB unzipped limit beside the function's code and Powertools.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from infra import stats_layer
from tests.infra.conftest import Synth

# Powertools' python314 x86_64 layer (Powertools, pydantic, X-Ray SDK) unzipped is ~20 MiB;
# the budget counted for it here is generous on purpose
POWERTOOLS_ALLOWANCE = 40 * 1024 * 1024
WHEEL_TAG = re.compile(r"^Tag: cp314-cp314-manylinux_\d+_\d+_x86_64$")
ELF_X86_64 = 0x3E


def _layer(synth: Synth) -> tuple[str, dict[str, Any]]:
    layers = synth.resources("AWS::Lambda::LayerVersion")
    assert len(layers) == 1, list(layers)
    ((logical, res),) = layers.items()
    return logical, res


def _functions(synth: Synth) -> dict[str, dict[str, Any]]:
    return {
        k: v["Properties"]
        for k, v in synth.resources("AWS::Lambda::Function").items()
        if v["Properties"].get("Runtime") == "python3.14"
    }


@pytest.fixture(scope="module")
def layer_zip(synth: Synth) -> zipfile.ZipFile:
    _, res = _layer(synth)
    key = res["Properties"]["Content"]["S3Key"]
    staged = synth.outdir / f"asset.{key}"  # a file asset keeps its name: asset.<hash>.zip
    assert staged.is_file(), sorted(p.name for p in synth.outdir.glob("asset.*"))
    return zipfile.ZipFile(staged)


def test_only_summarize_has_the_stats_layer(synth: Synth) -> None:
    logical, res = _layer(synth)
    props = res["Properties"]
    assert props["CompatibleRuntimes"] == ["python3.14"]
    assert props["CompatibleArchitectures"] == ["x86_64"]
    with_layer = {
        name for name, fn in _functions(synth).items() if {"Ref": logical} in fn.get("Layers", [])
    }
    assert len(with_layer) == 1 and next(iter(with_layer)).startswith("OrchestrationSummarizeFn")
    # and: every iofleet Lambda still has Powertools, and none another layer
    for name, fn in _functions(synth).items():
        layers = fn["Layers"]
        assert len(layers) == (2 if name in with_layer else 1), name
        assert "AWSLambdaPowertoolsPythonV3-python314-x86_64" in str(layers[0]), name


def _pins() -> dict[str, str]:
    text = stats_layer.REQUIREMENTS.read_text()
    return dict(re.findall(r"^([a-z0-9_-]+)==([0-9.]+)", text, re.MULTILINE))


def test_layer_holds_numpy_and_scipy_wheels_for_cp314_manylinux_x86_64(
    layer_zip: zipfile.ZipFile,
) -> None:
    names = layer_zip.namelist()
    pins = _pins()
    assert sorted(pins) == ["numpy", "scipy"]
    for package, version in pins.items():
        # the installed distribution is the pinned version, from a cp314 x86_64 wheel
        wheel = f"python/{package}-{version}.dist-info/WHEEL"
        assert wheel in names, [n for n in names if n.endswith("/WHEEL")]
        tags = [t for t in layer_zip.read(wheel).decode().splitlines() if t.startswith("Tag:")]
        assert tags and all(WHEEL_TAG.match(t) for t in tags), tags
        assert f"python/{package}/__init__.py" in names
        # and: its extension modules are CPython 3.14 x86-64 ELF objects
        exts = [n for n in names if n.startswith(f"python/{package}/") and n.endswith(".so")]
        assert exts and all(".cpython-314-x86_64-linux-gnu.so" in n for n in exts), exts[:5]
        head = layer_zip.read(exts[0])[:20]
        assert head[:4] == b"\x7fELF" and int.from_bytes(head[18:20], "little") == ELF_X86_64
    # the modules the repeat-noise test imports (iofleet/results/stats.py)
    assert "python/scipy/stats/__init__.py" in names
    assert any(n.startswith("python/scipy/stats/_stats_py") for n in names)


def test_layer_is_trimmed_and_fits_lambdas_unzipped_limit(
    synth: Synth, layer_zip: zipfile.ZipFile
) -> None:
    infos = layer_zip.infolist()
    names = [i.filename for i in infos]
    assert not [n for n in names if "/tests/" in n or "__pycache__" in n or n.endswith(".pyc")]
    assert not [n for n in names if n.startswith("python/bin/")]
    layer = sum(i.file_size for i in infos)
    assert layer <= stats_layer.LAYER_BUDGET
    # and: with Summarize's own code and Powertools, under Lambda's 250 MiB
    (summarize,) = [
        fn for name, fn in _functions(synth).items() if name.startswith("OrchestrationSummarizeFn")
    ]
    code = synth.outdir / f"asset.{summarize['Code']['S3Key'].removesuffix('.zip')}"
    own = sum(p.stat().st_size for p in code.rglob("*") if p.is_file())
    assert layer + own + POWERTOOLS_ALLOWANCE < stats_layer.LAMBDA_UNZIPPED_LIMIT, (
        f"layer {layer / 2**20:.0f} MiB + function {own / 2**20:.0f} MiB"
    )


def test_layer_zip_is_reproducible(tmp_path: Path) -> None:
    # the same files give the same bytes (the asset hash does not change on a rebuild)
    src = tmp_path / "src" / "python" / "pkg"
    src.mkdir(parents=True)
    (src / "__init__.py").write_text("x = 1\n")
    (src / "_ext.so").write_bytes(b"\x7fELF")
    os.chmod(src / "_ext.so", 0o755)
    first, second = tmp_path / "a.zip", tmp_path / "b.zip"
    stats_layer.write_zip(tmp_path / "src", first)
    os.utime(src / "__init__.py", (0, 0))  # a rebuild's new mtimes
    stats_layer.write_zip(tmp_path / "src", second)
    assert first.read_bytes() == second.read_bytes()
    with zipfile.ZipFile(first) as z:
        assert z.getinfo("python/pkg/_ext.so").external_attr >> 16 == 0o100755


def test_synth_without_the_layer_names_the_command_that_builds_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(stats_layer, "LAYER_ZIP", tmp_path / "stats.zip")
    with pytest.raises(stats_layer.LayerMissing, match=r"stats\.zip: .*run `make layer`"):
        stats_layer.layer_zip()


def test_trimmed_numpy_and_scipy_still_run_the_repeat_noise_test(tmp_path: Path) -> None:
    # given: the venv's numpy and scipy (the same pins, built for this Python) trimmed by
    # the layer's rules (the layer's own cp314 binaries cannot load in this Python)
    import numpy
    import scipy

    site = tmp_path / "python"
    for mod in (numpy, scipy):
        src = Path(mod.__file__).parent  # type: ignore[arg-type]
        for extra in (src, src.with_name(src.name + ".libs")):
            if extra.is_dir():
                shutil.copytree(extra, site / extra.name, copy_function=_link_or_copy)
    stats_layer.trim(site)
    assert not list(site.rglob("tests"))
    # when: a Python that sees only that tree (no site-packages) runs the report's test
    code = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "from scipy import stats\n"
        "p = stats.kruskal([1.0, 2.0, 3.0, 4.0, 5.0], [11.0, 12.0, 13.0, 14.0, 15.0]).pvalue\n"
        "q = stats.false_discovery_control([p, 0.5])\n"
        "assert stats.__file__.startswith(sys.argv[1]), stats.__file__\n"
        "print(repr(float(p)), len(q))\n"
    )
    done = subprocess.run(
        [sys.executable, "-S", "-c", code, str(site)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    # then: it imports and computes what the full install computes
    from scipy import stats

    want = stats.kruskal([1.0, 2.0, 3.0, 4.0, 5.0], [11.0, 12.0, 13.0, 14.0, 15.0]).pvalue
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == [repr(float(want)), "2"]


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _tiny_wheel(folder: Path) -> Path:
    """A wheel tagged as numpy's are (cp314 manylinux_2_28 x86_64): a package with a
    test suite, a bytecode cache and a console script, all of which the layer drops."""
    import base64
    import hashlib

    files = {
        "tiny/__init__.py": b"VALUE = 42\n",
        "tiny/tests/__init__.py": b"",
        "tiny/tests/test_tiny.py": b"def test(): pass\n",
        "tiny/__pycache__/__init__.cpython-314.pyc": b"\0" * 16,
        "tiny-1.0.data/scripts/tiny-cli": b"#!python\nprint(1)\n",
        "tiny-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: tiny\nVersion: 1.0\n",
        "tiny-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\n"
        b"Tag: cp314-cp314-manylinux_2_28_x86_64\n",
    }
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append("tiny-1.0.dist-info/RECORD,,")
    files["tiny-1.0.dist-info/RECORD"] = ("\n".join(record) + "\n").encode()
    wheel = folder / "tiny-1.0-cp314-cp314-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    return wheel


@pytest.mark.parametrize(
    ("case", "budget", "error"),
    [
        ("built", stats_layer.LAYER_BUDGET, None),
        ("wrong-hash", stats_layer.LAYER_BUDGET, "pip exited 1"),
        ("over-budget", 10, "MiB budget of Lambda's 250 MiB"),
    ],
)
def test_layer_build_is_trimmed_and_atomic(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    case: str,
    budget: int,
    error: str | None,
) -> None:
    # given: a local wheel index (pip offline) and a pinned requirements file
    import hashlib

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    wheel = _tiny_wheel(wheels)
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    if case == "wrong-hash":
        digest = "0" * 64
    req = tmp_path / "req.txt"
    req.write_text(f"tiny==1.0 --hash=sha256:{digest}\n")
    dest = tmp_path / "out" / "stats.zip"
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    monkeypatch.setattr(stats_layer, "REQUIREMENTS", req)
    monkeypatch.setattr(stats_layer, "LAYER_ZIP", dest)
    monkeypatch.setattr(stats_layer, "LAYER_BUDGET", budget)
    monkeypatch.setattr(stats_layer.build, "__defaults__", (dest, req))
    # when
    status = stats_layer.main(["build"])
    # then: built, the zip holds the package without tests, caches or scripts
    left = sorted(p.name for p in dest.parent.iterdir())
    if error is None:
        assert status == 0 and left == ["stats.zip"]
        with zipfile.ZipFile(dest) as z:
            names = sorted(z.namelist())
        assert [n for n in names if ".dist-info/" not in n] == ["python/tiny/__init__.py"]
        assert "python/tiny-1.0.dist-info/WHEEL" in names
        return
    # or refused: one line naming the cause, and nothing left behind
    assert status == 1 and left == []
    err = capsys.readouterr().err.strip().splitlines()
    assert error in err[-1]
