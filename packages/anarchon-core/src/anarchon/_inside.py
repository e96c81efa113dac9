"""Whether the code running now is a job's run, so ``stop()`` can tell it is called from one.

A job that awaits ``scheduler.stop()`` waits for itself: ``stop()`` waits
for every running job to end, this one included, so before this it left the
scheduler half stopped (connection open, lease renewed, record ``running``).
The scheduler marks each run's task with :func:`running_job` and ``stop()``
asks :func:`current_job`: called from a job, it starts the stop in a task of
its own and returns at once, so the job ends, is recorded, and the stop then
completes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

__all__ = ["current_job", "running_job"]

_JOB: ContextVar[str | None] = ContextVar("anarchon_running_job", default=None)


@contextlib.contextmanager
def running_job(name: str) -> Iterator[None]:
    """Mark the code inside (and the tasks and threads it starts with its context) as job ``name``'s run."""
    token = _JOB.set(name)
    try:
        yield
    finally:
        _JOB.reset(token)


def current_job() -> str | None:
    """The name of the job whose run is executing here, or ``None`` outside any run."""
    return _JOB.get()
