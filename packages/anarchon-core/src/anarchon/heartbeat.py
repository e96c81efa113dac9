"""This instance's heartbeat: a thread of its own beating into the store.

The thread runs its own event loop and the backend's :class:`~anarchon.liveness.Heart`
(its own connection), so a job that blocks the scheduler's event loop does not
make the fleet take this instance's runs over. The scheduler's side reads two
numbers the thread publishes as one tuple (an atomic assignment):

* ``deadline``: when (monotonic) this instance must presume its runs lost,
  ``sent + TTL * HOLD_SHARE`` of the last acknowledged beat;
* ``revived``: when an acknowledgement last ended a lapse (or came first).

A run is held only if its claim was sent after the last revival and the
deadline has not passed (:meth:`Heartbeat.held`); :meth:`Heartbeat.watch`
stops the runs that are not.

The pace: every :data:`~anarchon.liveness.HEARTBEAT_MS` (250 ms) while the
instance holds a run, every :data:`~anarchon.liveness.IDLE_HEARTBEAT_MS`
(500 ms) while it holds none, on a store that tells when the next record of
another instance expires; then a beat is also sent just after that expiry,
because that beat is the one that reports the death to the fleet. Beats are
most of what an idle instance costs the referee (four a second were about
60 % of PostgreSQL's CPU per idle instance); what a beat buys, the hold of
the runs, matters only while there are runs to hold. The hold rule does not
change with the pace (``sent + TTL * HOLD_SHARE``), so a slower beat can
only make an instance give its runs up sooner, never keep them longer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping

from ._active import ActiveRuns
from ._health import BackendHealth
from ._keeper import lose_lease
from ._waits import at_most, within
from .backend import Grant, LeaseBackend
from .errortext import error_text
from .liveness import HEARTBEAT_MS, IDLE_HEARTBEAT_MS, LIVENESS_TTL_MS, Beat, Heart
from .observers import Observers

__all__ = ["Heartbeat"]

log = logging.getLogger("anarchon.liveness")

#: Share of the TTL this instance trusts after it sent a beat that was acknowledged. The
#: other instances can see the record expire a TTL after it *arrived*, then their own next
#: beat (up to a period later) starts the take-over; the fifth left over (300 ms) is room for
#: this instance's event loop to stop the job before then.
HOLD_SHARE = 0.8
#: A beat that fails is logged at WARNING at most this often (seconds); the rest at DEBUG.
WARN_EVERY_S = 10.0
#: A beat aimed at another instance's expiry is sent this long after it (seconds): the store's
#: millisecond clock must have passed it when the beat arrives.
AIM_MARGIN_S = 0.01
#: The shortest gap between two beats (seconds), whatever they are aimed at.
MIN_GAP_S = 0.02


class Heartbeat:
    def __init__(
        self,
        heart: Heart,
        instance: str,
        *,
        on_dead: Callable[[Mapping[str, int]], None],
        period_ms: int = HEARTBEAT_MS,
        ttl_ms: int = LIVENESS_TTL_MS,
        busy: Callable[[], bool] | None = None,
        idle_period_ms: int = IDLE_HEARTBEAT_MS,
    ) -> None:
        self._heart = heart
        self._instance = instance
        self._on_dead = on_dead
        self._period = period_ms / 1000
        #: Whether the instance holds a run now (read from the heartbeat's thread: a dict's length).
        #: None: always, so the pace never slows.
        self._busy = busy
        self._idle_period = idle_period_ms / 1000
        self._ttl_ms = ttl_ms
        self._hold = ttl_ms * HOLD_SHARE / 1000
        #: (deadline, revived), both monotonic seconds; never acknowledged yet.
        self._state: tuple[float, float] = (float("-inf"), float("inf"))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._first: asyncio.Event | None = None
        #: The thread's own loop and the event that wakes it early (stop).
        self._beat_loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._seen_dead: frozenset[str] = frozenset()
        self._warned = 0.0

    # -- the scheduler's side --------------------------------------------------

    def beating(self) -> bool:
        """Whether the last acknowledged beat still holds now."""
        return time.monotonic() <= self._state[0]

    def held(self, sent: float) -> bool:
        """Whether a run whose claim was sent at ``sent`` (monotonic) is still this instance's."""
        deadline, revived = self._state
        return revived < sent and time.monotonic() <= deadline

    async def start(self, timeout_s: float) -> bool:
        """Start beating; ``True`` once the first beat is acknowledged within ``timeout_s``."""
        self._loop = asyncio.get_running_loop()
        self._first = asyncio.Event()
        self._stop.clear()
        self._thread = threading.Thread(target=self._main, name=f"anarchon-heartbeat-{self._instance}", daemon=True)
        self._thread.start()
        try:
            await asyncio.wait_for(self._first.wait(), timeout_s)
        except asyncio.TimeoutError:
            return False
        return True

    async def stop(self, *, leave: bool) -> None:
        """Stop the thread; with ``leave`` the record is expired first, so leftovers are taken over at once."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._leave = leave
        self._stop.set()
        loop, wake = self._beat_loop, self._wake
        if loop is not None and wake is not None:
            with contextlib.suppress(RuntimeError):  # the thread's loop has ended already
                loop.call_soon_threadsafe(wake.set)
        await asyncio.to_thread(thread.join, 5 + self._ttl_ms / 1000)

    async def watch(
        self,
        active: ActiveRuns,
        backend: LeaseBackend,
        observers: Observers,
        health: BackendHealth,
        stopping: Callable[[], bool],
    ) -> None:
        """Stop every run this instance may no longer hold: after a lapse the fleet may have taken it over.

        Once beats are acknowledged again, those runs are handed over: nobody
        else may have seen the record expired (a store that was down for
        everyone), and without it they would wait out their lease, their
        job's next slots skipped for overlap meanwhile. A hand-over that fails
        (a store still short of connections) is tried again each period until
        the run's lease has run out anyway. A run whose job already returned is
        not handed over: its record is still being written (``finishing``).
        """
        seen = self._state[1]
        given_up: list[tuple[Grant, float]] = []  # with the monotonic time its lease has run out by
        reported = False  # this lapse told to BackendHealth (once: observers count failed calls)
        while not stopping():
            deadline, revived = self._state
            now = time.monotonic()
            if now <= deadline and revived == seen:
                reported = False
                if given_up:
                    given_up = await self._hand_over(backend, given_up, health)
                # Wake at the deadline, no sooner: no run can lose its hold before it (a beat acknowledged
                # meanwhile moves it on, and the watch sleeps again), and each wake-up of the loop costs
                # CPU for as long as the instance lives. A failed hand-over is tried again each period.
                pause = min(deadline - now, self._period) if given_up else deadline - now
                await asyncio.sleep(pause + 0.001)
                continue
            seen = revived
            lapsed = []
            for run in list(active.values()):
                if not run.context.lease_lost and not self.held(run.sent):
                    lose_lease(run, "this instance's heartbeat lapsed, so the fleet may take the run over", observers)
                    if not run.finishing:
                        lapsed.append((run.grant, run.lease_deadline + run.grant.lease_ms / 1000))
            if lapsed:
                # Over the backend's own connection, now: if it answers, the fleet (or this instance
                # once it beats again) takes the runs over at once, not at their lease (model finding).
                given_up += await self._hand_over(backend, lapsed, health)
            if time.monotonic() > self._state[0]:
                # Claim nothing and take nothing over until a beat is acknowledged: every grant would
                # be handed straight back (model finding: an endless claim, hand-over, take-over loop).
                if not reported:
                    health.failed("heartbeat", TimeoutError("no heartbeat acknowledged within its hold"))
                    reported = True
                await asyncio.sleep(self._period)

    @staticmethod
    async def _hand_over(
        backend: LeaseBackend, grants: list[tuple[Grant, float]], health: BackendHealth
    ) -> list[tuple[Grant, float]]:
        """Hand the runs over; the ones whose hand-over failed and whose lease may still hold, to try again."""
        # Fenced by each grant's token: a run the fleet took over meanwhile answers False, unchanged.
        failed = []
        for grant, lease_end in grants:
            try:
                await backend.hand_over(grant)
            except Exception as exc:
                health.failed("hand_over", exc)
                if time.monotonic() < lease_end:  # past it, the lease frees the run anyway
                    failed.append((grant, lease_end))
        return failed

    # -- the thread's side -----------------------------------------------------

    _leave = False

    def _main(self) -> None:
        asyncio.run(self._beating())

    async def _beating(self) -> None:
        self._beat_loop = asyncio.get_running_loop()
        self._wake = wake = asyncio.Event()
        ttl_s = self._ttl_ms / 1000
        opened = False
        try:
            while not self._stop.is_set():
                sent = time.monotonic()
                due = sent + self._period  # after a failure too: try again soon
                try:
                    if not opened:
                        await within(self._heart.open(), ttl_s)
                        opened = True
                    beat = await within(self._heart.beat(self._instance, self._ttl_ms), ttl_s)
                except Exception as exc:
                    self._failed(exc)
                else:
                    self._acked(sent, beat.dead)
                    due = self._next_beat(sent, beat)
                await at_most(wake.wait(), max(0.0, due - time.monotonic()))
            if opened and self._leave:
                try:
                    await within(self._heart.leave(self._instance), ttl_s)
                except Exception as exc:
                    log.warning("heartbeat: could not leave (%s); the record expires within its TTL", error_text(exc))
        finally:
            if opened:
                try:
                    await self._heart.close()
                except Exception as exc:
                    log.debug("heartbeat: close failed: %s", error_text(exc))

    def _next_beat(self, sent: float, beat: Beat) -> float:
        """When (monotonic) to send the next beat after ``beat``, sent at ``sent``, was acknowledged."""
        if not self._heart.tells_next_expiry:
            return sent + self._period
        idle = self._busy is not None and not self._busy()
        at = sent + (self._idle_period if idle else self._period)
        if beat.next_expiry_ms is not None:
            # Measured from the answer, which left the store after the now the delay was counted from.
            at = min(at, time.monotonic() + beat.next_expiry_ms / 1000 + AIM_MARGIN_S)
        return max(at, sent + MIN_GAP_S)

    def _acked(self, sent: float, dead: Mapping[str, int]) -> None:
        now = time.monotonic()
        deadline, revived = self._state
        if now > deadline:
            revived = now  # a lapse (or the first beat) ends here: earlier claims are not held
            if deadline != float("-inf"):
                log.warning("heartbeat: acknowledged again after a lapse; runs held before it were given up")
        self._state = (max(deadline, sent + self._hold), revived)
        loop = self._loop
        if loop is None:
            return
        names = frozenset(dead) - {self._instance}
        new = names - self._seen_dead
        self._seen_dead = names
        first = self._first
        with contextlib.suppress(RuntimeError):  # the scheduler's loop is closed: nobody to tell
            if first is not None and not first.is_set():
                loop.call_soon_threadsafe(first.set)
            if new:
                loop.call_soon_threadsafe(self._on_dead, {n: dead[n] for n in new})

    def _failed(self, exc: BaseException) -> None:
        now = time.monotonic()
        if now - self._warned >= WARN_EVERY_S:
            self._warned = now
            log.warning("heartbeat of instance %s failed: %s", self._instance, error_text(exc))
        else:
            log.debug("heartbeat of instance %s failed: %s", self._instance, error_text(exc))
