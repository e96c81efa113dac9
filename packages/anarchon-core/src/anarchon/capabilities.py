"""What a backend can promise, declared once as data."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Capabilities"]


@dataclass(frozen=True)
class Capabilities:
    """What a backend can promise, declared once as data.

    The scheduler resolves job options from these flags and the conformance
    suite gates its tests on them; neither ever looks at a backend's name.
    """

    #: Lease tier: backup runners, overlap skip, catch-up, hand-over, fencing.
    lease: bool
    #: ``history_ttl_ms`` is honoured (claim backends trim by count only).
    history_ttl: bool = False
    #: Lease expiry is judged on a clock of the backend's own (Redis ``TIME``,
    #: PostgreSQL ``now()``), so :meth:`Backend.now_ms` is worth comparing with.
    server_clock: bool = False
    #: A claim repeated with the same token gets its first answer back.
    idempotent_claim: bool = True
    #: Instances in several OS processes (or hosts) can share the store.
    multi_process: bool = True
    #: Each instance keeps a heartbeat (:meth:`LeaseBackend.heart`), and a run
    #: whose owner's heartbeat expired is taken over at once, not at its lease.
    liveness: bool = False
    backfill: bool = False  #: LeaseBackend.backfill(): past slots run once, at most, across fleet and backfills.
    #: LeaseBackend.revive(): a slot skipped for overlap with a run found dead is claimed again, once.
    revive: bool = False
    #: ``pause()``/``resume()`` across the fleet: the pause is stored with the job and the
    #: backend records a paused job's slots ``paused`` (:meth:`Backend.claim_paused`).
    pause: bool = False
    #: ``trigger()``: a request to run a job once now, stored for every instance's control
    #: poll to claim as a manual run (:meth:`Backend.request_run`).
    trigger: bool = False
    #: The fleet registry (:mod:`anarchon.fleet`): each live instance's head and job definitions
    #: are stored (:meth:`Backend.register`), so views need only the backend and drift is caught.
    registry: bool = False
    #: Stored schedules (:mod:`anarchon.schedules`): schedules kept in the backend with a revision
    #: each and a change log, changed at runtime, and read by every instance that has their task.
    schedules: bool = False
    #: The store tells each instance of a schedule change (PostgreSQL ``NOTIFY``, Redis ``PUBLISH``):
    #: :meth:`Backend.wait_schedules` returns at once, so instances follow a change without waiting
    #: for a poll, and poll only as the fallback, every :data:`~anarchon.schedules.NOTIFIED_POLL_MS`.
    schedule_notify: bool = False
    #: The guarantee report (:mod:`anarchon.guarantees`): :meth:`Backend.guarantees` reads the
    #: store's own settings and says what it promises across a failover or a restart.
    guarantees: bool = False
    #: The audit trail (:mod:`anarchon.audit`): every pause, resume, trigger, backfill and stored-schedule
    #: change is appended (:meth:`Backend.audit_append`) with who, when, what and why, never overwritten.
    audit: bool = False
    #: Every attempt of a slot is kept (lease only): a take-over after a runner died keeps the
    #: attempt it replaces in the record's ``earlier`` (:class:`~anarchon.run.Attempt`), so history
    #: shows the attempt that died beside the one that ran.
    attempts: bool = False
    #: The store tells every instance of the scheduled slots a claim decided (Redis ``PUBLISH``,
    #: PostgreSQL ``NOTIFY``; :meth:`Backend.watch_decided`): ranked claims (:mod:`anarchon._rank`)
    #: then send no claim for a slot already decided, so the referee's work stays flat in fleet size.
    decided_notify: bool = False
    #: The store tells every instance when a pause, a resume or a run request was written
    #: (:meth:`Backend.watch_control`): instances then read the control state when told, and
    #: every :data:`~anarchon.control.CONTROL_NOTIFIED_POLL_MS` besides, instead of twice a second.
    control_notify: bool = False
    #: Concurrency groups (:mod:`anarchon.groups`): a group's limit is stored in the backend and its places
    #: handed out in slot order across the fleet (:meth:`Backend.places`); needs ``lease`` and ``liveness``.
    groups: bool = False
    #: The store tells every instance when a group's place was freed or its limit set
    #: (:meth:`Backend.watch_groups`), so a waiting slot starts within about one round trip.
    group_notify: bool = False

    @property
    def kind(self) -> str:
        return "lease" if self.lease else "claim"

    def describe(self) -> list[str]:
        """The flags that are on, for ``anarchon backends`` and test headers."""
        return [f.replace("_", "-") for f in self.__dataclass_fields__ if getattr(self, f) is True]
