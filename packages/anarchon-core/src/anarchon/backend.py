"""The backend contract: what a referee between instances must do.

``docs/protocol.md`` states this contract in prose, with its reasons, the
lease trust window as a formula, a run record's states and what the model
checks; below are the rules a backend implements, method by method.

A backend object belongs to one scheduler (one *instance*); several backend
objects pointed at one store are several instances racing. Two tiers exist,
and the tier is the backend's type (``capabilities.lease`` must agree with it,
checked when the class is defined):

claim — subclass :class:`Backend`
    :meth:`Backend.claim` decides who is first for a slot and remembers it
    for a window. Nothing else is promised: a dead winner's run is lost and
    its history record stays ``running``.

lease — subclass :class:`LeaseBackend`
    The winner also holds a lease (``lease_ms``) that it renews, and the
    backend implements the abstract :meth:`~LeaseBackend.renew`,
    :meth:`~LeaseBackend.take_over`, :meth:`~LeaseBackend.hand_over` and
    :meth:`~LeaseBackend.marks`, so a half-written lease backend cannot be
    instantiated. The rules every lease backend follows, per job:

    * ``mark`` is the newest *scheduled* slot decided (won or skipped). A
      scheduled claim of a slot older than ``mark`` is ``LOST``; of a slot
      equal to ``mark`` it is ``LOST`` too, unless the stored record carries
      the same ``token`` (a retried claim: answer as the first time).
      Manual runs neither check nor move ``mark``.
    * ``fencing`` is a per-job counter, incremented by every ``WON`` claim and
      every take-over; the new value is the grant's token. A job the referee
      has no counter for starts it at :func:`fencing_floor` of the referee's
      clock (:func:`next_fencing`), so a referee restarted empty never hands
      out a lower token.
    * Before deciding a scheduled claim, runs of *older* scheduled slots whose
      lease expired are marked ``abandoned`` (the newer slot runs the job).
      If one of them was the newest slot won, a ``WON`` answer names it in
      ``Grant.supersedes``: the run then covers that dead run's slot and the
      slots skipped for it, as a catch-up covers the slots it missed.
    * A ``WON`` scheduled claim names in ``Grant.previous_mark`` the ``mark``
      it found, before moving it. Slots between the two were decided by
      nobody (their claims were lost on cut links, or every instance reached
      them late), and the run covers them, as a catch-up would have: without
      this, the first instance back with a plain claim moved the mark past
      them and a later catch-up counted from there.
    * With ``overlap="skip"``, a claim (scheduled or manual) while any run of
      the job holds an unexpired lease answers ``SKIPPED`` and records the
      slot once with status ``skipped`` (and moves ``mark``).
    * A run's lease expires at ``lease_ms`` after its grant or last renewal,
      judged on the backend's clock where it has one, or at once on hand-over.
      :meth:`take_over` grants an expired run again (``attempt + 1``, new
      token and fencing) when ``attempt < max_attempts`` or it was handed
      over, and the run is manual or its slot is the newest scheduled slot
      *won* (``won``: slots skipped for overlap move ``mark`` but not
      ``won``, since they did not run the job); otherwise marks it
      ``abandoned``.
    * With ``capabilities.liveness``, a running run whose owner (its
      ``instance``) has a heartbeat record that expired counts as expired too,
      whatever its lease says: for :meth:`take_over`, for the abandon-older
      step of a claim and for the overlap skip (so a slot after a dead run is
      not skipped for it). An owner without a record counts as alive. See
      :mod:`anarchon.liveness`.
    * :meth:`renew`, :meth:`finish` and :meth:`hand_over` succeed only for the
      current owner (same token, status ``running``); a stale owner gets
      ``False`` and changes nothing.
    * History keeps at least ``history_size`` runs per job, newest by slot
      first, and drops runs older than ``history_ttl_ms`` when it is set.
    * A backend with ``capabilities.backfill`` decides :meth:`LeaseBackend.backfill`
      claims: a scheduled slot's run, keyed as the scheduled claim of that
      slot is (so the fleet and every backfill race for one record), granted
      only when the slot has no record at all; then ``fencing`` grows as for
      any win, ``mark`` moves up to the slot when it is above it (never
      down: a slot the backfill decided is decided, and a server backend's
      claim may rely on no record existing above ``mark``), ``won`` stays,
      and no overlap check is made (the caller bounds its concurrency).
      A slot with a record answers ``LOST`` with that record (``record``), or,
      for a retry with the record's own token while running, ``WON`` again.
    * A backend with ``capabilities.revive`` decides :meth:`LeaseBackend.revive`
      claims: a scheduled slot whose record is ``skipped`` (for overlap) is
      granted as a new run (``fencing`` grows; ``mark`` and ``won`` stay)
      when no run of the job holds an unexpired lease (the liveness rule
      included); with one, it answers ``SKIPPED`` and the record stays. A
      slot without a record, or with any other status, answers ``LOST``
      (with the record); a retry with the revived run's token while it runs,
      ``WON`` again. So a slot skipped for a run whose owner was dead runs
      once, and never beside a live run.

Steering the fleet (optional, each behind a capability; see :mod:`anarchon.control`):

    * ``capabilities.pause``: :meth:`~Backend.pause`, :meth:`~Backend.resume`,
      :meth:`~Backend.pauses` store a job's pause; :meth:`~Backend.claim_paused`
      decides the scheduled claims of a paused job: the slot is recorded once
      with status ``paused`` and moves ``mark`` (not ``won``, not ``fencing``),
      so a paused slot is decided, never "missed", and no catch-up runs it.
    * ``capabilities.trigger``: :meth:`~Backend.request_run`,
      :meth:`~Backend.run_requests`, :meth:`~Backend.run_requests_done` store
      requests to run a job now; the instances claim each as a manual run of
      the request's slot, which the lease rules above decide once.

The fleet registry (optional, ``capabilities.registry``; see :mod:`anarchon.fleet`):

    * :meth:`~Backend.register` stores an instance's entry, two texts kept
      as they are: ``head`` (small, read by every instance every poll) and
      ``jobs`` (read only when the head's fingerprint changed). It replaces
      the instance's earlier entry.
    * :meth:`~Backend.registered` returns the heads of *live* instances only,
      with when the store last heard from each: on a backend with liveness,
      an instance whose heartbeat record is alive; elsewhere, one whose entry
      was refreshed (:meth:`~Backend.keep_registered`) within
      :data:`~anarchon.fleet.REGISTRY_TTL_MS`. Entries of instances dead for
      longer than :data:`~anarchon.liveness.RETAIN_DEAD_MS` (or gone without
      a heartbeat record) may be deleted by any reader.
    * :meth:`~Backend.registered_jobs` returns the ``jobs`` texts of the
      instances asked for (those it has).
    * :meth:`~Backend.unregister` removes an instance's entry (a clean stop).

Stored schedules (optional, ``capabilities.schedules``; see :mod:`anarchon.schedules`):

    * :meth:`~Backend.put_schedule` stores (a record) or removes (``None``) one
      schedule in one atomic step, only if its revision is the one expected
      (0: it must not exist; ``None``: any), else raises
      :class:`~anarchon.errors.ScheduleConflictError` and changes nothing.
      Every change takes the next value of one counter shared by all
      schedules, so revisions are unique and ordered, and appends its change
      text to the schedule's log (the last :data:`~anarchon.schedules.LOG_KEEP`
      kept). A removal leaves a tombstone (name, revision) that
      :meth:`~Backend.schedules_since` reports; tombstones older than
      :data:`~anarchon.schedules.TOMBSTONE_MS` go with their logs.
    * :meth:`~Backend.schedules_revision` is the counter (read every poll: one
      cheap read), :meth:`~Backend.schedules_since` what changed after a
      revision, :meth:`~Backend.schedule` one record, :meth:`~Backend.schedule_log`
      one schedule's changes. Records and change texts are kept as given.
    * :meth:`~Backend.wait_schedules` waits between polls; with ``capabilities.schedule_notify`` the store's notice
      of a change ends it (the kit: :class:`anarchon.listener.ScheduleListener`), and the poll is the fallback.

The audit trail (optional, ``capabilities.audit``; see :mod:`anarchon.audit`):

    * :meth:`~Backend.audit_append` appends one entry (a text, about one job or
      stored schedule) and returns its id, greater than every id before it;
      nothing ever replaces or edits an entry. The newest
      :data:`~anarchon.audit.AUDIT_KEEP` are kept; older ones may be dropped
      by the append, by id.
    * :meth:`~Backend.audit_entries` reads them newest first, a page at a
      time (``before_id``), of one job when asked.

Decided slots (optional, ``capabilities.decided_notify``; see :mod:`anarchon._rank`):

    * A claim that writes a scheduled slot's record tells the namespace's
      watchers, and :meth:`~Backend.watch_decided` hears it, best effort: a
      later-ranked instance sends no claim for a slot it heard decided.

Control notices (optional, ``capabilities.control_notify``):

    * A pause, a resume or a run request tells the namespace's watchers, and
      :meth:`~Backend.watch_control` hears it, best effort: the instances read
      the control state when told, and every ``CONTROL_NOTIFIED_POLL_MS``.

Concurrency groups (optional, ``capabilities.groups``; see :mod:`anarchon.groups`):

    * :meth:`~Backend.set_group` stores a group's limit; :meth:`~Backend.places`
      frees and hands out a group's places in one atomic step, in slot order
      across the fleet, never more than the limit held by live holders (the
      rule is in its docstring); :meth:`~Backend.groups` reads each group's state.
    * With ``capabilities.group_notify``, a freed place or a set limit tells the
      namespace's watchers (:meth:`~Backend.watch_groups`), best effort.

A method that raises means *unknown*: the scheduler never runs a slot whose
claim raised, logs, backs off and calls again later. A backend must therefore
recover its connection by itself on a later call.

The kit: besides the types above, a backend reads and writes records with
:func:`decode_run` and :func:`read_runs` (one tolerant reader: a foreign or
broken record is skipped, logged once and counted, never fatal), :func:`skip`
(count a record it skipped itself) and :func:`clean_text` (an error text
bounded and storable anywhere). They live in :mod:`anarchon.records` and
:mod:`anarchon.errortext`; a backend imports nothing private of the core.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Sequence
from typing import Any, ClassVar

from ._contract import (
    AuditContract,
    DecidedContract,
    GroupsContract,
    RegistryContract,
    SchedulesContract,
    SteeringContract,
)
from .capabilities import Capabilities
from .claims import Claim, ClaimResult, Grant, Outcome, decided_lines, fencing_floor, next_fencing, read_decided
from .errortext import ERROR_TEXT_LIMIT, clean_text, error_text
from .guarantees import Finding
from .job import Job
from .liveness import Heart
from .options import JobOptions, resolve_options
from .records import RecordError, decode_run, read_runs, skip
from .run import Run

#: The kit a backend is written with: everything here is public and stays so.
__all__ = [
    "ERROR_TEXT_LIMIT",
    "Backend",
    "Capabilities",
    "Claim",
    "ClaimResult",
    "Finding",
    "Grant",
    "LeaseBackend",
    "Outcome",
    "RecordError",
    "clean_text",
    "decided_lines",
    "decode_run",
    "error_text",
    "fencing_floor",
    "next_fencing",
    "read_decided",
    "read_runs",
    "skip",
]


class Backend(
    SteeringContract, RegistryContract, SchedulesContract, AuditContract, DecidedContract, GroupsContract, abc.ABC
):
    """Base class of every backend.

    Subclasses set the class attributes, implement the abstract methods, and,
    when ``capabilities.lease`` is true, the lease methods below them. The
    methods of each optional capability (steering, the fleet registry, stored
    schedules, the audit trail) are inherited from ``anarchon._contract``; a
    backend overrides those of the capabilities it declares. Keep
    ``__repr__`` free of passwords (see :func:`anarchon.urls.redact_url`).
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Refuse a class whose declared capabilities contradict its type."""
        super().__init_subclass__(**kwargs)
        caps = cls.__dict__.get("capabilities")
        if not isinstance(caps, Capabilities):
            return
        is_lease = issubclass(cls, LeaseBackend)
        if caps.lease and not is_lease:
            raise TypeError(
                f"{cls.__name__}: capabilities.lease=True but the class is not a LeaseBackend; "
                "subclass anarchon.LeaseBackend (its four lease methods are abstract) or set lease=False"
            )
        if caps.liveness and (not is_lease or cls.heart is LeaseBackend.heart):  # type: ignore[attr-defined]
            raise TypeError(
                f"{cls.__name__}: capabilities.liveness=True needs a LeaseBackend that overrides heart(); "
                "implement heart() or set liveness=False"
            )
        if caps.schedule_notify and (not caps.schedules or cls.wait_schedules is Backend.wait_schedules):
            raise TypeError(
                f"{cls.__name__}: capabilities.schedule_notify=True needs schedules=True and an override of "
                "wait_schedules() that the store's notification ends; implement it or set schedule_notify=False"
            )
        if caps.groups and not (caps.lease and caps.liveness):
            raise TypeError(
                f"{cls.__name__}: capabilities.groups=True needs lease=True and liveness=True (a place is held "
                "by a run's lease and freed when its holder's heartbeat expires); set groups=False"
            )
        if caps.group_notify and (not caps.groups or cls.watch_groups is Backend.watch_groups):
            raise TypeError(
                f"{cls.__name__}: capabilities.group_notify=True needs groups=True and an override of "
                "watch_groups(); implement it or set group_notify=False"
            )
        if caps.decided_notify and cls.watch_decided is Backend.watch_decided:
            raise TypeError(
                f"{cls.__name__}: capabilities.decided_notify=True needs an override of watch_decided(); "
                "implement it or set decided_notify=False"
            )

    #: Short name used by ``anarchon backends`` and in error messages.
    name: ClassVar[str]
    #: URL schemes that select this backend in ``Scheduler(backend="…")``.
    url_schemes: ClassVar[tuple[str, ...]] = ()
    capabilities: ClassVar[Capabilities]

    @classmethod
    def from_url(cls, url: str) -> Backend:
        """Build a backend from a URL with one of :attr:`url_schemes`."""
        raise NotImplementedError(f"backend {cls.name!r} cannot be built from a URL")

    # -- lifecycle -------------------------------------------------------

    @abc.abstractmethod
    async def start(self) -> None:
        """Connect and create what is missing (queues, streams, tables).

        Raises :class:`~anarchon.errors.BackendUnavailableError` when the
        backend cannot be reached within its connect timeout.
        """

    @abc.abstractmethod
    async def close(self) -> None:
        """Release what :meth:`start` opened; never close a caller's connection."""

    # -- jobs -------------------------------------------------------------

    def job_options(self, job: str, explicit: dict[str, Any]) -> JobOptions:
        """Resolve a job's options for this backend's tier and check them.

        The default applies :func:`anarchon.options.resolve_options` with the
        declared :attr:`capabilities`; override only to add checks, and call
        ``super()`` first, or the conformance suite will catch it.
        """
        return resolve_options(job, explicit, self.capabilities, self.name)

    def check_job(self, job: Job) -> None:
        """Raise :class:`~anarchon.errors.InvalidJobError` for options unsafe here.

        Called by ``add()`` after the generic checks; synchronous, no I/O.
        """

    async def prepare(self, jobs: Sequence[Job]) -> None:
        """Make the store ready for these jobs (called on start and on add)."""

    # -- claiming -----------------------------------------------------------

    @abc.abstractmethod
    async def claim(self, claims: Sequence[Claim]) -> list[ClaimResult]:
        """Decide each claim, in order; answers line up with ``claims``.

        The claims due together are passed together, so a backend can decide
        them in one round trip. A lease backend writes the ``running`` (or
        ``skipped``) history record in the same atomic step as the grant.
        """

    @abc.abstractmethod
    async def finish(self, grant: Grant, run: Run) -> bool:
        """Record the finished run and release the lease.

        ``False`` when ``grant`` is stale (its lease was taken over): nothing
        is written.
        """

    @abc.abstractmethod
    async def history(self, job: str, limit: int = 100) -> list[Run]:
        """The job's runs, newest slot first."""

    async def last_run(self, job: str) -> Run | None:
        runs = await self.history(job, limit=1)
        return runs[0] if runs else None

    async def now_ms(self) -> int:
        """The backend's clock; the local clock where it has none."""
        return time.time_ns() // 1_000_000

    # -- what the referee promises (capabilities.guarantees; see anarchon.guarantees) ----

    async def guarantees(self) -> list[Finding]:
        """What this store, as configured, promises across a failover, a restart or a full store.

        Read-only and cheap (a few reads of the server's settings), and callable on a backend
        opened for reading only. Each setting under which a slot can run twice or be lost is a
        finding with ``ok=False`` and its fix; a setting that could not be read is one too.
        """
        raise self._unsupported("guarantees()", "guarantees")


