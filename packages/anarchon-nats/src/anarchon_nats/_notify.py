"""Stored-schedule changes pushed: a subscription to the schedules stream's own subjects (``schedule_notify``).

Every change is a JetStream publish on ``$ANARCHON.<schedules stream>.<name>``
(see :mod:`._schedules`), and a JetStream publish is a core NATS message on
that subject like any other: the stream stores it, and every plain
subscription to ``$ANARCHON.<schedules stream>.>`` hears it at the same
moment. So the notification is the change itself: no writer can store a
change without it going out (unlike a second publish after the write, which a
writer killed in between, or a release from before it, would never send), and
it needs nothing on the server (no consumer, no KV watch to keep) and works
before the stream exists.

The message carries the change, not its revision (the stream gives the
sequence in the publish's acknowledgement, which only the writer gets), so
each one counts as a change of unknown revision and ends the wait: a burst of
changes costs at most one extra poll per poll the burst overlaps, never one
per change.

The subscription is made on the backend's connection (its own, or the one
the caller passed) by its instance's first wait (never by ``start()``, so the
CLI and the dashboard hold none); a subscription costs the server an entry in
its interest table, nothing more. nats-py reconnects by itself and subscribes
again, and what was published while the connection was down is not heard: a
reconnection therefore counts as a change of unknown revision. The client's
reconnect counter says so; the listener looks at it every
:data:`RECONNECT_CHECK_S` while subscribed (no round trip: it is the client's
own count), whether or not the backend made the connection. The rules of the
wait (a new subscription answers at once, a quiet wait pings, a lost
connection falls back to the poll) are
:class:`anarchon.listener.ScheduleListener`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from anarchon.backend import Claim, ClaimResult, decided_lines, read_decided
from anarchon.listener import ScheduleListener

from ._names import decided_subject, schedules_root

__all__ = ["NatsListener", "NotifyMixin"]

#: How often a subscribed listener looks at the client's reconnect counter (a change missed while cut is
#: then followed within this, instead of at the fallback poll).
RECONNECT_CHECK_S = 0.25
#: How often the decided watch looks whether the backend connected anew (its subscription is on the old client).
DECIDED_CHECK_S = 5.0


class NatsListener(ScheduleListener):
    def __init__(self, what: str, nc: Client, subject: str, *, timeout_s: float) -> None:
        super().__init__(what)
        self._nc = nc
        self.subject = subject
        self._timeout = timeout_s
        self._sub: Subscription | None = None
        self._reconnects = 0
        self._watch: asyncio.Task[None] | None = None

    @property
    def connection(self) -> Client:
        return self._nc

    def _reconnected(self) -> bool:
        """Whether the client reconnected since last looked at (then what came meanwhile was not heard)."""
        seen, self._reconnects = self._reconnects, int(self._nc.stats["reconnects"])
        return self._reconnects != seen

    async def subscribe(self) -> None:
        if self._nc.is_closed:
            raise ConnectionError("the backend's NATS connection is closed")
        self._reconnects = int(self._nc.stats["reconnects"])
        self._sub = await self._nc.subscribe(self.subject, cb=self._heard)
        await self._nc.flush(timeout=int(max(self._timeout, 1)))  # the server has the interest once PONG is back
        self._watch = asyncio.ensure_future(self._watch_reconnects())

    async def _heard(self, msg: Msg) -> None:
        self._reconnected()
        self.changed(None)

    async def _watch_reconnects(self) -> None:
        while True:
            await asyncio.sleep(RECONNECT_CHECK_S)
            if self._nc.is_closed:
                self.lost("the connection was closed")
                return
            if self._reconnected():
                self.changed(None)

    async def ping(self) -> None:
        if self._sub is None or self._nc.is_closed:
            raise ConnectionError("the subscription's connection is closed")
        await self._nc.flush(timeout=int(max(self._timeout, 1)))
        if self._reconnected():
            self.changed(None)

    async def unsubscribe(self) -> None:
        watch, self._watch = self._watch, None
        if watch is not None:
            watch.cancel()
            await asyncio.wait([watch])
        sub, self._sub = self._sub, None
        if sub is not None and not self._nc.is_closed:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()


class NotifyMixin:
    """Mixed into :class:`~anarchon_nats.NatsBackend`: ``wait_schedules`` on a :class:`NatsListener`, and the
    decided slots (``decided_notify``): after a claim call, one core publish of the scheduled slots it won on
    :func:`._names.decided_subject`, and ``watch_decided``'s subscription to it. A publish, not the claims
    themselves: a claim message goes out even when the stream did not store it."""

    stream: str
    prefix: str
    _nc: Client | None
    _listener: NatsListener | None = None

    if TYPE_CHECKING:  # the backend's own, used here

        def _jetstream(self) -> object: ...

    async def wait_schedules(self, revision: int, timeout_ms: int) -> bool:
        self._jetstream()  # raises as every call does on a backend not started
        assert self._nc is not None
        if self._listener is None or self._listener.connection is not self._nc:
            subject = f"{schedules_root(self.stream, self.prefix)}.>"
            self._listener = NatsListener(repr(self), self._nc, subject, timeout_s=5.0)
        return await self._listener.wait(revision, timeout_ms)

    async def _close_listener(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            await listener.close()

    async def watch_decided(self, heard: Callable[[Sequence[tuple[str, int]]], None]) -> None:
        subject = decided_subject(self.stream, self.prefix)

        async def told(msg: Msg) -> None:
            heard(read_decided(msg.data.decode(errors="replace")))

        nc: Client | None = None
        sub: Subscription | None = None
        try:
            while True:  # subscribed again when the backend connected anew (the old client's is gone)
                if sub is None or self._nc is not nc:
                    if sub is not None:
                        with contextlib.suppress(Exception):
                            await sub.unsubscribe()
                    nc, sub = self._nc, None
                    if nc is not None:
                        with contextlib.suppress(Exception):  # not connected: the claims go out meanwhile
                            sub = await nc.subscribe(subject, cb=told)
                await asyncio.sleep(DECIDED_CHECK_S)
        finally:
            if sub is not None:
                with contextlib.suppress(Exception):
                    await sub.unsubscribe()

    async def _tell_decided(self, claims: Sequence[Claim], results: Sequence[ClaimResult]) -> None:
        won = [(c.job, c.slot_ms) for c, r in zip(claims, results, strict=True) if r.won and not c.manual]
        if won and self._nc is not None:
            with contextlib.suppress(Exception):  # best effort: a notice lost costs a later rank one claim
                await self._nc.publish(decided_subject(self.stream, self.prefix), decided_lines(won).encode())
