"""Object keys, item keys and tags: the deterministic names every AWS piece agrees on.

Stdlib only (used by the agent wrapper on EC2 and by every Lambda).
"""

from __future__ import annotations

import os
import re

RAW_PREFIX = "raw/"
CURATED_PREFIX = "curated/"
CONTROL_PREFIX = "control/"
REPORTS_PREFIX = "reports/"
ATHENA_PREFIX = "athena-results/"

TAG_RUN = "iofleet:run-id"
TAG_CELL = "iofleet:cell"
TAG_EXPIRES = "iofleet:expires-at"
TAG_SLOT = "iofleet:slot"
# which stack launched it: cleanup and the janitor touch only their own stack's resources,
# and their IAM policies are conditioned on this tag (infra/constructs/orchestration.py)
TAG_STACK = "iofleet:stack"
STACK_ENV = "IOFLEET_STACK"
DEFAULT_STACK = "IofleetStack"


def stack_name() -> str:
    """This deployment's stack name (the Lambdas' IOFLEET_STACK), the TAG_STACK value."""
    return os.environ.get(STACK_ENV) or DEFAULT_STACK


# `<name>-<YYYYmmddtHHMMSSz>` (older ids) or `<name>-<stamp>-<hex>` (unique per run)
_STAMP = re.compile(r"(\d{4})(\d{2})(\d{2})t\d{6}z?(?:-[0-9a-f]{1,16})?$", re.IGNORECASE)


def run_date(run_id: str) -> str:
    """The `dt` partition (YYYY-MM-DD) of a run, derived from the stamp in its id
    (at its end, or before the unique hex suffix).

    Derived from the id (not from the clock) so that re-ingesting a raw object
    always lands in the same curated key. Ids without a stamp go to 1970-01-01.
    """
    m = _STAMP.search(run_id)
    if not m:
        return "1970-01-01"
    return f"{m.group(1)}-{m.group(2)}-{m.group(3)}"


def plan_key(run_id: str) -> str:
    return f"{CONTROL_PREFIX}{run_id}/plan.json"


# An instance's identity in object keys: the `aws:userid` of its role session,
# `<role id>:<instance id>` (`AROA...:i-0123...`), the value IAM substitutes for the policy
# variable `${aws:userid}` and STS GetCallerIdentity returns as `UserId`. The instance role may
# read only `control/*/${aws:userid}.json` and write only `raw/${aws:userid}/*`
# (infra/constructs/fleet.py; docs/decisions.md, "An instance reads its own payload ...").
_OWNER = re.compile(r"^[A-Z0-9]{4,128}:(?P<instance>i-[0-9a-f]{8,32})$")


def owner_of(role_id: str, instance_id: str) -> str:
    """The `aws:userid` of an instance-role session on `instance_id`."""
    return f"{role_id}:{instance_id}"


def owner_instance(owner: str) -> str | None:
    """The instance id of an owner segment, None if it is not one."""
    m = _OWNER.match(owner)
    return m.group("instance") if m else None


def payload_dir(run_id: str, cell_id: str, name: str) -> str:
    """The folder of an instance's payload (slot-0003 or populate); the user-data names it,
    the instance adds its own `aws:userid` (`payload_key`)."""
    return f"{CONTROL_PREFIX}{run_id}/{cell_id}/{name}/"


def payload_key(run_id: str, cell_id: str, name: str, owner: str) -> str:
    """Where the launcher writes an instance's payload, once RunInstances named the instance."""
    return f"{payload_dir(run_id, cell_id, name)}{owner}.json"


def raw_key(relpath: str, owner: str | None = None) -> str:
    """A raw object's key: `raw/<owner>/<relpath>` from an instance, `raw/<relpath>` from
    iofleet's own Lambdas (run.json), which no instance can write."""
    relpath = relpath.lstrip("/")
    return f"{RAW_PREFIX}{owner}/{relpath}" if owner else RAW_PREFIX + relpath


def split_raw_key(key: str) -> tuple[str | None, str]:
    """(owner or None, relpath) of a key under `raw/`."""
    rest = key[len(RAW_PREFIX) :] if key.startswith(RAW_PREFIX) else key
    first, sep, tail = rest.partition("/")
    if sep and owner_instance(first):
        return first, tail
    return None, rest


def curated_key(table: str, run_id: str, relpath: str) -> str:
    """Deterministic curated object for one raw artifact and one table.

    Same raw object -> same key, so a redelivery overwrites instead of adding rows.
    """
    stem = relpath[:-5] if relpath.endswith(".json") else relpath
    return f"{CURATED_PREFIX}{table}/dt={run_date(run_id)}/{stem}.jsonl"


def report_keys(run_id: str) -> tuple[str, str]:
    return f"{REPORTS_PREFIX}{run_id}/report.csv", f"{REPORTS_PREFIX}{run_id}/report.json"


# DynamoDB single table: pk / sk strings.
def run_item_key(run_id: str) -> dict[str, str]:
    return {"pk": f"run#{run_id}", "sk": "run"}


def cell_item_key(run_id: str, cell_id: str) -> dict[str, str]:
    return {"pk": f"run#{run_id}", "sk": f"cell#{cell_id}"}


def slot_item_key(run_id: str, cell_id: str, slot_index: int) -> dict[str, str]:
    return {"pk": f"run#{run_id}", "sk": f"slot#{cell_id}#{slot_index:04d}"}


BARRIER_PK_PREFIX = "barrier#"


def barrier_item_key(run_id: str, cell_id: str) -> dict[str, str]:
    """Barrier items live in their own key space: the instance role may only
    touch keys starting with `barrier#` (IAM `dynamodb:LeadingKeys`)."""
    return {"pk": f"{BARRIER_PK_PREFIX}{run_id}#{cell_id}", "sk": "barrier"}


def slot_name(slot_index: int) -> str:
    return f"slot-{slot_index:04d}"
