"""The cyclic garbage collector off for a burst of allocation (one helper for every hot path).

Python's cyclic collector runs every 700 net allocations and walks the young objects, and
now and then every live object: a bulk import's validation, a batch append's rows and a
benchmark run's kept results allocate many small objects and no lasting reference cycles, so
those walks are pure cost (most of validation's CPU; ~14% of a batch append's; a pause inside
some request's timing in a benchmark). Reference counting still frees everything; the
collector runs again afterwards.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def no_cyclic_gc(*, freeze: bool = False) -> Iterator[None]:
    """The collector off inside the block; back on after it unless the caller had it off.

    ``freeze``: also move every object alive before the block out of the collector's sight
    (``gc.freeze``) until it ends, so a collection that does run (another thread's
    ``gc.collect``) does not walk them.
    """
    enabled = gc.isenabled()
    if freeze:
        gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
        if freeze:
            gc.unfreeze()
