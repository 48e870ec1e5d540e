"""What the app presets need from the host, and the release a plan picks or refuses."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from iofleet.aws import ec2
from iofleet.plan import apps, hosts
from iofleet.plan.apps import AppSpec, HostNeeds, get_preset
from iofleet.plan.matrix import Matrix, build_plan, validate_matrix_dict

YOCTO = "yocto-core-image-sato-sdk"
# Yocto Project Reference Manual 4.0 (kirkstone), System Requirements, "Required
# Packages for the Build Host" > "Ubuntu and Debian": UBUNTU_DEBIAN_HOST_PACKAGES_ESSENTIAL
# of yocto-docs' kirkstone documentation/poky.yaml.in, copied here by hand so a change
# to the preset is a visible change to this list.
KIRKSTONE_UBUNTU_ESSENTIAL = (
    "build-essential chrpath cpio debianutils diffstat file gawk gcc git iputils-ping libacl1 "
    "liblz4-tool locales python3 python3-git python3-jinja2 python3-pexpect python3-pip "
    "python3-subunit socat texinfo unzip wget xz-utils zstd"
).split()


def test_yocto_preset_declares_the_kirkstone_host_packages_and_release() -> None:
    host = get_preset(YOCTO).host
    assert list(host.packages) == KIRKSTONE_UBUNTU_ESSENTIAL
    assert host.releases == ("22.04",)
    assert host.locales == ("en_US.UTF-8",)
    assert host.distro == "ubuntu"


def test_c_build_needs_a_compiler_on_any_release() -> None:
    host = get_preset("c-build").host
    assert host.packages == ("build-essential",) and host.releases == ()


def test_every_release_the_plan_can_pick_has_an_ami_parameter_and_a_matrix_value() -> None:
    assert set(ec2.UBUNTU_SSM_PARAMETERS) == set(hosts.UBUNTU_RELEASES)
    literal = Matrix.model_fields["ubuntu_release"].annotation
    assert set(getattr(literal, "__args__", ())[0].__args__) == set(hosts.UBUNTU_RELEASES)


# --------------------------------------------------------------------------- apps.json


@pytest.mark.parametrize(
    ("host", "message"),
    [
        ("ubuntu", "expected an object"),
        ({"distro": "fedora"}, "distro: one of ubuntu"),
        ({"packages": "gcc"}, "expected a list of strings"),
        ({"packages": ["gcc; rm -rf /"]}, "is not a package name"),
        ({"packages": ["Gcc"]}, "is not a package name"),
        ({"packages": ["$(id)"]}, "is not a package name"),
        ({"packages": ["gcc", "gcc"]}, "listed twice"),
        ({"releases": ["jammy"]}, "is not a release"),
        ({"locales": ["en_US"]}, "is not a UTF-8 locale"),
        ({"locales": ["en_US.UTF-8 UTF-8"]}, "is not a UTF-8 locale"),
        ({"package": ["gcc"]}, "unknown keys package"),
    ],
)
def test_a_preset_host_section_that_could_break_the_bootstrap_is_refused(
    host: object, message: str
) -> None:
    with pytest.raises(ValueError, match="apps.json: p.host") as err:
        apps._host(host, "p.host")
    assert message in str(err.value)


def test_a_preset_without_host_needs_nothing() -> None:
    assert apps._host(None, "p.host") == HostNeeds()
    assert apps._host({"_source": "why", "packages": ["gcc"]}, "p.host").packages == ("gcc",)


# --------------------------------------------------------------------------- resolve


def _spec(name: str, releases: tuple[str, ...] = (), packages: tuple[str, ...] = ()) -> AppSpec:
    return AppSpec(name, "", None, "true", False, True, HostNeeds("ubuntu", releases, packages))


FAKE = {
    "old": _spec("old", ("22.04",), ("gcc", "fio")),
    "new": _spec("new", ("24.04",), ("gcc", "clang")),
    "both": _spec("both", ("24.04", "22.04"), ("make",)),
    "gone": _spec("gone", ("18.04",)),
    "any": _spec("any", (), ("gcc",)),
}


def _resolve(names: list[str], release: str | None = None, ami: str | None = None) -> Any:
    return hosts.resolve(list(enumerate(names)), release, ami, lookup=FAKE.__getitem__)


def test_presets_that_share_no_release_are_refused_at_the_later_one() -> None:
    _, problems = _resolve(["any", "old", "new"])
    assert problems == [
        (
            ("workloads", 2, "app"),
            "preset 'new' supports Ubuntu 24.04 only, but workloads[1] ('old') supports "
            "Ubuntu 22.04 only: all presets of a cell run on one release",
        )
    ]


def test_a_preset_on_no_release_the_stack_launches_is_refused() -> None:
    _, problems = _resolve(["gone"])
    assert problems == [
        (
            ("workloads", 0, "app"),
            "preset 'gone' supports Ubuntu 18.04, none of which the stack launches "
            "(Ubuntu 22.04 and Ubuntu 24.04)",
        )
    ]


def test_the_plan_picks_the_default_when_every_preset_supports_it_else_theirs() -> None:
    assert _resolve(["any", "both"])[0].release == "24.04"
    assert _resolve(["both", "old"])[0].release == "22.04"
    assert _resolve([])[0].release == hosts.DEFAULT_RELEASE


def test_packages_are_the_union_each_once_without_the_base_packages() -> None:
    plan, problems = _resolve(["old", "any", "both"])
    assert problems == []
    assert plan.packages == ("gcc", "make")  # fio is a base package
    assert plan.install_packages().count("gcc") == 1
    assert plan.install_packages()[: len(hosts.BASE_PACKAGES)] == hosts.BASE_PACKAGES


def test_an_ami_of_unstated_release_has_no_release_unless_a_preset_needs_one() -> None:
    plan, problems = _resolve(["any"], ami="ami-0123456789abcdef0")
    assert problems == [] and plan.release is None
    plan, problems = _resolve(["old"], release="22.04", ami="ami-0123456789abcdef0")
    assert problems == [] and plan.release == "22.04"


def test_host_plan_round_trips_through_the_manifest_and_defaults_for_old_manifests() -> None:
    plan, _ = _resolve(["old", "both"])
    assert hosts.HostPlan.from_dict(json.loads(json.dumps(plan.to_dict()))) == plan
    assert hosts.HostPlan.from_dict(None) == hosts.HostPlan(release="24.04")


# --------------------------------------------------------------------------- plan probes

BASE: dict[str, Any] = {
    "name": "host-probe",
    "instance_types": ["m6i.4xlarge"],
    "storage": [{"type": "ebs", "label": "gp3", "volume_type": "gp3", "size_gib": 100}],
    "workloads": [{"app": YOCTO}],
    "parallelism": [1],
}
AMI = "ami-0123456789abcdef0"

# (id, matrix changes, the one error line; None = accepted, then the release it runs)
PROBES: list[tuple[str, dict[str, Any], str | None, str | None]] = [
    (
        "yocto-on-24.04",
        {"ubuntu_release": "24.04"},
        f"ubuntu_release: preset '{YOCTO}' (workloads[0]) supports Ubuntu 22.04 only, "
        "not Ubuntu 24.04",
        None,
    ),
    (
        "yocto-on-an-ami-of-unstated-release",
        {"ami_id": AMI},
        f"ami_id: preset '{YOCTO}' (workloads[0]) supports Ubuntu 22.04 only and the plan "
        f"cannot tell which release {AMI} runs: set ubuntu_release to the image's release "
        "(the bootstrap checks it) or drop ami_id",
        None,
    ),
    (
        "yocto-after-c-build-on-24.04",
        {"workloads": [{"app": "c-build"}, {"app": YOCTO}], "ubuntu_release": "24.04"},
        f"ubuntu_release: preset '{YOCTO}' (workloads[1]) supports Ubuntu 22.04 only, "
        "not Ubuntu 24.04",
        None,
    ),
    (
        "release-the-stack-cannot-launch",
        {"ubuntu_release": "20.04"},
        "ubuntu_release: must be one of '22.04' or '24.04', got '20.04'",
        None,
    ),
    (
        "release-as-a-number",
        {"ubuntu_release": 22.04},
        "ubuntu_release: must be one of '22.04' or '24.04', got 22.04",
        None,
    ),
    ("yocto-default", {}, None, "22.04"),
    ("yocto-on-22.04", {"ubuntu_release": "22.04"}, None, "22.04"),
    ("yocto-on-an-ami-said-to-be-22.04", {"ami_id": AMI, "ubuntu_release": "22.04"}, None, "22.04"),
    ("yocto-and-c-build", {"workloads": [{"app": "c-build"}, {"app": YOCTO}]}, None, "22.04"),
    ("c-build-default", {"workloads": [{"app": "c-build"}]}, None, "24.04"),
    (
        "c-build-on-22.04",
        {"workloads": [{"app": "c-build"}], "ubuntu_release": "22.04"},
        None,
        "22.04",
    ),
    ("fio-on-an-ami", {"workloads": [{"fio": "seq-read-1m-qd32"}], "ami_id": AMI}, None, None),
]


@pytest.mark.parametrize(
    ("changes", "error", "release"),
    [p[1:] for p in PROBES],
    ids=[p[0] for p in PROBES],
)
def test_plan_probe(
    tmp_path: Path, changes: dict[str, Any], error: str | None, release: str | None
) -> None:
    # given a matrix file in an otherwise empty directory
    matrix = {**BASE, **changes}
    path = tmp_path / "matrix.json"
    path.write_text(json.dumps(matrix))
    # when `iofleet plan --target aws` runs as a user runs it
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "iofleet.cli",
            "plan",
            str(path),
            "--target",
            "aws",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    if error is None:
        # then it plans, with the release the cells' instances will run
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["host"]["release"] == release
    else:
        # then one line FILE: PATH: message, exit 2, nothing created
        assert out.returncode == 2, out.stdout + out.stderr
        assert out.stderr.strip().splitlines() == [f"{path}: {error}"]
        assert out.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["matrix.json"]


def test_a_local_plan_ignores_the_release_setting() -> None:
    matrix = validate_matrix_dict(
        {
            **BASE,
            "storage": [{"type": "local", "label": "tmp", "path": "/tmp"}],
            "workloads": [{"app": "c-build"}],
            "ubuntu_release": "22.04",
        }
    )
    assert len(build_plan(matrix, target="local").cells) == 1


def test_the_plan_table_says_which_release_and_what_the_bootstrap_adds(tmp_path: Path) -> None:
    path = tmp_path / "matrix.json"
    path.write_text(json.dumps(BASE))
    out = subprocess.run(
        [sys.executable, "-m", "iofleet.cli", "plan", str(path), "--target", "aws"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == (
        f"host: ubuntu 22.04 (base packages, + 25 packages for {YOCTO} and locale "
        "en_US.UTF-8, installed before the start barrier)"
    )
