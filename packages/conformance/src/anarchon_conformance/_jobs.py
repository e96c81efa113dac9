"""Jobs and runs the way the scheduler makes them, for tests that skip the scheduler."""

from __future__ import annotations

import secrets
import time
from typing import Any

from anarchon import build_job
from anarchon.backend import Backend, Grant
from anarchon.context import JobFunc
from anarchon.job import Job
from anarchon.options import check_job_name
from anarchon.run import Run, RunStatus

__all__ = ["EVERY_SECOND", "finished_run", "make_job", "now_ms", "unique_name"]

#: Six fields, seconds first: every whole second is a slot.
EVERY_SECOND = "* * * * * *"


def _noop() -> None:
    """A job function for jobs that are only ever claimed, never run."""


def now_ms() -> int:
    """This instance's clock, the one a scheduler writes into ``Claim.now_ms``."""
    return time.time_ns() // 1_000_000


def unique_name(prefix: str = "cf") -> str:
    """A job name no other test (or earlier run of this one) has used.

    The factory's namespace already isolates tests; the random suffix also
    keeps reruns against a store that outlived a crashed test apart.
    """
    return check_job_name(f"{prefix}-{secrets.token_hex(4)}")


def make_job(backend: Backend, name: str, cron: str = EVERY_SECOND, func: JobFunc = _noop, **options: Any) -> Job:
    """Build a job exactly as ``Scheduler.add()`` does, checks included: through the same
    :func:`anarchon.build_job`. Raises what ``add()`` raises."""
    return build_job(backend, name, cron, func, **options)


def finished_run(
    grant: Grant,
    status: RunStatus = RunStatus.SUCCEEDED,
    *,
    error: str | None = None,
    finished_ms: int | None = None,
) -> Run:
    """The record a scheduler hands to :meth:`~anarchon.backend.Backend.finish` for a grant."""
    started = grant.started_at_ms or now_ms()
    finished = max(started, finished_ms if finished_ms is not None else now_ms())
    return grant.finished(status, started_ms=started, finished_ms=finished, error=error)
