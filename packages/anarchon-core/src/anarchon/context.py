"""What a job function receives, and the shapes a job function may take."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .job import Job
from .run import ms_to_datetime

__all__ = ["JobFunc", "RunContext"]


@dataclass
class RunContext:
    """What a job function may take as its one argument.

    ``lease_lost`` turns true when this instance no longer owns the run (its
    lease was taken over or could not be renewed in time); a sync job should
    check it between steps, an async job is also cancelled.

    ``attempt`` is the runner (1, or more after take-overs); ``retry`` is 0 on
    a runner's first try of the slot and 1, 2, … on its retries after the job
    raised (the ``retries`` option).
    """

    job: Job
    slot_ms: int
    instance: str
    attempt: int = 1
    fencing: int | None = None
    manual: bool = False
    catch_up: bool = False
    missed: int = 0
    lease_lost: bool = False
    retry: int = 0

    @property
    def slot(self) -> datetime:
        return ms_to_datetime(self.slot_ms)


JobFunc = (
    Callable[[], Any]
    | Callable[[RunContext], Any]
    | Callable[[], Awaitable[Any]]
    | Callable[[RunContext], Awaitable[Any]]
)
