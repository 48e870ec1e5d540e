"""App presets: data file loading and the commands they render."""

from __future__ import annotations

import re
import subprocess

import pytest

from iofleet.plan.apps import get_preset, preset_names

YOCTO = "yocto-core-image-sato-sdk"


def _inner_script(command: str) -> str:
    """The script handed to `as_builder '...'` (the part bitbake runs in)."""
    match = re.search(r"^as_builder '\n(.*?)^'$", command, flags=re.S | re.M)
    assert match, "no as_builder block"
    return match.group(1)


def test_preset_names_include_yocto_and_c_build() -> None:
    assert {YOCTO, "c-build"} <= set(preset_names())


def test_unknown_preset_error_lists_known_names() -> None:
    with pytest.raises(KeyError, match="c-build"):
        get_preset("no-such-app")


def test_yocto_populate_clones_kirkstone_and_fetches_into_shared_cache() -> None:
    populate = get_preset(YOCTO).populate
    assert populate is not None
    inner = _inner_script(populate)
    assert "git clone --depth 1 --branch kirkstone https://git.yoctoproject.org/poky poky" in inner
    assert 'DL_DIR = "$IOFLEET_SHARED/downloads"' in inner
    assert 'BB_GENERATE_MIRROR_TARBALLS = "1"' in inner
    assert inner.rstrip().endswith("bitbake core-image-sato-sdk --runall fetch")


def test_yocto_run_builds_offline_from_the_shared_cache() -> None:
    inner = _inner_script(get_preset(YOCTO).run)
    assert 'BB_NO_NETWORK = "1"' in inner
    assert 'INHERIT += "own-mirrors"' in inner
    assert 'SOURCE_MIRROR_URL = "file://$IOFLEET_SHARED/downloads"' in inner
    assert '--branch kirkstone "$IOFLEET_SHARED/poky"' in inner  # local clone, no network
    assert "https://" not in inner
    assert inner.rstrip().endswith("bitbake core-image-sato-sdk")


def test_yocto_needs_network_and_aws() -> None:
    spec = get_preset(YOCTO)
    assert spec.needs_network is True
    assert spec.local_ok is False


def test_c_build_runs_locally_without_network_or_populate() -> None:
    spec = get_preset("c-build")
    assert (spec.local_ok, spec.needs_network, spec.populate) == (True, False, None)


@pytest.mark.parametrize("name", [YOCTO, "c-build"])
def test_preset_commands_are_valid_bash(name: str) -> None:
    spec = get_preset(name)
    scripts = [s for s in (spec.populate, spec.run) if s]
    scripts += [_inner_script(s) for s in scripts if "as_builder '" in s]
    for script in scripts:
        result = subprocess.run(["bash", "-n", "-c", script], capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