class LeaseBackend(Backend):
    """A backend of the lease tier: every method below is the implementer's to write.

    Declare ``capabilities = Capabilities(lease=True, ...)``; the class
    statement fails when the flag and the type disagree.
    """

    @abc.abstractmethod
    async def renew(self, grants: Sequence[Grant]) -> list[bool]:
        """Extend each lease by its job's ``lease_ms``; ``False`` where stale."""

    @abc.abstractmethod
    async def take_over(self, jobs: Sequence[Job], instance: str) -> list[ClaimResult]:
        """Grant this instance the expired runs of these jobs.

        Returns one ``WON`` result per run taken over; marks the runs it may
        not take over ``abandoned``. A run taken over after its runner died
        (not one handed over) keeps the attempt it replaces in the record's
        ``earlier`` (an :class:`~anarchon.run.Attempt`: attempt, instance,
        fencing, started at), and :meth:`~Backend.finish` keeps ``earlier``:
        history shows every attempt of the slot.
        """

    @abc.abstractmethod
    async def hand_over(self, grant: Grant) -> bool:
        """Expire the lease now so a backup takes the run over at once."""

    def heart(self) -> Heart | None:
        """A new heartbeat for this instance, on a connection of its own; ``None`` without liveness.

        Called once per :meth:`~anarchon.Scheduler.start`; the scheduler drives
        it from a thread and an event loop of its own (see :mod:`anarchon.liveness`).
        """
        return None

    @abc.abstractmethod
    async def marks(self, jobs: Sequence[Job]) -> dict[str, int | None]:
        """Each job's newest decided scheduled slot, ``None`` if it never ran.

        The scheduler computes catch-up from it.
        """

    async def backfill(self, claims: Sequence[Claim]) -> list[ClaimResult]:
        """Decide backfill claims of past slots, each atomically; answers line up with ``claims``.

        Only for backends declaring ``capabilities.backfill``; the rule is in
        the module docstring. Not abstract, so lease backends written before
        it stay instantiable: they simply do not offer backfills.
        """
        raise NotImplementedError(f"backend {self.name!r} does not declare the backfill capability")

    async def revive(self, claims: Sequence[Claim]) -> list[ClaimResult]:
        """Claim again slots skipped for overlap (the rule is in the module docstring); answers line up.

        The scheduler calls it once a run it took over, or superseded, turned out dead: the slots
        skipped while that run seemed alive ran nothing. Only for ``capabilities.revive``.
        """
        raise self._unsupported("revive()", "revive")
