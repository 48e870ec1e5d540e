"""Speed fixes and a race fix for moto 5.2.5's SQS, installed in the moto server process (hooks.install()).

moto's `ReceiveMessage` checks each message it hands out against the queue's
retention period (`SQSBackend.is_message_valid_based_on_retention_period`), reading
the period with `get_queue_attributes(queue, ["MessageRetentionPeriod"])`, and
`get_queue_attributes` with named attributes builds the queue's whole attribute map
three times per name. Each build counts the queue's visible, in-flight and delayed
messages (a `datetime` per message), so receiving from a queue of n messages cost
O(n) per message handed out: with the 2,000-object burst of
tests/cloud/test_faults.py queued, about 60 % of the moto server's CPU went there
(py-spy), and the burst's uploads and ingest waited on it.

A race, found once those were fast: `Queue.delete_message` rebuilds the queue's
message list (`self._messages = [kept messages]`) without the lock `add_message`
appends under. With the local event source mapping's four pollers deleting
batches while S3 notifications arrive, one rebuild could put back a batch another
poller had just deleted (seen: ten messages in flight again, visible after the
queue's 360 s visibility timeout, so the burst test waited for them) or drop a
message added meanwhile (a raw object never ingested). SQS itself loses and
revives nothing. The patch runs moto's own `delete_message` under that lock.

The speed patches give the values moto gives, computed once:
- the retention check reads `Queue.message_retention_period` (the attribute behind
  `MessageRetentionPeriod`) and keeps moto's rule: a message is valid while
  `sent_timestamp / 1000 + retention period` is after now;
- `get_queue_attributes` validates the names as moto does (InvalidAttributeName),
  then builds the attribute map once and answers the names asked for whose value is
  not None (all of them for `All`).
Nothing else of SQS changes (the speed patches also change no value).
"""

from __future__ import annotations

from typing import Any


def install() -> None:
    from moto.core.utils import unix_time
    from moto.sqs.exceptions import InvalidAttributeName
    from moto.sqs.models import Queue, SQSBackend

    if getattr(SQSBackend, "_iofleet_attributes_once", False):
        return

    def is_message_valid_based_on_retention_period(
        self: Any, queue_name: str, message: Any
    ) -> bool:
        retention_period = self.get_queue(queue_name).message_retention_period
        retain_until = retention_period + message.sent_timestamp / 1000
        return bool(retain_until > unix_time())

    def get_queue_attributes(
        self: Any, queue_name: str, attribute_names: list[str]
    ) -> dict[str, Any]:
        queue = self.get_queue(queue_name)
        if not attribute_names:
            return {}
        valid = ["All", *queue.BASE_ATTRIBUTES, *queue.FIFO_ATTRIBUTES, *queue.KMS_ATTRIBUTES]
        invalid = next((name for name in attribute_names if name not in valid), None)
        if invalid or invalid == "":
            raise InvalidAttributeName(invalid)
        attributes: dict[str, Any] = queue.attributes  # built once
        if "All" in attribute_names:
            return attributes
        return {
            name: attributes[name]
            for name in attribute_names
            if name in attributes and attributes[name] is not None
        }

    delete_message = Queue.delete_message

    def delete_message_locked(self: Any, receipt_handle: str) -> None:
        with self._messages_lock:  # the Condition (an RLock) add_message appends under
            delete_message(self, receipt_handle)

    Queue.delete_message = delete_message_locked  # type: ignore[method-assign]
    SQSBackend.is_message_valid_based_on_retention_period = (  # type: ignore[method-assign]
        is_message_valid_based_on_retention_period
    )
    SQSBackend.get_queue_attributes = get_queue_attributes  # type: ignore[method-assign]
    SQSBackend._iofleet_attributes_once = True  # type: ignore[attr-defined]
