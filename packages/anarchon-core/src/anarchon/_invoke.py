"""Calling a job function: async jobs in the run's task, sync jobs in a thread pool.

The run's task is the one that called :meth:`JobInvoker.invoke`; cancelling it
while ``in_job`` stops the job alone, and the cancels asked for the job are
undone once it returned, so the run's bookkeeping never sees them.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import inspect
import sys
import time

from ._active import ActiveRun
from ._health import error_text
from ._runlog import RunLog
from .context import RunContext
from .job import Job
from .run import RunStatus

__all__ = ["JobInvoker"]

#: Sync jobs running at once in one scheduler; more wait for a thread.
MAX_THREADS = 64


class JobInvoker:
    def __init__(self, runlog: RunLog) -> None:
        self._runlog = runlog
        #: (job, began, ended) of the latest async calls, monotonic: the watchdog's suspects.
        self.recent: collections.deque[tuple[str, float, float]] = collections.deque(maxlen=256)
        self._threads: concurrent.futures.ThreadPoolExecutor | None = None

    def shutdown(self) -> None:
        if self._threads is not None:
            self._threads.shutdown(wait=False, cancel_futures=True)
            self._threads = None

    async def invoke(self, job: Job, active: ActiveRun) -> tuple[RunStatus, str | None]:
        """Call the job function in this task and say how it ended.

        An async job is awaited here rather than in a task of its own: with
        a thousand runs due at once, a second task per run (and the shield
        and timer around it) was a large share of the delay before the last
        one started. Cancelling this task while ``in_job`` stops the job
        alone; :meth:`ActiveRun.cancel_job` refuses once it returned.
        """
        ctx = active.context
        args = (ctx,) if job.takes_context else ()
        task = asyncio.current_task()
        active.task = task
        active.in_job = True
        timer = None
        timeout_ms = job.options.timeout_ms
        if timeout_ms:
            timer = asyncio.get_running_loop().call_later(timeout_ms / 1000, active.time_out)
        status: RunStatus
        error: str | None = None
        began = time.monotonic()
        try:
            await self._call(job, args)
        except asyncio.CancelledError:
            status = RunStatus.CANCELLED
        except asyncio.TimeoutError:
            status = RunStatus.TIMED_OUT
        except (Exception, SystemExit, KeyboardInterrupt) as exc:
            # SystemExit and KeyboardInterrupt are contained too: a job that raises them would otherwise
            # end the process, and every instance that took the run over would die of it in turn.
            self._runlog.failed(ctx, exc)
            status, error = RunStatus.FAILED, error_text(exc)
        else:
            status = RunStatus.SUCCEEDED
            took_ms = (time.monotonic() - began) * 1000
            if timeout_ms and took_ms > timeout_ms:
                # The timer could not fire: the job blocked the event loop (time.sleep in async def).
                return RunStatus.TIMED_OUT, (
                    f"TimeoutError: returned after {took_ms:.0f} ms, past timeout_ms={timeout_ms}; "
                    "it blocked the event loop, so it could not be cancelled in time"
                )
        finally:
            if job.is_async:
                self.recent.append((job.name, began, time.monotonic()))
            active.job_returned()
            if timer is not None:
                timer.cancel()
            if sys.version_info >= (3, 11) and task is not None:
                for _ in range(active.cancels):
                    task.uncancel()  # those cancels were the job's, not this task's: finishing must not see them
        if status is RunStatus.TIMED_OUT or active.timed_out:
            return RunStatus.TIMED_OUT, f"TimeoutError: no result within timeout_ms={job.options.timeout_ms}"
        return status, error

    async def _call(self, job: Job, args: tuple[RunContext, ...] | tuple[()]) -> None:
        if job.is_async:
            await job.func(*args)
            return
        if self._threads is None:
            self._threads = concurrent.futures.ThreadPoolExecutor(
                max_workers=MAX_THREADS, thread_name_prefix="anarchon-job"
            )
        loop = asyncio.get_running_loop()
        result = await loop.run_in_executor(self._threads, lambda: job.func(*args))
        if inspect.isawaitable(result):
            # A plain function that returns a coroutine (``lambda: fetch()``) means that coroutine:
            # dropping it would record a success for work that never ran.
            await result
