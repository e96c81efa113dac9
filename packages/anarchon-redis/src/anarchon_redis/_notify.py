"""Stored-schedule changes pushed: a subscription to ``<prefix>{schedules}:changed`` (capability ``schedule_notify``).

The ``schedule_put`` script publishes each change's revision on that channel
in the change's own step, so every instance subscribed hears it at once. Each
backend object subscribes on one connection of its client's pool, held for
the subscription, taken by its instance's first wait (never by ``start()``,
so the CLI and the dashboard hold none) and given back by
:meth:`~anarchon_redis.RedisBackend.close`. A task reads it: a message wakes
the wait, a ``PONG`` answers the listener's ping, and a ``subscribe``
confirmation after the first means redis-py connected again and subscribed
again by itself, with whatever was published in between unheard, so it counts
as a change of unknown revision. The rules of the wait (a new subscription
answers at once, a quiet wait pings, a lost connection falls back to the poll)
are :class:`anarchon.listener.ScheduleListener`'s.

On a cluster the channel carries the schedules' hash tag, so the subscription
goes to the node that holds the schedule keys and runs the script (a plain
``PUBLISH`` reaches every node's subscribers anyway). A change made by a
release from before the publish is not heard: its script does not publish;
the fallback poll sees it within :data:`~anarchon.schedules.NOTIFIED_POLL_MS`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from anarchon.backend import read_decided
from anarchon.listener import ScheduleListener

from ._calls import keep_cancellation
from ._records import text

if TYPE_CHECKING:
    from ._known import KnownJobs
    from ._names import Keyspace

__all__ = ["NotifyMixin", "RedisListener"]

log = logging.getLogger("anarchon.claims")

#: A quiet subscription to decided slots is pinged this often (s), to find a connection cut silently.
DECIDED_PING_S = 5.0


class RedisListener(ScheduleListener):
    def __init__(self, what: str, client: Any, channel: str, *, timeout_s: float) -> None:
        super().__init__(what)
        self._client = client
        self.channel = channel
        self._timeout = timeout_s
        self._pubsub: Any = None
        self._reader: asyncio.Task[None] | None = None
        self._pong: asyncio.Future[None] | None = None
        self._token = f"anarchon-{uuid.uuid4().hex[:12]}"

    async def subscribe(self) -> None:
        pubsub = self._pubsub = self._client.pubsub()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeout
        await asyncio.wait_for(keep_cancellation(pubsub.subscribe(self.channel)), self._timeout)
        while True:  # the subscription holds once the server confirmed it
            left = deadline - loop.time()
            if left <= 0:
                raise TimeoutError(f"SUBSCRIBE {self.channel} was not confirmed within {self._timeout:g} s")
            message = await asyncio.wait_for(pubsub.get_message(timeout=left), left + 1)
            if message is not None and text(message["type"]) == "subscribe":
                break
        self._reader = asyncio.ensure_future(self._read(pubsub))

    async def _read(self, pubsub: Any) -> None:
        try:
            while True:
                message = await pubsub.get_message(timeout=None)
                if message is None or pubsub is not self._pubsub:
                    continue
                kind = text(message["type"])
                if kind == "message":
                    self.changed(message["data"])
                elif kind == "pong":
                    if self._pong is not None and not self._pong.done():
                        self._pong.set_result(None)
                elif kind == "subscribe":  # redis-py reconnected and subscribed again: a gap
                    self.changed(None)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if pubsub is self._pubsub:
                self.lost(f"{type(exc).__name__}: {exc}")

    async def ping(self) -> None:
        if self._pubsub is None or self._reader is None or self._reader.done():
            raise ConnectionError("the subscription's reader stopped")
        pong = self._pong = asyncio.get_running_loop().create_future()
        await asyncio.wait_for(self._pubsub.ping(self._token), self._timeout)
        await asyncio.wait_for(pong, self._timeout)

    async def unsubscribe(self) -> None:
        pubsub, self._pubsub = self._pubsub, None
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.cancel()
            await asyncio.wait([reader])
        if pubsub is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(pubsub.aclose(), self._timeout)


class NotifyMixin:
    """Mixed into :class:`~anarchon_redis.RedisBackend`: ``wait_schedules`` on a :class:`RedisListener`,
    and ``watch_decided`` on ``<prefix>decided``, where ``claim.lua`` publishes each scheduled slot it decided."""

    _keys: Keyspace
    _known: KnownJobs
    connect_timeout_ms: int
    _listener: RedisListener | None = None

    if TYPE_CHECKING:  # the backend's own, used here

        def _redis(self) -> Any: ...

        def _replicas_to_wait(self) -> int | dict[str, int]: ...

    async def wait_schedules(self, revision: int, timeout_ms: int) -> bool:
        if self._listener is None:
            timeout = self.connect_timeout_ms / 1000
            self._listener = RedisListener(repr(self), self._redis(), self._keys.schedules_channel, timeout_s=timeout)
        return await self._listener.wait(revision, timeout_ms)

    async def _close_listener(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            await listener.close()

    def _claims_wait_for_replicas(self) -> bool:
        """Whether claims wait for a replica (``min_replicas``, or ``"auto"`` with one seen): then no slot is skipped.

        A notice comes from the server a subscriber listens on; across a failover that may not be the
        one its claims reach, and every instance claiming every slot is what kept a slot won on one
        primary from being won again on the other: skipping on a notice ran 1 to 5 slots twice in the
        short failover scenario (primary and replica, defaults), 0 without.
        """
        wait = self._replicas_to_wait()
        return bool(any(wait.values()) if isinstance(wait, dict) else wait)

    async def watch_decided(self, heard: Callable[[Sequence[tuple[str, int]]], None]) -> None:
        """Subscribe to the decided slots (``"<job> <slot>"`` each) on a connection of its own, until cancelled."""

        def told(payload: str) -> None:
            decided = read_decided(payload)
            for job, slot in decided:
                self._known.heard(job, slot)  # what this client's next claims tell Redis
            if not self._claims_wait_for_replicas():
                heard(decided)

        await self._watch(self._keys.decided_channel, told, None)

    async def watch_control(self, changed: Callable[[], None]) -> None:
        """Subscribe to ``<prefix>control``, where pauses, resumes and run requests are published, until cancelled."""
        await self._watch(self._keys.control_channel, lambda _: changed(), changed)

    async def _tell_control(self, job: str) -> None:
        """Publish a control change (after it was written); one lost is read by the 10 s poll."""
        with contextlib.suppress(Exception):
            await self._redis().publish(self._keys.control_channel, job)

    async def _watch(self, channel: str, told: Callable[[str], None], subscribed: Callable[[], None] | None) -> None:
        """Hear ``channel`` on a connection of its own, until cancelled; ``subscribed`` after each subscription.

        A notice missed while the subscription was down costs a claim answered lost, or a control
        change read at the next poll, nothing more, so a failure is logged at DEBUG and the
        subscription made again after a pause; redis-py subscribes again by itself after it
        reconnects, and says so with another ``subscribe`` message.
        """
        timeout = self.connect_timeout_ms / 1000
        while True:
            pubsub = self._redis().pubsub()
            try:
                await asyncio.wait_for(keep_cancellation(pubsub.subscribe(channel)), timeout)
                while True:
                    # Each call in a task of its own: redis-py swallows a cancel that comes while it
                    # connects again (after a restart), and the watch then never ended.
                    message = await keep_cancellation(pubsub.get_message(timeout=DECIDED_PING_S))
                    if message is None:
                        await asyncio.wait_for(keep_cancellation(pubsub.ping()), timeout)
                    elif text(message["type"]) == "message":
                        told(text(message["data"]))
                    elif text(message["type"]) == "subscribe" and subscribed is not None:
                        subscribed()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.debug("%r: the subscription to %s failed: %s; subscribing again", self, channel, exc)
                await asyncio.sleep(timeout)
            finally:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(pubsub.aclose(), timeout)
