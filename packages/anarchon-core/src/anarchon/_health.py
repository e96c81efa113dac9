"""Whether the backend answers: one warning per outage, and the recovery it starts.

Every part reports its backend calls here. The first failure logs once and,
on a lease backend, asks for a recovery (take-over and catch-up once the
backend answers again); a claim backend is simply marked healthy again by its
next good answer. Observers hear of every failure.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from .backend import Backend
from .errortext import error_text
from .observers import Observers

__all__ = ["BackendHealth", "error_text"]

log = logging.getLogger("anarchon.backend")


class BackendHealth:
    def __init__(self, backend: Backend, observers: Observers) -> None:
        self._backend = backend
        self._observers = observers
        self.degraded = False
        #: Called at the first failure of an outage on a lease backend (set while the scheduler runs).
        self.on_outage: Callable[[], None] | None = None

    def failed(self, operation: str, exc: BaseException) -> None:
        if not self.degraded:
            log.warning("backend %r: %s failed: %s; retrying with back-off", self._backend, operation, error_text(exc))
            self.degraded = True
            if self._backend.capabilities.lease and self.on_outage is not None:
                self.on_outage()
        self._observers.backend_error(operation, exc)

    def ok(self) -> None:
        """A call succeeded; on a claim backend that ends the outage (a lease backend's recovery ends it)."""
        if self.degraded and not self._backend.capabilities.lease:
            log.info("backend %r answers again", self._backend)
            self.degraded = False

    def recovered(self) -> None:
        self.degraded = False
