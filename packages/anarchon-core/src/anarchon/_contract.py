"""The optional parts of the backend contract, one base class per capability.

:class:`anarchon.backend.Backend` inherits every class here, so a backend
author subclasses ``Backend`` alone and overrides the methods of the
capabilities it declares; each default raises
:class:`~anarchon.errors.UnsupportedOperationError` naming the capability,
so a backend without it refuses clearly. They live apart from
``anarchon.backend`` only to keep each module readable (the size rule of
ARCHITECTURE.md); the rules each follows are in ``anarchon.backend``'s
docstring and ``docs/protocol.md``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, ClassVar

from .errors import UnsupportedOperationError

if TYPE_CHECKING:
    from .capabilities import Capabilities
    from .claims import Claim, ClaimResult
    from .control import PauseState, RunRequest
    from .groups import GroupState, Place

__all__ = [
    "AuditContract",
    "DecidedContract",
    "GroupsContract",
    "OptionalPart",
    "RegistryContract",
    "SchedulesContract",
    "SteeringContract",
]


class OptionalPart:
    """What every optional part shares: the backend's name, its capabilities, and the refusal."""

    name: ClassVar[str]
    capabilities: ClassVar[Capabilities]

    def _unsupported(self, operation: str, capability: str) -> UnsupportedOperationError:
        purpose = {
            "pause": "pause and resume jobs",
            "trigger": "trigger runs",
            "schedules": "store schedules",
            "audit": "keep an audit trail",
            "groups": "limit a group's runs",
        }.get(capability, "see the fleet")
        return UnsupportedOperationError(
            f"{operation} needs a backend with the capability {capability!r}; backend {self.name!r} "
            f"({self.capabilities.kind} tier) does not have it: it keeps no job state that every instance "
            f"reads before it claims. Use Redis, PostgreSQL or SQLite (or memory:// in one process) to {purpose} "
            "across the fleet",
            operation=operation,
            capability=capability,
        )


class SteeringContract(OptionalPart):
    """Steering the fleet: ``capabilities.pause`` and ``capabilities.trigger``."""

    async def pause(self, job: str, *, reason: str | None = None, by: str | None = None) -> PauseState:
        """Pause the job's scheduled slots on every instance, from the backend's now.

        Pausing a paused job keeps its ``since_ms`` and replaces the reason.
        """
        raise self._unsupported("pause()", "pause")

    async def resume(self, job: str, *, by: str | None = None) -> PauseState | None:
        """End the job's pause at the backend's now; the pause as it ends, ``None`` if it was not paused.

        The stored pause keeps its interval (``until_ms`` set), so slots due
        during it stay paused.
        """
        raise self._unsupported("resume()", "pause")

    async def pauses(self) -> list[PauseState]:
        """Every stored pause of this namespace, ended ones included; the instances poll it."""
        raise self._unsupported("pauses()", "pause")

    async def claim_paused(self, claims: Sequence[Claim]) -> list[ClaimResult | None]:
        """Decide scheduled claims of jobs the caller believes paused; answers line up with ``claims``.

        ``None`` where the stored pause does not cover the slot (it never was,
        or it was resumed before the slot): the caller claims it as usual.
        Otherwise, in one atomic step per claim, as a scheduled claim but
        never a grant: a record of the slot with the claim's token answers as
        the first time; any other record, or a slot at or below ``mark``, is
        ``LOST``; else the slot is recorded ``paused``, ``mark`` moves to it,
        and the answer is ``PAUSED`` with that record.
        """
        raise self._unsupported("claim_paused()", "pause")

    async def request_run(self, job: str, *, by: str | None = None) -> RunRequest:
        """Store a request to run the job once now; its slot is the backend's now, unique per job."""
        raise self._unsupported("trigger()", "trigger")

    async def run_requests(self) -> list[RunRequest]:
        """The requests not yet taken, oldest first; drops those older than ``REQUEST_TTL_MS``."""
        raise self._unsupported("run_requests()", "trigger")

    async def run_requests_done(self, requests: Sequence[RunRequest]) -> None:
        """Forget requests whose manual claim was decided (won or lost: a record exists)."""
        raise self._unsupported("run_requests_done()", "trigger")

    async def watch_control(self, changed: Callable[[], None]) -> None:
        """Call ``changed`` whenever a pause, a resume or a run request is written, until cancelled.

        ``capabilities.control_notify``. Also once each time the subscription
        is made (the first time, and again after a lost connection), since
        what was written meanwhile was not heard: the caller then reads the
        state. Best effort otherwise, like :meth:`watch_decided`: it never
        raises for a lost connection, subscribes again, and returns only when
        cancelled; the caller still reads the state every
        :data:`~anarchon.control.CONTROL_NOTIFIED_POLL_MS`. A backend that
        cannot listen as it is set up (PostgreSQL on a caller's pool) returns
        at once, and the caller reads the state twice a second instead.
        """
        raise self._unsupported("watch_control()", "control_notify")


