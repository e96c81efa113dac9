"""Retries: a runner re-runs a slot whose run raised, under the grant it holds.

Where a retry runs decides what can go wrong, so it runs *here*, in the
instance that won the slot, inside the same grant: on a lease backend the
lease keeper keeps renewing the lease through the delay and every later
try, so no second claim is made and no other instance can start a retry of
the same slot. If the runner dies meanwhile, a backup takes the run over as
for any dead runner (``attempt`` + 1) and starts its own tries from the
first. On a claim backend there is no lease: the same process retries, and
a process that dies loses its remaining retries with the run.

A try that ``failed`` (the job raised) is retried, and so is a ``timed-out``
one of an async job: a timeout is most often a slow dependency, the failure
users most want retried (Oban and River count it as an error, too), and
cancelling an async job stops it. A sync job's thread cannot be stopped, so
its timed-out try may still be running: it is not retried, or two tries of
one slot would run at once. A ``cancelled`` try (stop, lost lease) is never
retried: the run belongs to someone else then.
"""

from __future__ import annotations

import logging
import random

from ._active import ActiveRun, Flag
from ._invoke import JobInvoker
from ._waits import at_most
from .job import Job
from .options import JobOptions
from .run import RunStatus, retried_error

__all__ = ["invoke_with_retries", "retry_delay_ms"]

log = logging.getLogger("anarchon.runs")
_RANDOM = random.Random()


def retry_delay_ms(options: JobOptions, retry: int, rng: random.Random | None = None) -> int:
    """The wait before retry number ``retry`` (1 for the first): doubling from ``retry_delay_ms``, capped.

    With ``retry_jitter`` the wait is drawn from the upper half of that
    ("equal jitter"): jobs that failed together, on one outage, spread their
    retries, and no wait is shorter than half the configured one.
    """
    base = min(options.retry_delay_max_ms, options.retry_delay_ms << min(retry - 1, 62))
    if not options.retry_jitter or base <= 1:
        return base
    return (rng or _RANDOM).randint(base // 2, base)


def _retryable(job: Job, status: RunStatus) -> bool:
    return status is RunStatus.FAILED or (status is RunStatus.TIMED_OUT and job.is_async)


async def _wait(active: ActiveRun, delay_ms: int) -> bool:
    """Wait for the retry; ``False`` when the run was cancelled meanwhile (stop, lost lease)."""
    flag = active.between_tries = Flag()
    try:
        await at_most(flag.wait(), delay_ms / 1000)
        return not flag.is_set and not active.context.lease_lost
    finally:
        active.between_tries = None


async def invoke_with_retries(invoker: JobInvoker, job: Job, active: ActiveRun) -> tuple[RunStatus, str | None]:
    """Call the job, and again after a failed try while retries are left; the last try's status.

    The error is the last failed try's, headed by the retry count
    (:func:`~anarchon.run.retried_error`), so history shows both.
    """
    ctx = active.context
    status, error = await invoker.invoke(job, active)
    last_error = error
    while ctx.retry < job.options.retries and _retryable(job, status) and not ctx.lease_lost:
        delay = retry_delay_ms(job.options, ctx.retry + 1)
        log.info(
            "job %s, slot %s: try %d %s (%s); retrying in %d ms",
            job.name,
            ctx.slot,
            ctx.retry + 1,
            status.value,
            error,
            delay,
            extra={"job": job.name, "slot_ms": ctx.slot_ms, "attempt": ctx.attempt, "retry": ctx.retry + 1},
        )
        if not await _wait(active, delay):
            # Stopped (or the lease lost) before the retry: as a cancelled run, so a stop with hand_over
            # hands it to a backup, which has every retry left.
            status = RunStatus.CANCELLED
            break
        ctx.retry += 1
        active.cancels, active.timed_out = 0, False  # the last try's cancels were undone when it returned
        status, error = await invoker.invoke(job, active)
        if error is not None:
            last_error = error
    return status, retried_error(last_error, ctx.retry)
