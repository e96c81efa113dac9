"""Steering the fleet: the records of a pause and of a request to run a job now.

Both live in the backend, beside the job, so every instance reads the same
ones and they survive restarts (see ``Backend.pause`` and
``Backend.request_run``):

* a **pause** covers a job's scheduled slots from ``since_ms`` to
  ``until_ms`` (the resume; ``None`` while the job is paused). While a job is
  paused no scheduled slot of it runs; once resumed, the slots due during the
  pause stay paused (a catch-up after an outage does not run them), and slots
  due before the pause or after the resume are claimed as usual. Manual runs
  (``run_now``, ``trigger``) are not paused: someone asked for them.
* a **run request** (``trigger``) asks whichever instance polls first to run
  the job once now. Its ``slot_ms`` (the backend's clock when it was made,
  unique per job) is the slot of the manual run it becomes, so the manual
  claim of that slot, which every lease backend decides once, picks the one
  instance that runs it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .claims import Claim
from .run import Run, RunStatus, ms_to_datetime

__all__ = ["CONTROL_NOTIFIED_POLL_MS", "CONTROL_POLL_MS", "REQUEST_TTL_MS", "PauseState", "RunRequest", "paused_run"]

#: Longest pause between two control polls of an instance (pauses and run requests).
CONTROL_POLL_MS = 500
#: The same with ``capabilities.control_notify``, whose notices wake the poll at once: the
#: bound on a change whose notice was lost.
CONTROL_NOTIFIED_POLL_MS = 10_000
#: A run request no instance took within this long is dropped: a fleet that starts an hour
#: later must not run what someone asked for an hour ago.
REQUEST_TTL_MS = 300_000


@dataclass(frozen=True)
class PauseState:
    """A job's pause as the backend stores it; ``until_ms`` is ``None`` while it lasts."""

    job: str
    since_ms: int
    until_ms: int | None = None
    reason: str | None = None
    by: str | None = None

    @property
    def paused(self) -> bool:
        return self.until_ms is None

    def covers(self, slot_ms: int) -> bool:
        """Whether a scheduled claim of this slot is answered ``PAUSED``.

        Every slot while the pause lasts; once resumed, the slots due during it.
        """
        if self.until_ms is None:
            return True
        return self.since_ms <= slot_ms <= self.until_ms

    def to_dict(self) -> dict[str, object]:
        return {
            "job": self.job,
            "paused": self.paused,
            "since": ms_to_datetime(self.since_ms).isoformat(),
            "since_ms": self.since_ms,
            "until": ms_to_datetime(self.until_ms).isoformat() if self.until_ms is not None else None,
            "until_ms": self.until_ms,
            "reason": self.reason,
            "by": self.by,
        }


@dataclass(frozen=True)
class RunRequest:
    """A request to run ``job`` once now; ``slot_ms`` is the slot of the manual run it becomes."""

    job: str
    slot_ms: int
    by: str | None = None


def paused_run(claim: Claim) -> Run:
    """The history record of a slot a pause decided: not run, finished at once."""
    base = claim.running()
    return base.replace(status=RunStatus.PAUSED, finished_at=base.started_at, duration_ms=0)
