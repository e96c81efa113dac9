"""The backend kit's subscription to stored-schedule changes, which :meth:`Backend.wait_schedules` waits on.

A backend whose store pushes changes (capability ``schedule_notify``:
PostgreSQL ``LISTEN``/``NOTIFY``, Redis ``SUBSCRIBE``/``PUBLISH``) subclasses
:class:`ScheduleListener` with three calls of its client (subscribe, ping,
unsubscribe), reports what the connection hears with :meth:`~ScheduleListener.changed`
and :meth:`~ScheduleListener.lost`, and answers ``wait_schedules`` with
:meth:`~ScheduleListener.wait`. The rules that let the scheduler lean on a push
and still never miss a change live here, once:

* The subscription is made by the first wait, on a connection of its own, not
  by ``start()``: a backend opened only to look (the CLI, the dashboard) never
  holds one.
* A wait that made the subscription returns at once (``True``): a change made
  before it existed was not notified, so the caller reads the counter once.
  The same after every re-subscription.
* A notification carries the revision it made. One that came while nobody
  waited ends the next wait at once, unless the caller holds that revision
  already (so a burst of changes read in one poll wakes nobody again).
* A wait that heard nothing for its whole timeout pings the connection (one
  round trip): a connection cut silently (a NAT's idle timeout, a host gone)
  is found within one wait, not left deaf for good.
* A lost subscription (the client says so, or the ping fails) ends the wait
  with ``False``: the caller polls at the short interval again. A subscription
  is attempted at most once per :data:`RETRY_S`; in between, waits only
  sleep. Nothing raises into the caller but its own cancellation.

One waiter at a time is what a backend object sees (its instance's watch).
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import logging
import sys

from ._waits import at_most

__all__ = ["RETRY_S", "ScheduleListener"]

log = logging.getLogger("anarchon.schedules")

#: The least time between two attempts to subscribe: while the store refuses, waits only sleep.
RETRY_S = 5.0
#: A revision above any the caller holds: a notification that named none "may have moved" everything.
_ANY = sys.maxsize


class ScheduleListener(abc.ABC):
    """One backend object's subscription to its namespace's schedule changes; see the module docstring."""

    def __init__(self, what: str) -> None:
        #: Who listens, for the logs (the backend's ``repr``: no password).
        self.what = what
        #: Whether the subscription is made and not known to be lost.
        self.live = False
        self._pending = -1  # the newest revision notified that no wait has answered yet
        self._wake: asyncio.Event | None = None
        self._retry_at = float("-inf")
        self._subscribing = False
        self._failing = False

    # -- the client's part ----------------------------------------------------------------

    @abc.abstractmethod
    async def subscribe(self) -> None:
        """Open a connection of the listener's own and subscribe on it, bounded by a timeout; raise if it cannot.

        Once subscribed, the client calls :meth:`changed` for every notification and :meth:`lost` when
        the connection ends.
        """

    @abc.abstractmethod
    async def ping(self) -> None:
        """One round trip on the subscription's connection, bounded by a timeout; raise if it does not come back."""

    @abc.abstractmethod
    async def unsubscribe(self) -> None:
        """Close the subscription's connection (a half-made one too); never raise."""

    # -- what the client reports --------------------------------------------------------------

    def changed(self, payload: object) -> None:
        """A notification; ``payload`` is the revision the change made (text or bytes), anything else counts as any."""
        revision = _ANY
        if isinstance(payload, (str, bytes)):
            with contextlib.suppress(ValueError):
                revision = int(payload)
        self._pending = max(self._pending, revision)
        self._ring()

    def lost(self, why: object = None) -> None:
        """The subscription ended (its connection closed or failed): the wait in progress ends with ``False``."""
        if self.live:
            self.live = False
            log.info("%s: schedule changes are followed by the poll: the subscription was lost (%s)", self.what, why)
        self._ring()

    def _ring(self) -> None:
        wake, self._wake = self._wake, None
        if wake is not None:
            wake.set()

    # -- what wait_schedules calls -----------------------------------------------------------------

    async def wait(self, revision: int, timeout_ms: int) -> bool:
        """``wait_schedules``: ``True`` after a notification past ``revision``, a new subscription, or a quiet timeout
        on a live one; ``False`` after sleeping without one, or when it was lost."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout_ms, 0) / 1000
        if not self.live:
            if not self._subscribing and loop.time() >= self._retry_at and await self._subscribe():
                return True
            await asyncio.sleep(max(deadline - loop.time(), 0))
            return False
        while self.live:
            pending, self._pending = self._pending, -1
            if pending > revision:
                return True
            left = deadline - loop.time()
            if left <= 0:
                return await self._answers()
            wake = self._wake = self._wake or asyncio.Event()
            await at_most(wake.wait(), left)
        await self.unsubscribe()
        return False

    async def ensure(self) -> None:
        """Subscribe now unless subscribed, subscribing, or refused less than :data:`RETRY_S` ago.

        For a backend that hears more on the same connection (PostgreSQL's decided slots)
        when nobody waits for schedule changes. A subscription made here counts as a change
        of unknown revision for the next wait, which cannot know what came before it.
        """
        if self.live or self._subscribing or asyncio.get_running_loop().time() < self._retry_at:
            return
        if await self._subscribe():
            self.changed(None)

    async def close(self) -> None:
        """Drop the subscription (the backend's ``close()``); a later wait subscribes again."""
        self.live = False
        self._ring()
        await self.unsubscribe()

    async def _subscribe(self) -> bool:
        self._retry_at = asyncio.get_running_loop().time() + RETRY_S
        self._subscribing = True
        try:
            await self.subscribe()
        except Exception as exc:
            await self.unsubscribe()
            if not self._failing:
                log.warning(
                    "%s: could not subscribe to schedule changes (%s: %s); following them by the poll, and trying "
                    "again every %g s",
                    self.what,
                    type(exc).__name__,
                    exc,
                    RETRY_S,
                )
            self._failing = True
            return False
        except BaseException:  # cancelled: close the half-made connection
            await self.unsubscribe()
            raise
        finally:
            self._subscribing = False
        if self._failing:
            log.info("%s: subscribed to schedule changes again", self.what)
        self._failing = False
        self._pending, self.live = -1, True
        return True

    async def _answers(self) -> bool:
        """After a quiet wait: whether the connection still answers (one round trip); dropped if not."""
        try:
            await self.ping()
        except Exception as exc:
            self.lost(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
            await self.unsubscribe()
            return False
        return self.live
