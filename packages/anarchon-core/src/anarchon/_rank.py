"""Ranked claims: one instance tries each slot first; the others claim only a slot not heard decided.

Every instance runs the same schedule, so each one claimed every slot and all but one claim lost:
the referee's work grew with the fleet (PostgreSQL: 0.30 ms of server CPU per run with one
instance, 1.34 ms with eight). Instead each instance ranks, per slot, the live instances that
define the job (:mod:`anarchon._circle`: the same order on every instance that sees the same
members, rank 0 moving round them slot by slot, jobs due every few seconds ranked in groups so
that one instance claims a group's slots in one call). Rank 0 claims at the slot, rank ``k`` (1 to
:data:`RANK_BACKUPS`) ``k`` steps later, the rest one step after the last backup. The winning
claim tells the fleet (:meth:`~anarchon.backend.Backend.watch_decided`, capability
``decided_notify``), so a later rank sends no claim for a slot it heard decided: one claim per
slot while rank 0 lives; after a ``kill -9`` of rank 0, its slots start one step late.

Safety does not rest on any of it. The referee's claim stays the only judge of who runs, so
instances that see the fleet differently (one just joined, one just died) claim in another order
or together, as every instance did before; none skips a slot it did not hear decided, and a notice
lost costs one claim answered lost.

The step is the job's ``jitter_ms`` (for sub-minute schedules fitted to a quarter of the shortest
gap) split into ``RANK_BACKUPS + 1`` parts, at most :data:`RANK_STEP_MS`. It follows the fleet's
pace: a backup that claims before rank 0's decision could reach it only loses, so the step grows to
how late this instance hears decisions (the upper envelope of the newest slot's age in each notice,
times :data:`LAG_MARGIN`), up to the job's window split the same way. The window is three quarters of
the shortest gap (at most :data:`RANK_WINDOW_MS`, at least the jitter, at most half of
``max_late_ms``), so a slot's last claim still comes before the next slot's first. Measured at 1,000
every-second jobs on eight instances (two cores, PostgreSQL), runs started 100 to 300 ms after the
slot: a fixed 83 ms step had backups send 2.26 losing claims per run, a window of half the gap
1.29, of three quarters 0.45. With ``jitter_ms=0`` or without a view of the fleet
(no registry), claims keep the jitter; an instance alone to define a job claims at the slot.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Sequence

from ._circle import Circles
from ._health import error_text
from .backend import Backend
from .fleet import Fleet
from .job import Job
from .observers import Observers

__all__ = ["LAG_DECAY", "LAG_MARGIN", "RANK_BACKUPS", "RANK_STEP_MS", "RANK_WINDOW_MS", "Ranker", "jittered"]

log = logging.getLogger("anarchon.claims")

#: The longest step between two ranks' claims (ms): a backup claims a dead rank 0's slot this late.
RANK_STEP_MS = 200
#: Instances that claim one step after another before the rest of the fleet does.
RANK_BACKUPS = 2
#: The longest window (ms) from the slot to the last rank's claim when decisions are heard late.
RANK_WINDOW_MS = 3000
#: A backup waits this many times as long as decisions have lately taken to reach this instance.
LAG_MARGIN = 1.25
#: Each notice shrinks the remembered lag by this factor before its own counts: a slow second is
#: forgotten within a few seconds of notices, a steady pace is kept.
LAG_DECAY = 0.9
#: A notice whose newest slot is older than this (ms) tells of a catch-up or a backlog, not the pace.
LAG_IGNORED_MS = 5000
#: Wait before watching decided slots again when the backend's watch ended by an error (s).
REWATCH_S = 5.0


def jittered(job: Job, slot_ms: int) -> int:
    """A random delay below the job's ``jitter_ms``: how claims spread without a view of the fleet."""
    return random.randrange(job.options.jitter_ms) if job.options.jitter_ms else 0


class Ranker:
    """This instance's rank per slot, from its view of the fleet, and the slots it heard decided."""

    def __init__(
        self,
        instance: str,
        fleet: Callable[[], Fleet],
        observers: Observers,
        now_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
        jobs: Callable[[], Sequence[Job]] = lambda: (),
    ) -> None:
        self._now_ms = now_ms
        #: How late (ms after the slot) decisions have lately reached this instance: an upper envelope.
        self._lag = 0.0
        #: Job -> (the definition, its step's ceiling), worked out once per definition.
        self._ceilings: dict[str, tuple[Job, int]] = {}
        self._observers = observers
        self._circles = Circles(instance, fleet, jobs)
        #: Job name -> the newest scheduled slot heard decided.
        self._heard: dict[str, int] = {}

    def delay_ms(self, job: Job, slot_ms: int) -> int:
        """How long after ``slot_ms`` this instance claims the slot: by its rank, or the jitter."""
        jitter = job.options.jitter_ms
        rank = self._circles.rank(job, slot_ms) if jitter else None
        if rank is None:
            return jittered(job, slot_ms)
        if not rank:
            return 0
        step = min(RANK_STEP_MS, jitter // (RANK_BACKUPS + 1))
        if self._lag * LAG_MARGIN > step:
            step = min(int(self._lag * LAG_MARGIN), self._ceiling(job))
        return min(rank, RANK_BACKUPS + 1) * step

    def _ceiling(self, job: Job) -> int:
        """The longest step for ``job``: its window (see the module's docstring) split into the ranks' parts."""
        known = self._ceilings.get(job.name)
        if known is not None and known[0] is job:
            return known[1]
        options = job.options
        gap = job.shortest_interval_ms() if job.sub_minute else 60_000
        window = min(RANK_WINDOW_MS, (gap or RANK_WINDOW_MS * 2) * 3 // 4, options.max_late_ms // 2)
        ceiling = max(options.jitter_ms, window) // (RANK_BACKUPS + 1)
        self._ceilings[job.name] = (job, ceiling)
        return ceiling

    def heard(self, decided: Sequence[tuple[str, int]]) -> None:
        """The backend told of slots decided; one number per job is kept (a newer slot decides the older).

        How late the notice's newest slot was heard feeds the step (see the module's docstring).
        """
        heard = self._heard
        newest = -1
        for job, slot in decided:
            newest = max(newest, slot)
            if slot > heard.get(job, -1):
                heard[job] = slot
        lag = self._now_ms() - newest
        if newest >= 0 and 0 <= lag <= LAG_IGNORED_MS:
            self._lag = max(float(lag), self._lag * LAG_DECAY)

    def decided(self, job: str, slot_ms: int) -> bool:
        """Whether the slot (or a newer one) was heard decided: a claim of it would lose."""
        return self._heard.get(job, -1) >= slot_ms

    def undecided(self, due: list[tuple[Job, int, int]], runs: Callable[[str], bool]) -> list[tuple[Job, int, int]]:
        """The due slots to claim: of jobs that ``runs`` here, not heard decided (those count as lost)."""
        out = []
        for entry in due:
            job, slot, _ = entry
            if not runs(job.name):
                continue
            if self.decided(job.name, slot):
                self._observers.claim_lost(job, slot, "decided")
                continue
            out.append(entry)
        return out

    async def watch(self, backend: Backend, stopping: Callable[[], bool]) -> None:
        """Hear decided slots for as long as the scheduler runs (``capabilities.decided_notify``)."""
        while backend.capabilities.decided_notify and not stopping():
            try:
                await backend.watch_decided(self.heard)
            except Exception as exc:  # every claim is sent meanwhile, as without the capability
                log.warning("could not hear decided slots: %s; every slot is claimed meanwhile", error_text(exc))
            await asyncio.sleep(REWATCH_S)
