"""Run lines a person can follow, and that stay readable at a thousand runs a second.

One INFO line per run start and end (job, slot in UTC and in the job's zone,
instance, attempt, duration, status), per overlap skip and catch-up, each
with the same facts as ``extra`` fields (``job``, ``slot_ms``, ``instance``,
``attempt``, ``fencing``, ``status``) for a JSON formatter. Above
``INFO_LINES_PER_SECOND`` such lines in one second, the rest of that second's
go to DEBUG and one summary line at INFO says how many there were; a failed
run's traceback follows the same rule, so a storm of failures cannot bury the
log either.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from .context import RunContext
from .job import Job

__all__ = ["INFO_LINES_PER_SECOND", "RunLog"]

log = logging.getLogger("anarchon.runs")

#: Run lines per second at INFO before the rest of the second goes to DEBUG.
INFO_LINES_PER_SECOND = 20


def _when(job: Job, slot_ms: int) -> str:
    """The slot in UTC, and in the job's zone when that is another."""
    utc = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(slot_ms / 1000)) + f".{slot_ms % 1000:03d}Z"
    if job.timezone == "UTC":
        return utc
    local = datetime.fromtimestamp(slot_ms / 1000, ZoneInfo(job.timezone))
    return f"{utc} ({local.strftime('%H:%M:%S %Z')} {job.timezone})"


def facts(ctx: RunContext, **more: Any) -> dict[str, Any]:
    """The ``extra`` fields of a run's log records."""
    return {
        "job": ctx.job.name,
        "slot_ms": ctx.slot_ms,
        "instance": ctx.instance,
        "attempt": ctx.attempt,
        "fencing": ctx.fencing,
        **more,
    }


class RunLog:
    def __init__(self, per_second: int = INFO_LINES_PER_SECOND) -> None:
        self._per_second = per_second
        self._window = 0.0
        self._lines = 0
        self._quiet: Counter[str] = Counter()
        self._flush: asyncio.TimerHandle | None = None

    def _level(self, event: str) -> int:
        """INFO while this second's budget lasts, then DEBUG (counted for the summary)."""
        now = time.monotonic()
        if now >= self._window + 1:
            self._summarise()
            self._window, self._lines = now, 0
        self._lines += 1
        if self._lines <= self._per_second:
            return logging.INFO
        self._quiet[event] += 1
        if self._flush is None:
            with contextlib.suppress(RuntimeError):  # outside a loop the summary waits for the next line
                loop = asyncio.get_running_loop()
                self._flush = loop.call_later(max(0.0, self._window + 1 - now), self._summarise)
        return logging.DEBUG

    def _summarise(self) -> None:
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        if self._quiet:
            counts = ", ".join(f"{n} {event}" for event, n in sorted(self._quiet.items()))
            log.info(
                "in the last second also %s (run lines above %d a second are logged at DEBUG)",
                counts,
                self._per_second,
                extra={"summary": dict(self._quiet)},
            )
            self._quiet.clear()

    def started(self, ctx: RunContext) -> None:
        if not log.isEnabledFor(logging.INFO):
            return  # nobody would see the line: format nothing (a thousand runs a second pay for this)
        level = self._level("started")
        if not log.isEnabledFor(level):
            return
        job = ctx.job
        how = f" (catch-up of {ctx.missed} slots)" if ctx.catch_up else " (manual)" if ctx.manual else ""
        log.log(
            level,
            "job %s, slot %s: started on %s, attempt %d%s",
            job.name,
            _when(job, ctx.slot_ms),
            ctx.instance,
            ctx.attempt,
            how,
            extra=facts(ctx, status="running"),
        )

    def ended(self, ctx: RunContext, status: str, duration_ms: int, error: str | None) -> None:
        if not log.isEnabledFor(logging.WARNING if status in ("failed", "timed-out") else logging.INFO):
            return
        level = self._level(status)
        if level == logging.INFO and status in ("failed", "timed-out"):
            level = logging.WARNING
        if not log.isEnabledFor(level):
            return
        log.log(
            level,
            "job %s, slot %s: %s on %s in %d ms, attempt %d%s",
            ctx.job.name,
            _when(ctx.job, ctx.slot_ms),
            status,
            ctx.instance,
            duration_ms,
            ctx.attempt,
            f": {error}" if error else "",
            extra=facts(ctx, status=status, duration_ms=duration_ms),
        )

    def failed(self, ctx: RunContext, exc: BaseException) -> None:
        """The traceback of a job that raised, within the same budget as the run lines."""
        level = logging.ERROR if self._level("tracebacks") == logging.INFO else logging.DEBUG
        log.log(
            level, "job %s, slot %s raised", ctx.job.name, _when(ctx.job, ctx.slot_ms), exc_info=exc, extra=facts(ctx)
        )

    def skipped(self, job: Job, slot_ms: int, instance: str) -> None:
        if not log.isEnabledFor(logging.INFO):
            return
        level = self._level("skipped")
        if not log.isEnabledFor(level):
            return
        log.log(
            level,
            "job %s, slot %s: skipped, the previous run still holds its lease (overlap='skip')",
            job.name,
            _when(job, slot_ms),
            extra={"job": job.name, "slot_ms": slot_ms, "instance": instance, "status": "skipped"},
        )
