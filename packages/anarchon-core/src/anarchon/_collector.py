"""Holding back Python's cyclic garbage collector while due runs are started.

Starting a thousand runs allocates tens of thousands of objects in a few
milliseconds, so the collector ran several times inside that window, and
once in a while a full collection that walks the whole heap (tens of ms in
a process that keeps history in memory). Every such pause delayed every run
not yet started. Collection is not skipped, only moved: it resumes as soon
as the runs have started and catches up on the next allocation.

The collector is process-wide, so deferrals nest across schedulers and
threads, and an application that disabled it keeps it disabled.
"""

from __future__ import annotations

import gc
import threading
from types import TracebackType

__all__ = ["CollectionDeferred"]

_lock = threading.Lock()
_depth = 0
_resume = False


class CollectionDeferred:
    """No automatic cyclic collection from ``with`` until :meth:`end` or the block's end.

    Reference counting still frees what is not in a cycle. Hold it only
    around work that does not wait for I/O, so a slow or stalled backend never
    holds the collector off.
    """

    def __init__(self) -> None:
        self._held = False

    def __enter__(self) -> CollectionDeferred:
        global _depth, _resume
        with _lock:
            if _depth == 0:
                _resume = gc.isenabled()
                if _resume:
                    gc.disable()
            _depth += 1
        self._held = True
        return self

    def end(self) -> None:
        global _depth
        if not self._held:
            return
        self._held = False
        with _lock:
            _depth -= 1
            if _depth == 0 and _resume:
                gc.enable()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.end()
