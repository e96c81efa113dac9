"""Holding back Python's cyclic garbage collector while due runs are started.

Starting a thousand runs allocates tens of thousands of objects in a few
milliseconds, so the collector ran several times inside that window, and
once in a while a full collection that walks the whole heap (tens of ms in
a process that keeps history in memory). Every such pause delayed every run
not yet started. Collection is not skipped, only moved: it resumes as soon
as the runs have started and catches up on the next allocation.

The collector is process-wide, so deferrals nest across schedulers and
threads, and an application that disabled it keeps it disabled. However
deferrals overlap, the collector is never held off for much more than
:data:`MAX_HELD_S` in a row: a deferral asked for after that is a no-op, so
the ones in force run out and collection resumes.
"""

from __future__ import annotations

import gc
import threading
import time
from types import TracebackType

__all__ = ["CollectionDeferred"]

#: After the collector has been held this long in a row, new deferrals are refused until it ran.
MAX_HELD_S = 2.0

_lock = threading.Lock()
_depth = 0
_resume = False
#: When (monotonic) the current run of deferrals began.
_since = 0.0


class CollectionDeferred:
    """No automatic cyclic collection from ``with`` until :meth:`end` or the block's end.

    Reference counting still frees what is not in a cycle. Hold it around
    work that does not wait for I/O, or end it with a timer: a slow or stalled
    backend must never hold the collector off.
    """

    def __init__(self) -> None:
        self._held = False

    def __enter__(self) -> CollectionDeferred:
        global _depth, _resume, _since
        with _lock:
            if _depth == 0:
                _resume = gc.isenabled()
                _since = time.monotonic()
                if _resume:
                    gc.disable()
            elif time.monotonic() - _since > MAX_HELD_S:
                return self  # held long enough: let the deferrals in force run out
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
