"""Who tries a slot first: the live instances that may claim a job, in one order the fleet shares.

Every instance that sees the same members computes the same rank for every slot
(:class:`Circles`): the members of a job (the live instances that define it; for a
stored schedule every live instance) sorted by the hash of their names, and a base that
picks rank 0 among them. The base moves one place a second and starts each round of the
members (``size`` seconds) at a place hashed from the job and the round. Runs of an
every-second job therefore go to each member once per round, exactly evenly, and a job
due every ``k`` seconds lands wherever each round's hash puts it, so no ``k`` can pin it
to one member.

**Groups.** A job ranked by its own name sends each instance a claim of its own: at 100
every-second jobs on eight instances that was eight claim calls a second where one would
do, and a call has a fixed cost (about 1 ms of PostgreSQL's CPU, as much as fifty slots).
So jobs due at least every :data:`GROUP_GAP_MS` are ranked by a group instead, one of
``ceil(count / GROUP_SLOTS)``, when there are fewer groups than members: one instance
claims a whole group's slots due together in one call, and the groups' first claimers of
a second are spaced evenly round the circle. With as many groups as members, each job
keeps its own rank: every instance then claims at least a group's worth a second anyway,
and per job the runs spread more finely (three instances of 1,000 every-second jobs in
groups of 250 had their p99 start delay rise from 91-101 ms to 110-120). Slower jobs
keep their own rank too: their claims are rare, and heavy jobs due together (nightly
reports) should still spread over the fleet.

Safety does not rest on any of this (see :mod:`anarchon._rank`): two instances that see
different members, or count a different number of jobs during a deploy, only try in a
different order.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence

from .fleet import Fleet
from .job import Job

__all__ = ["GROUP_GAP_MS", "GROUP_SLOTS", "Circles"]

#: Jobs due at least this often (their shortest gap, ms) are ranked by group, not by name.
GROUP_GAP_MS = 10_000
#: Jobs per group: a quarter of what one claim call carries (anarchon._batcher.PART), so 1,000
#: every-second jobs still start on four instances at once and a call's fixed cost stays small.
GROUP_SLOTS = 250
#: Slots probed for a job's shortest gap: with eight, the first rank among 10,000 every-second jobs
#: (counting them and building the circles) took 80 ms, with sixty-four 255 ms.
GAP_PROBE = 8

#: A circle: the members' hashes in order, and this instance's place among them.
Circle = tuple[tuple[int, ...], int]


def name_hash(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


class Circles:
    """This instance's rank per slot from its view of the fleet and its jobs."""

    def __init__(self, instance: str, fleet: Callable[[], Fleet], jobs: Callable[[], Sequence[Job]]) -> None:
        self._instance = instance
        self._mine = name_hash(instance)
        self._alone: Circle = ((self._mine,), 0)
        self._fleet = fleet
        self._seen: Fleet | None = None
        #: Whether the view holds this instance (the registry was read), and the code jobs it lists for it.
        self._viewed = False
        self._code: frozenset[str] = frozenset()
        #: Job name -> its circle, and the stored schedules' (every live instance); once per view.
        self._circles: dict[str, Circle] = {}
        self._everyone: Circle = self._alone
        self._jobs = jobs
        #: The jobs last counted, and how many groups the dense ones are ranked in.
        self._counted: Sequence[Job] | None = None
        self._groups = 1
        #: Job name -> (the definition, the hash of its name if it is ranked by group, else ``None``).
        self._dense: dict[str, tuple[Job, int | None]] = {}

    def rank(self, job: Job, slot_ms: int) -> int | None:
        """This instance's rank for the slot, 0 to the members' count less one; ``None`` without a view of the fleet."""
        circle = self._circle(job.name)
        if circle is None:
            return None
        members, mine = circle
        size = len(members)
        second = slot_ms // 1000
        group = self._group(job, size)
        if group is None:
            base = name_hash(f"{job.name}\0{second // size}") + second
        else:  # the groups' first claimers spaced evenly round the circle: never two groups on one instance
            base = name_hash(f"\0{second // size}") + second + group * size // self._groups
        return (mine - base) % size

    def _circle(self, name: str) -> Circle | None:
        fleet = self._fleet()
        if fleet is not self._seen:
            self._seen = fleet
            live = {i.instance for i in fleet.instances}
            self._viewed = self._instance in live
            by_job: dict[str, set[str]] = {}
            for instance, jobs in fleet.definitions.items():
                if instance in live:
                    for job in jobs:
                        by_job.setdefault(job, set()).add(instance)
            built: dict[frozenset[str], Circle] = {}
            self._circles = {job: self._of(frozenset(members), built) for job, members in by_job.items()}
            self._code = frozenset(fleet.definitions.get(self._instance, ()))
            # A stored schedule is in nobody's definitions: every live instance with its task may run it.
            self._everyone = self._of(frozenset(live), built)
        if not self._viewed:
            return None
        if name not in self._code:
            return self._everyone
        return self._circles.get(name, self._alone)

    def _of(self, members: frozenset[str], built: dict[frozenset[str], Circle]) -> Circle:
        """One circle per set of members: most jobs share theirs."""
        circle = built.get(members)
        if circle is None:
            hashes = tuple(sorted({name_hash(m) for m in members} | {self._mine}))
            circle = built[members] = (hashes, hashes.index(self._mine))
        return circle

    def _group(self, job: Job, size: int) -> int | None:
        """The job's group if it is due at least every GROUP_GAP_MS and there are fewer groups than members."""
        jobs = self._jobs()
        if jobs is not self._counted:  # counted again when jobs change; what was removed is forgotten
            known = self._dense
            self._counted, self._dense = jobs, {j.name: _entry(j, known) for j in jobs}
            dense = sum(1 for _, hashed in self._dense.values() if hashed is not None)
            self._groups = max(1, -(-dense // GROUP_SLOTS))
        entry = self._dense.get(job.name)
        if entry is None or entry[0] is not job:  # a definition the counted jobs do not hold
            entry = self._dense[job.name] = _entry(job, {})
        hashed = entry[1]
        if hashed is None or self._groups >= size:
            return None  # as many groups as members: each job on its own spreads as evenly, and finer
        return hashed % self._groups


def _entry(job: Job, known: Mapping[str, tuple[Job, int | None]]) -> tuple[Job, int | None]:
    """The job and the hash of its name if it is ranked by group (due at least every GROUP_GAP_MS), else None;
    taken from ``known`` while its definition is the same object, since probing its gaps costs."""
    entry = known.get(job.name)
    if entry is None or entry[0] is not job:
        gap = job.shortest_interval_ms(GAP_PROBE) if job.sub_minute else None
        entry = (job, name_hash(job.name) if gap is not None and gap <= GROUP_GAP_MS else None)
    return entry
