"""This instance's side of its concurrency groups: waiting runs ask for places, ended runs free them.

A run of a job with ``group`` holds its grant (the lease keeper renews it)
and waits here until the backend gives it a place (:meth:`Backend.places`).
One loop per instance sends its asks and the leaves of its ended runs
together, so the referee sees one call per pass, not one per run: when a
run of this instance ended, when the backend tells of a freed place
(``capabilities.group_notify``), and every :data:`~anarchon.groups.GROUP_POLL_MS`
while anything waits. A run's first ask stores it in the backend, where it
keeps its turn; after that only the :data:`ASK_AGAIN` oldest stored runs are
asked about again: places go in slot order across the fleet, so a younger
one cannot have got a place before them. A pass costs the runs new since the
last one and a few dozen, however many wait.

A leave that fails stays queued and goes with the next pass; the backend
also frees the place of a holder whose heartbeat expired, so a place is
never held longer than a take-over takes.
"""

from __future__ import annotations

import asyncio
import logging
import random

from ._active import ActiveRun, Flag
from ._health import BackendHealth
from ._waits import at_most
from .backend import Backend
from .clock import Clock
from .errortext import error_text
from .groups import GROUP_POLL_MS, Place, skipped_text

__all__ = ["ASK_MAX", "CANCELLED", "Places"]

log = logging.getLogger("anarchon.groups")

#: The most waiting runs a pass stores in the backend (the oldest not stored yet).
ASK_MAX = 256
#: The oldest stored waiting runs a pass asks about again (whether they got a place since).
ASK_AGAIN = 32
#: What :meth:`Places.wait` answers for a run stopped or cancelled while it waited.
CANCELLED = "cancelled"
#: Back-off after a failed pass.
FAILED_PASS_S = 0.5


class _Waiting:
    __slots__ = ("active", "flag", "place", "placed", "stored")

    def __init__(self, active: ActiveRun, place: Place, flag: Flag) -> None:
        self.active = active
        self.place = place
        self.flag = flag
        self.placed = False
        #: The backend answered an ask of it: it holds its turn there.
        self.stored = False


