"""Concurrency groups: at most N runs of a group at once across the whole fleet, in slot order.

A job (or stored schedule) names a group (``group="reports"``); the group's
limit lives in the backend (``anarchon groups set reports --max-running 3``),
so every instance obeys the same number. A slot of a group is claimed as any
other (the claim still decides who runs it, once); its winner then asks the
backend for one of the group's *places* before it calls the job, and waits,
holding its lease, until it gets one. The backend hands places out in slot
order across the fleet (oldest slot first, then job name), never more than
the limit at once, and a place whose holder's heartbeat expired counts as
free: a dead instance holds a place no longer than a take-over takes.

A group without a stored limit has no limit. The wait is bounded by the job's
``max_wait_ms`` (by default its ``max_late_ms``), counted from the slot: a slot
that waited longer is recorded ``skipped``, with the group named in its error
text, never dropped silently. The rules a backend follows are in
``anarchon.backend``'s docstring; :class:`anarchon._memory_groups.MemoryGroups`
is the reference.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import InvalidJobError
from .options import check_group_name

if TYPE_CHECKING:
    from collections.abc import Iterable

    from .job import Job

__all__ = [
    "GROUP_POLL_MS",
    "MAX_GROUP_LIMIT",
    "GroupState",
    "Place",
    "check_group_limit",
    "check_group_name",
    "refuse_groups",
    "skipped_text",
    "with_heartbeat",
]

#: How often an instance with waiting slots asks again without a notice (a raised limit is seen within
#: it); with ``capabilities.group_notify`` a freed place is heard at once, and this is the fallback.
GROUP_POLL_MS = 1000
#: The largest limit any backend stores (far above any sane fleet's runs at once).
MAX_GROUP_LIMIT = 1_000_000


def check_group_limit(limit: object) -> int:
    """A limit is a whole number of runs at once, from 1 to :data:`MAX_GROUP_LIMIT`."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_GROUP_LIMIT:
        raise InvalidJobError(
            f"max_running={limit!r} must be an integer from 1 to {MAX_GROUP_LIMIT:,} (runs of the group at "
            "once across the fleet); to lift a group's limit, remove it (anarchon groups remove NAME)",
            option="max_running",
            value=limit,
        )
    return limit


@dataclass(frozen=True)
class Place:
    """One run's ask for (or hold of) a place in its group: the run's slot, token and instance.

    ``key`` identifies the run in the group (a take-over of the run asks
    again with the same key and a new token); ``order`` is its turn.
    """

    group: str
    job: str
    slot_ms: int
    manual: bool
    token: str
    instance: str

    @property
    def key(self) -> str:
        return f"{self.job}/{self.slot_ms}/{'m' if self.manual else 's'}"

    @property
    def order(self) -> tuple[int, str, bool]:
        return (self.slot_ms, self.job, self.manual)


@dataclass(frozen=True)
class GroupState:
    """A group as the backend sees it now: its limit (``None``: none stored) and live places."""

    name: str
    max_running: int | None
    running: int
    waiting: int
    #: The slot of the oldest waiting run (``None``: nothing waits).
    oldest_waiting_ms: int | None = None

    def to_dict(self, now_ms: int | None = None) -> dict[str, Any]:
        data: dict[str, Any] = {
            "name": self.name,
            "max_running": self.max_running,
            "running": self.running,
            "waiting": self.waiting,
            "oldest_waiting_ms": self.oldest_waiting_ms,
        }
        if now_ms is not None:
            data["oldest_wait_ms"] = None if self.oldest_waiting_ms is None else max(0, now_ms - self.oldest_waiting_ms)
        return data


def skipped_text(group: str, waited_ms: int, max_wait_ms: int) -> str:
    """The error text of a slot skipped because its group stayed at its limit past the wait bound."""
    return (
        f"skipped: group {group!r} stayed at its limit for {waited_ms} ms after the slot, past max_wait_ms="
        f"{max_wait_ms}; raise the group's limit (anarchon groups set) or the job's max_wait_ms"
    )


def with_heartbeat(job: Job, liveness: bool) -> Job:
    """The job, unless it names a group on a scheduler without a heartbeat (``liveness=False``).

    The backend frees a place whose holder has no live heartbeat record, so
    such an instance's places would count as free and the limit would not hold.
    """
    if job.options.group is not None and not liveness:
        raise InvalidJobError(
            f"job {job.name!r}: group={job.options.group!r} needs this instance's heartbeat, and the scheduler "
            "was made with liveness=False; remove liveness=False, or remove group",
            option="group",
            value=job.options.group,
        )
    return job


def refuse_groups(jobs: Iterable[Job], backend: str, groups: bool) -> None:
    """At start without a heartbeat (the backend gave none, e.g. a caller's client): no job may name a group.

    ``backend`` is the backend's ``repr``, ``groups`` its capability (the backend is not imported here).
    """
    named = sorted(j.name for j in jobs if j.options.group is not None)
    if named and groups:
        raise InvalidJobError(
            f"jobs {', '.join(named)} name a group, and backend {backend} keeps no heartbeat for this instance "
            "(its heart() gave none: a caller's own client or pool, for instance), so the places of its runs "
            "would count as free; let the backend open its own connections, or remove group",
            option="group",
            value=named[0],
        )
