"""The instance's operating system: which Ubuntu release a cell runs and what its
bootstrap installs, from the app presets' `host` needs (iofleet/plan/data/apps.json).

Stdlib only: the plan and launch Lambdas import this module.

Rules (checked by `plan` for AWS, PATH: message lines):

- every preset of a cell must support one common release (a preset that lists
  no releases runs on any release the stack launches);
- a matrix `ubuntu_release` must be one of them;
- with a matrix `ami_id` the plan cannot read the image's release, so a preset
  that limits its releases also needs `ubuntu_release` (the bootstrap then
  checks /etc/os-release against it before installing anything for the presets);
- otherwise the plan picks the release: the stack's default when every preset
  supports it, else the first release the presets list.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from iofleet.plan.apps import AppSpec, get_preset
from iofleet.quote import quote

# Releases the stack can launch: Canonical publishes one public SSM parameter per
# release and architecture (iofleet/aws/ec2.py), and the launch role may read
# exactly those (infra/constructs/orchestration.py).
UBUNTU_RELEASES = ("22.04", "24.04")
DEFAULT_RELEASE = "24.04"
# What every instance needs, whatever it runs (iofleet/aws/userdata.py).
BASE_PACKAGES = ("fio", "ioping", "xfsprogs", "nvme-cli", "nfs-common", "python3-boto3")

Loc = tuple[str | int, ...]
Problem = tuple[Loc, str]


@dataclass(frozen=True)
class HostPlan:
    """The operating system one cell's instances run and what the bootstrap adds."""

    distro: str = "ubuntu"
    release: str | None = DEFAULT_RELEASE  # None: a matrix ami_id of unstated release
    packages: tuple[str, ...] = ()  # beyond BASE_PACKAGES, each once, in preset order
    locales: tuple[str, ...] = ()
    presets: tuple[str, ...] = ()  # the presets that asked for them

    def to_dict(self) -> dict[str, Any]:
        return {
            "distro": self.distro,
            "release": self.release,
            "packages": list(self.packages),
            "locales": list(self.locales),
            "presets": list(self.presets),
        }

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any] | None) -> HostPlan:
        """A plan manifest's cell `host`; a manifest from before hosts: the default."""
        if not doc:
            return cls()
        return cls(
            distro=str(doc.get("distro") or "ubuntu"),
            release=doc.get("release"),
            packages=tuple(doc.get("packages") or ()),
            locales=tuple(doc.get("locales") or ()),
            presets=tuple(doc.get("presets") or ()),
        )

    def install_packages(self) -> tuple[str, ...]:
        """Every package the bootstrap installs, base first, each once."""
        return tuple(dict.fromkeys(BASE_PACKAGES + self.packages))


def _releases(spec: AppSpec) -> tuple[str, ...]:
    return spec.host.releases or UBUNTU_RELEASES


def _ubuntu(releases: Iterable[str]) -> str:
    return " and ".join(f"Ubuntu {r}" for r in releases)


def resolve(
    presets: Sequence[tuple[int, str]],
    release: str | None = None,
    ami_id: str | None = None,
    lookup: Callable[[str], AppSpec] = get_preset,
) -> tuple[HostPlan, list[Problem]]:
    """The host for a cell running these (workload index, preset name) apps.

    Unknown preset names are skipped (the matrix validation reports them).
    """
    specs: list[tuple[int, AppSpec]] = []
    for index, name in presets:
        try:
            specs.append((index, lookup(name)))
        except KeyError:
            continue
    problems: list[Problem] = []
    common = list(UBUNTU_RELEASES)
    first: tuple[int, AppSpec] | None = None  # the first preset that limits releases
    for index, spec in specs:
        if not spec.host.releases:
            continue
        ours = [r for r in common if r in spec.host.releases]
        if not ours:
            if first is None:
                message = (
                    f"preset {quote(spec.name)} supports {_ubuntu(spec.host.releases)}, "
                    f"none of which the stack launches ({_ubuntu(UBUNTU_RELEASES)})"
                )
            else:
                message = (
                    f"preset {quote(spec.name)} supports {_ubuntu(spec.host.releases)} only, but "
                    f"workloads[{first[0]}] ({quote(first[1].name)}) supports "
                    f"{_ubuntu(_releases(first[1]))} only: all presets of a cell run on one release"
                )
            problems.append((("workloads", index, "app"), message))
            continue
        common = ours
        if first is None:
            first = (index, spec)
    if problems:
        return HostPlan(), problems

    limited = first is not None
    if release is not None and release not in common:
        assert first is not None  # without a limiting preset every release is common
        problems.append(
            (
                ("ubuntu_release",),
                f"preset {quote(first[1].name)} (workloads[{first[0]}]) supports "
                f"{_ubuntu(common)} only, not Ubuntu {release}",
            )
        )
    if ami_id is not None and release is None and limited:
        assert first is not None
        problems.append(
            (
                ("ami_id",),
                f"preset {quote(first[1].name)} (workloads[{first[0]}]) supports {_ubuntu(common)} "
                f"only and the plan cannot tell which release {ami_id} runs: set ubuntu_release "
                "to the image's release (the bootstrap checks it) or drop ami_id",
            )
        )
    if problems:
        return HostPlan(), problems

    if release is None and ami_id is None:
        release = DEFAULT_RELEASE if DEFAULT_RELEASE in common else common[0]
    packages = dict.fromkeys(p for _, s in specs for p in s.host.packages if p not in BASE_PACKAGES)
    locales = dict.fromkeys(loc for _, s in specs for loc in s.host.locales)
    asked = dict.fromkeys(s.name for _, s in specs if s.host.packages or s.host.locales)
    return (
        HostPlan(
            release=release,
            packages=tuple(packages),
            locales=tuple(locales),
            presets=tuple(asked),
        ),
        [],
    )


def describe(host: HostPlan) -> str:
    """One line for the plan table."""
    what = f"{host.distro} {host.release}" if host.release else "the matrix ami_id"
    extra = ""
    if host.packages:
        extra = f", + {len(host.packages)} packages for {', '.join(host.presets)}"
        if host.locales:
            extra += f" and locale {', '.join(host.locales)}"
    return f"host: {what} (base packages{extra}, installed before the start barrier)"


def for_matrix(matrix: Any) -> tuple[HostPlan, list[Problem]]:
    """`resolve` for a validated matrix (every cell runs every workload)."""
    presets = [
        (index, w.app)
        for index, w in enumerate(matrix.workloads)
        if isinstance(getattr(w, "app", None), str)
    ]
    return resolve(presets, getattr(matrix, "ubuntu_release", None), matrix.ami_id)
