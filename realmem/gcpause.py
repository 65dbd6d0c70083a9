"""Pause the cyclic garbage collector during bulk work.

Replay's fold and a scan of thousands of files build large, acyclic structures (a memory per
event or file, each with its fields and lists).  Every few hundred allocations the collector
walks the young objects, and every so often all of them, looking for cycles that are not
there: a large part of replay's fold in a large store.  Reference counting still frees everything
as usual; only the search for cycles waits until the outermost pause ends.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic collection inside; nested and concurrent pauses (the rpc child's threads)
    end together: the collector comes back, if it was on, when the last one leaves."""
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