class RegistryContract(OptionalPart):
    """The fleet registry: ``capabilities.registry`` (see :mod:`anarchon.fleet`)."""

    async def register(self, instance: str, head: str, jobs: str) -> None:
        """Store (replace) this instance's registry entry: its head and its job definitions."""
        raise self._unsupported("register()", "registry")

    async def keep_registered(self, instance: str) -> None:
        """Called every registry poll; a backend whose entries live by a TTL refreshes it here.

        A backend whose entries live as long as the instance's heartbeat needs nothing.
        """

    async def unregister(self, instance: str) -> None:
        """Remove this instance's entry (a clean stop)."""
        raise self._unsupported("unregister()", "registry")

    async def registered(self) -> list[tuple[str, str, int | None]]:
        """``(instance, head, seen_ms)`` of every live instance's entry; ``seen_ms``: when last heard of."""
        raise self._unsupported("registered()", "registry")

    async def registered_jobs(self, instances: Sequence[str]) -> dict[str, str]:
        """The job-definition texts of these instances (those stored)."""
        raise self._unsupported("registered_jobs()", "registry")


class SchedulesContract(OptionalPart):
    """Stored schedules: ``capabilities.schedules`` (see :mod:`anarchon.schedules`)."""

    async def put_schedule(self, name: str, record: str | None, *, expect: int | None, change: str) -> int:
        """Store (``record``) or remove (``None``) a schedule if it is at revision ``expect``; its new revision.

        Atomic: the revision check, the write, the counter and the log entry happen together or not
        at all. A removal of a schedule that does not exist is a conflict with ``current=0``.
        """
        raise self._unsupported("put_schedule()", "schedules")

    async def schedules_revision(self) -> int:
        """The last revision given to any schedule change (0: none yet); every instance reads it every poll."""
        raise self._unsupported("schedules_revision()", "schedules")

    async def schedules_since(self, revision: int) -> list[tuple[str, str | None, int]]:
        """``(name, record, revision)`` of each schedule changed after ``revision``, in revision order.

        ``record`` is ``None`` for a removal (a tombstone). With ``revision=0``: every stored
        schedule, tombstones left out.
        """
        raise self._unsupported("schedules_since()", "schedules")

    async def schedule(self, name: str) -> tuple[str, int] | None:
        """One stored schedule's record and revision, ``None`` if there is none (a tombstone counts as none)."""
        raise self._unsupported("schedule()", "schedules")

    async def schedule_log(self, name: str) -> list[tuple[int, str]]:
        """``(revision, change)`` of the schedule's kept changes, oldest first."""
        raise self._unsupported("schedule_log()", "schedules")

    async def wait_schedules(self, revision: int, timeout_ms: int) -> bool:
        """Wait until the stored schedules may have moved past ``revision`` (at most ``timeout_ms``); then one polls.

        ``True`` when it waited on a live subscription to the store's changes, which a change after ``revision``
        (also one notified before the call) ends at once: the caller may poll seldom. ``False`` when it only slept.
        It may end early with nothing new (a subscription just made). A lost connection is never raised: it sleeps.
        This default sleeps: the poll, the fallback of every backend.
        """
        await asyncio.sleep(timeout_ms / 1000)
        return False

    async def forget_removed(self, older_than_ms: int) -> list[str]:
        """Drop what the referee keeps of schedules removed more than ``older_than_ms`` ago; the names forgotten.

        Each such tombstone goes with its change log, and so does everything kept for a job
        of that name (its mark, fencing counter, lease records, pause and run history), so a
        removed schedule leaves nothing behind once its tombstone has done its work. The job's
        part is kept when the name is in use again: a run of it holds an unexpired lease, or
        its mark is a slot more than :data:`~anarchon.schedules.REUSE_AFTER_MS` after the
        removal (a code job or a new schedule of that name claimed it).
        One atomic step per name. :class:`~anarchon.Schedules` calls it before each change;
        the default does nothing, for a backend that keeps nothing per job.
        """
        return []


