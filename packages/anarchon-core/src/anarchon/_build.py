"""Building a job as ``Scheduler.add()`` does, for the scheduler and the conformance suite alike."""

from __future__ import annotations

from typing import Any

from .backend import Backend
from .context import JobFunc
from .job import Job
from .options import check_job_name

__all__ = ["build_job"]


def build_job(backend: Backend, name: str, cron: str, func: JobFunc, **options: Any) -> Job:
    """Build a job exactly as ``Scheduler.add()`` does, checks included, without adding it.

    The name check, then the backend's :meth:`~anarchon.backend.Backend.job_options`
    (tier defaults and refusals), then the job itself with its jitter fitted to
    its schedule (:meth:`~anarchon.job.Job.fit_jitter`), then the backend's own
    :meth:`~anarchon.backend.Backend.check_job`. The conformance suite builds
    its jobs through this same function.
    """
    check_job_name(name)
    job = Job(name, cron, func, backend.job_options(name, options)).fit_jitter(explicit="jitter_ms" in options)
    backend.check_job(job)
    return job