class Places:
    def __init__(self, backend: Backend, clock: Clock, instance_id: str, health: BackendHealth) -> None:
        self._backend = backend
        self._clock = clock
        self._instance_id = instance_id
        self._health = health
        self._waiting: dict[str, _Waiting] = {}
        self._leaving: dict[str, Place] = {}
        self._wake = asyncio.Event()
        self._loop: asyncio.Task[None] | None = None
        self._watch: asyncio.Future[None] | None = None
        self._stopping = False
        self._closed = False
        #: The last failed pass's error, so a lasting failure (a corrupt limit) is logged once.
        self._failed: str | None = None

    def place_of(self, active: ActiveRun) -> Place:
        grant = active.grant
        assert active.job.options.group is not None
        return Place(active.job.options.group, grant.job, grant.slot_ms, grant.manual, grant.token, self._instance_id)

    async def wait(self, active: ActiveRun) -> str | None:
        """Wait for the run's place: ``None`` once it holds one, :data:`CANCELLED`, or the skip's text.

        A stop or a lost lease cancels the wait as it cancels a job
        (:meth:`ActiveRun.cancel_job` sets the flag waited on here). A run that
        gives up leaves its place, in case the backend gave it one meanwhile.
        """
        place = self.place_of(active)
        waiting = self._waiting[place.key] = _Waiting(active, place, Flag())
        active.between_tries = waiting.flag
        self._start()
        self._wake.set()
        bound = active.job.options.wait_bound_ms
        try:
            while not waiting.flag.is_set and not self._stopping:
                left_ms = place.slot_ms + bound - self._clock.now_ms()
                if left_ms <= 0:
                    self.leave(place)
                    waited = self._clock.now_ms() - place.slot_ms
                    return skipped_text(place.group, waited, bound)
                await at_most(waiting.flag.wait(), left_ms / 1000)
        finally:
            active.between_tries = None
            if self._waiting.get(place.key) is waiting:  # a take-over of the run here may wait under its key
                del self._waiting[place.key]
        if waiting.placed and not active.context.lease_lost and not self._stopping:
            return None
        self.leave(place)
        return CANCELLED

    def leave(self, place: Place) -> None:
        """Free the run's place with the next pass (now: the pass starts at once)."""
        self._leaving[place.key] = place
        self._start()
        self._wake.set()

    def stop_waiting(self) -> None:
        """At a stop: every waiting run gives up now, as cancelled by the stop (its run is handed over)."""
        self._stopping = True
        for waiting in self._waiting.values():
            waiting.active.cancelled_by_stop = True
            waiting.flag.set()

    async def close(self) -> None:
        """Send the leaves still queued, once, and stop the loop (the heartbeat's leave frees the rest)."""
        self._closed = True  # the loop ends by this flag: a cancel can be lost in wait_for (Python 3.11)
        self._wake.set()
        for task in (self._loop, self._watch):
            if task is not None:
                if task is self._watch:
                    task.cancel()
                await asyncio.wait([task])
        self._loop = self._watch = None
        if self._leaving:
            try:
                await self._backend.places(list(self._leaving.values()), [])
            except Exception as exc:
                self._health.failed("places", exc)

    def _start(self) -> None:
        if self._closed:
            return
        if self._loop is None or self._loop.done():
            self._loop = asyncio.ensure_future(self._run())
        if self._watch is None and self._backend.capabilities.group_notify:
            self._watch = asyncio.ensure_future(self._backend.watch_groups(self._wake.set))

    async def _run(self) -> None:
        every = GROUP_POLL_MS / 1000
        while not self._closed:
            if not self._wake.is_set():
                await at_most(self._wake.wait(), every * random.uniform(0.75, 1.25))
            await asyncio.sleep(0)  # the runs told of a place start before the next pass
            self._wake.clear()  # before the pass: a notice during it makes another
            if (self._waiting or self._leaving) and not self._closed:
                await self._pass()

    async def _pass(self) -> None:
        leave = list(self._leaving.values())
        asks = self._asks()
        try:
            answers = await self._backend.places(leave, asks)
        except Exception as exc:
            self._health.failed("places", exc)
            text = error_text(exc)
            if text != self._failed:  # reported once until it changes or a pass succeeds
                log.warning("asking for group places failed, asking again every %.1f s: %s", FAILED_PASS_S, text)
                self._failed = text
            await asyncio.sleep(FAILED_PASS_S)
            self._wake.set()
            return
        self._failed = None
        self._health.ok()
        for place in leave:
            if self._leaving.get(place.key) is place:
                del self._leaving[place.key]
        for place, placed in zip(asks, answers, strict=True):
            waiting = self._waiting.get(place.key)
            if waiting is None or waiting.place is not place:
                continue
            waiting.stored = True
            if placed:
                waiting.placed = True
                waiting.flag.set()
        if asks and all(answers):
            self._wake.set()  # every run asked about got a place: younger ones may have one too

    def _asks(self) -> list[Place]:
        """The runs asked about in a pass: those the backend has not stored yet, and the oldest stored ones.

        A run is stored by its first ask and keeps its turn in the backend from then on; asking again
        only tells whether it got a place. Places go oldest first across the fleet, so of the runs
        stored only this instance's oldest can have got one since the last pass: :data:`ASK_AGAIN` of
        them are asked about, not every run waiting (at 10,000 waiting, each pass re-read them all).
        """
        ordered = sorted((w for w in self._waiting.values() if not w.placed), key=lambda w: w.place.order)
        new = [w.place for w in ordered if not w.stored][:ASK_MAX]
        again = [w.place for w in ordered if w.stored][:ASK_AGAIN]
        return sorted(new + again, key=lambda p: p.order)