class AuditContract(OptionalPart):
    """The audit trail: ``capabilities.audit`` (see :mod:`anarchon.audit`).

    Two calls, and no way to change or delete one entry: an entry is written once and
    read many times, so a trail is a log, never a record per job. The job (or stored
    schedule) name travels beside the text so a store filters by it with an index,
    without reading every entry; the text is kept as given (the core's JSON, which
    :func:`anarchon.audit.read_audit` decodes, skipping one it cannot read).
    """

    async def audit_append(self, job: str, entry: str) -> int:
        """Append ``entry`` (about ``job``) to the trail; its id, greater than every id given before.

        Append-only: no entry is ever replaced, so two pauses are two entries. In the same
        step, entries beyond the newest :data:`~anarchon.audit.AUDIT_KEEP` may be dropped
        (by id, so the trim costs one indexed delete, never a scan).
        """
        raise self._unsupported("audit_append()", "audit")

    async def audit_entries(
        self, *, limit: int, before_id: int | None = None, job: str | None = None
    ) -> list[tuple[int, str]]:
        """``(id, entry)`` of at most ``limit`` entries, newest (highest id) first.

        Only ids below ``before_id`` when it is given (the next page starts below the last
        id read), and only entries appended for ``job`` when it is given.
        """
        raise self._unsupported("audit_entries()", "audit")


class DecidedContract(OptionalPart):
    """Decided slots told to the fleet: ``capabilities.decided_notify`` (see :mod:`anarchon._rank`)."""

    async def watch_decided(self, heard: Callable[[Sequence[tuple[str, int]]], None]) -> None:
        """Call ``heard`` with ``(job, slot_ms)`` of scheduled slots decided by a claim, until cancelled.

        A claim that wrote a scheduled slot's record (won, or skipped for overlap)
        tells every instance watching the namespace, in the claim's own atomic step
        or its commit; manual, catch-up and backfill grants need not be told. Best
        effort, and that is all the scheduler needs: a notice lost (a connection
        dropped, a subscriber that joined late) costs one claim that the referee
        answers lost, never a run. So this never raises for a lost connection: it
        subscribes again (at most every few seconds) and returns only when
        cancelled. It subscribes on a connection of its own, or on one the backend
        already listens on (PostgreSQL's for schedule changes), never on a pooled one.
        """
        raise self._unsupported("watch_decided()", "decided_notify")


class GroupsContract(OptionalPart):
    """Concurrency groups: ``capabilities.groups`` (see :mod:`anarchon.groups`)."""

    async def set_group(self, group: str, max_running: int | None) -> None:
        """Store the group's limit (runs at once across the fleet); ``None`` removes it (no limit)."""
        raise self._unsupported("set_group()", "groups")

    async def groups(self) -> list[GroupState]:
        """Every group with a stored limit or a live place, by name; places of dead holders not counted."""
        raise self._unsupported("groups()", "groups")

    async def places(self, leave: Sequence[Place], take: Sequence[Place]) -> list[bool]:
        """In one atomic step: free the places in ``leave``, then answer each ask in ``take``.

        A leave removes the run's entry when its token matches (else nothing).
        An ask stores the run's entry, waiting, if the group has none for its
        key or one with another token (a take-over asks again); it answers
        ``True`` when the entry holds a place, or gets one now. Entries whose
        holder is dead (its heartbeat record expired while some record is
        alive, or it has none) are deleted first. With the group's limit ``L``
        and ``R`` live places held, the first ``L - R`` live waiting entries
        in :attr:`~anarchon.groups.Place.order` get places, whichever
        instance asked: an entry that is not asked for keeps its turn. A group
        with no stored limit gives every ask a place.
        """
        raise self._unsupported("places()", "groups")

    async def watch_groups(self, freed: Callable[[], None]) -> None:
        """Call ``freed`` whenever a place was left or a limit set in the namespace, until cancelled.

        Only with ``capabilities.group_notify``; best effort, as :meth:`watch_decided`:
        a lost notice costs one poll (:data:`~anarchon.groups.GROUP_POLL_MS`).
        """
        raise self._unsupported("watch_groups()", "group_notify")
