"""Loading modules without the cyclic garbage collector. Stdlib only.

Importing modules makes many objects and no garbage, and every collection walks the
young ones: 11-13 ms of `iofleet local`'s CPU before its first slot, 5-6 ms of an
agent's (decision 51). `collection_paused` turns collection off for a block of
imports and puts it back as it was, so a program that turned it off keeps it off.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collection_paused(freeze: bool = False) -> Iterator[None]:
    """No cyclic garbage collection in the block. `freeze`: what exists at its end is
    frozen (`gc.freeze`: never walked again, or the first collections after would walk
    it all); only for a process that is the command itself, not a program that
    embeds it. Collection then goes on as before, for a run that may last hours."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if freeze:
            gc.freeze()
        if collecting:
            gc.enable()
