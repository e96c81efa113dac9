"""The history record of one run."""

from __future__ import annotations

import dataclasses
import enum
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, NamedTuple

__all__ = ["Attempt", "Run", "RunId", "RunStatus", "datetime_to_ms", "ms_to_datetime", "retried_error"]

#: The head of the error text of a retried run: ``"[2 retries] ValueError: boom"``. An error text
#: made by the scheduler starts with an exception's type name, never with ``[``, so it cannot
#: look like one.
_RETRIED = re.compile(r"\[(\d{1,7}) retr(?:y|ies)\] ")


def retried_error(error: str | None, retries: int) -> str | None:
    """The error text recorded for a run retried ``retries`` times whose last failed try raised ``error``.

    The count rides in the error text, which every backend already stores, so
    retries needed no new column or field in any backend's records.
    """
    if retries <= 0 or error is None:
        return error
    return f"[{retries} {'retry' if retries == 1 else 'retries'}] {error}"


class RunStatus(str, enum.Enum):
    """Where a run ended up. A ``str`` so records compare and serialise as text."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed-out"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"
    ABANDONED = "abandoned"
    #: The job was paused (``Scheduler.pause``) when this slot was claimed: not run, recorded once.
    PAUSED = "paused"

    def __str__(self) -> str:
        return self.value

    @property
    def final(self) -> bool:
        return self is not RunStatus.RUNNING


def ms_to_datetime(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


def datetime_to_ms(moment: datetime) -> int:
    if moment.tzinfo is None:
        raise ValueError(f"{moment!r} is naive; pass an aware datetime (for example with tzinfo=timezone.utc)")
    return round(moment.timestamp() * 1000)


class RunId(NamedTuple):
    """Which run: a slot of a job (by name), scheduled or manual; a manual run of a slot is another run.

    :class:`~anarchon.claims.Claim`, :class:`~anarchon.claims.Grant` and
    :class:`Run` each name their run by it (``.id``); the scheduler keys its
    runs in progress by it.
    """

    job: str
    slot_ms: int
    manual: bool


@dataclass(frozen=True)
class Attempt:
    """An earlier attempt of a slot that was taken over: its runner died, or stopped renewing, mid-run.

    A take-over rewrites the slot's one record for the new runner, so the
    record keeps what it replaced here (:attr:`Run.earlier`): which instance
    ran the attempt that died, from when, under which fencing token. History
    then shows every attempt of the slot, the one that died included.
    """

    attempt: int
    instance: str
    fencing: int | None = None
    started_at: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "attempt": self.attempt,
            "instance": self.instance,
            "fencing": self.fencing,
            "started_at": self.started_at.isoformat() if self.started_at else None,
        }


@dataclass(frozen=True)
class Run:
    """One run of one slot of one job, as history keeps it.

    A slot has one record: a take-over updates it (``attempt`` grows, the
    instance changes), it is not a second record. Times are the runner's
    clock in UTC.

    ``attempt`` counts *runners*: 1, then one more for each take-over after a
    runner died (``max_attempts``). ``retries`` counts the re-runs one runner
    made after the job raised (the ``retries`` option); a retried run's
    ``error`` is its last failed try's, also when a later try succeeded.
    """

    job: str
    slot_ms: int
    status: RunStatus
    instance: str
    attempt: int = 1
    fencing: int | None = None
    manual: bool = False
    catch_up: bool = False
    started_at: datetime | None = None
    finished_at: datetime | None = None
    duration_ms: int | None = None
    error: str | None = None
    missed: int = 0
    #: The attempts before this one, oldest first, when the slot was taken over (``attempt > 1``).
    earlier: tuple[Attempt, ...] = ()

    @property
    def slot(self) -> datetime:
        return ms_to_datetime(self.slot_ms)

    @property
    def id(self) -> RunId:
        return RunId(self.job, self.slot_ms, self.manual)

    @property
    def retries(self) -> int:
        """How many times the runner re-ran the job after it raised (read from the head of ``error``)."""
        found = _RETRIED.match(self.error) if self.error else None
        return int(found.group(1)) if found else 0

    def replace(self, **changes: Any) -> Run:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data, the shape ``anarchon history --json`` prints."""
        return {
            "job": self.job,
            "slot": self.slot.isoformat(),
            "slot_ms": self.slot_ms,
            "status": self.status.value,
            "instance": self.instance,
            "attempt": self.attempt,
            "fencing": self.fencing,
            "manual": self.manual,
            "catch_up": self.catch_up,
            "started_at": self.started_at.isoformat() if self.started_at else None,
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
            "duration_ms": self.duration_ms,
            "error": self.error,
            "missed": self.missed,
            "retries": self.retries,
            "earlier": [attempt.to_dict() for attempt in self.earlier],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Run:
        """Inverse of :meth:`to_dict`; backends that store JSON use it."""

        def moment(value: str | None) -> datetime | None:
            return datetime.fromisoformat(value) if value else None

        return cls(
            job=data["job"],
            slot_ms=int(data["slot_ms"]),
            status=RunStatus(data["status"]),
            instance=data["instance"],
            attempt=int(data.get("attempt", 1)),
            fencing=data.get("fencing"),
            manual=bool(data.get("manual", False)),
            catch_up=bool(data.get("catch_up", False)),
            started_at=moment(data.get("started_at")),
            finished_at=moment(data.get("finished_at")),
            duration_ms=data.get("duration_ms"),
            error=data.get("error"),
            missed=int(data.get("missed", 0)),
            earlier=tuple(
                Attempt(
                    attempt=int(a["attempt"]),
                    instance=a["instance"],
                    fencing=a.get("fencing"),
                    started_at=moment(a.get("started_at")),
                )
                for a in data.get("earlier") or ()
            ),
        )
