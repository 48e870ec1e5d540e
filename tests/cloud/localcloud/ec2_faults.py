"""The EC2 API's own failures, injected into moto's RunInstances (moto never throttles and
never runs out of capacity).

Installed in the moto server process by `hooks.install()` (rules from the hooks' config,
`ec2_faults`), and by tests/unit/lambdas on the in-process moto server. Rules:

    {"throttle_fraction": 0.3,          # this share of calls answer RequestLimitExceeded
     "throttle_first": 2,               # ... or the first N calls (deterministic)
     "answers": ["InternalError"],      # the first calls answer these codes, in order
     "seed": 7,                         # the fraction's random sequence
     "no_capacity_zones": ["us-east-1b"],   # InsufficientInstanceCapacity in these AZs
     "unsupported_zones": ["us-east-1c"]}   # Unsupported (the type is not offered there)

Also EC2's idempotency, which moto lacks (it keeps the ClientToken and ignores it): a
call repeating an earlier call's ClientToken gets that call's reservation back instead
of new instances (EC2 checks the request rate first: such a call can still be throttled,
but never runs out of capacity). Calls without a token are left alone.

Each injected fault is handed to `log` as {"code", "subnet_id", "zone", "client_token"}
so a test can match every fault with the retry the launcher recorded for it.
Throttling is checked before capacity, as EC2 checks the request rate before it looks
for capacity. The errors are moto's own `EC2ClientError`, serialized like any EC2 error
(`<Response><Errors><Error><Code>`), so botocore raises the same ClientError as on AWS
(AWS answers RequestLimitExceeded with HTTP 503, moto with 400; botocore and the launcher
go by the code).
"""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Callable
from typing import Any

THROTTLE_MESSAGE = "Request limit exceeded."
MOTO_NO_TOKEN = "ABCDE"  # moto's stand-in when a call has no ClientToken


class Faults:
    """The state of the current rule set (a new rule set starts afresh): how many calls
    it has seen, and its random sequence."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.rules = ""
        self.calls = 0
        self.rng = random.Random()  # noqa: S311 - a test's fault sequence
        self.reservations: dict[str, Any] = {}  # ClientToken -> moto reservation

    def call(self, rules: dict[str, Any]) -> tuple[str, str] | None:
        """Count this call; (code, message) when the rules throttle it or script its answer."""
        with self.lock:
            current = json.dumps(rules, sort_keys=True)
            if current != self.rules:
                self.rules, self.calls = current, 0
                self.rng = random.Random(rules.get("seed"))  # noqa: S311
            self.calls += 1
            answers = rules.get("answers", [])
            if self.calls <= len(answers):
                return answers[self.calls - 1], f"scripted answer {answers[self.calls - 1]}"
            if self.calls <= int(rules.get("throttle_first", 0)):
                return "RequestLimitExceeded", THROTTLE_MESSAGE
            if self.rng.random() < float(rules.get("throttle_fraction", 0)):
                return "RequestLimitExceeded", THROTTLE_MESSAGE
            return None


def throttle(rules: dict[str, Any], faults: Faults) -> tuple[str, str] | None:
    """(code, message) when this call is throttled (or answered as scripted), or None."""
    return faults.call(rules)


def capacity(rules: dict[str, Any], *, zone: str, instance_type: str) -> tuple[str, str] | None:
    """(code, message) when this call's AZ cannot take the instance, or None."""
    if zone in rules.get("no_capacity_zones", []):
        return (
            "InsufficientInstanceCapacity",
            f"We currently do not have sufficient {instance_type} capacity in the "
            f"Availability Zone you requested ({zone}). Our system will be working on "
            "provisioning additional capacity.",
        )
    if zone in rules.get("unsupported_zones", []):
        return (
            "Unsupported",
            f"Your requested instance type ({instance_type}) is not supported in your "
            f"requested Availability Zone ({zone}).",
        )
    return None


def wrap(
    original: Any,
    rules_of: Callable[[], dict[str, Any] | None],
    log: Callable[[dict[str, Any]], None],
    faults: Faults | None = None,
) -> Any:
    """moto's `InstanceBackend.run_instances`, failing as the rules say before it launches."""
    from moto.ec2.exceptions import EC2ClientError

    state = faults or Faults()

    def run_instances(
        self: Any,
        image_id: str,
        count: int,
        user_data: Any,
        security_group_names: Any,
        **kwargs: Any,
    ) -> Any:
        rules = rules_of() or {}
        subnet_id = kwargs.get("subnet_id") or ""
        zone = self.get_subnet(subnet_id).availability_zone if subnet_id and rules else ""
        token = kwargs.get("client_token")
        if token == MOTO_NO_TOKEN:
            token = None

        def fail(fault: tuple[str, str]) -> None:
            log({"code": fault[0], "subnet_id": subnet_id, "zone": zone, "client_token": token})
            raise EC2ClientError(*fault)

        if rules and (fault := throttle(rules, state)):
            fail(fault)
        with state.lock:
            earlier = state.reservations.get(token) if token else None
        if earlier is not None:  # EC2's idempotency: the same token, the same instances
            return earlier
        if rules and (
            fault := capacity(rules, zone=zone, instance_type=kwargs.get("instance_type", ""))
        ):
            fail(fault)
        reservation = original(self, image_id, count, user_data, security_group_names, **kwargs)
        if token:
            with state.lock:
                state.reservations[token] = reservation
        return reservation

    return run_instances
