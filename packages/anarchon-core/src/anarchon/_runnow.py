"""``Scheduler.run_now``: run a job here, now, through the backend's claim, and return the finished run."""

from __future__ import annotations

import contextlib
import random
import time

from ._batcher import ClaimBatcher
from ._registry import JobRegistry
from ._runner import RunExecutor
from .backend import Backend, Outcome
from .clock import Clock
from .errors import AnarchonError
from .observers import Observers
from .run import Run, RunStatus

__all__ = ["RunNow"]

#: Tries of ``run_now`` when another instance ran the job in the same millisecond.
RUN_NOW_TRIES = 20


class RunNow:
    """Mixed into :class:`~anarchon.Scheduler`."""

    instance_id: str
    backend: Backend
    clock: Clock
    _registry: JobRegistry
    _batcher: ClaimBatcher
    _runner: RunExecutor
    _observers: Observers

    def _connected(self) -> contextlib.AbstractAsyncContextManager[Backend]:
        raise NotImplementedError

    async def run_now(self, name: str) -> Run:
        """Run the job now on this instance, through the backend, and return the finished run."""
        job = self._registry.get(name)
        async with self._connected():
            slot_ms = self.clock.now_ms()
            for _ in range(RUN_NOW_TRIES):
                claim = self._batcher.claim(job, slot_ms, manual=True)
                sent = time.monotonic()
                (result,) = await self.backend.claim([claim])
                if result.outcome is Outcome.WON and result.grant is not None:
                    run = await self._runner.execute(job, result.grant, sent)
                    if run is None:
                        raise AnarchonError(f"run_now({name!r}): this instance lost the lease during the run")
                    return run
                if result.outcome is Outcome.SKIPPED:
                    self._observers.slot_skipped(job, slot_ms, "overlap")
                    return result.record or Run(
                        job=name, slot_ms=slot_ms, status=RunStatus.SKIPPED, instance=self.instance_id, manual=True
                    )
                if result.outcome is Outcome.UNKNOWN:
                    break
                # Another caller ran it in the same millisecond. A random step, not +1: callers that
                # collided would otherwise collide again at every try, in lockstep (six threads of
                # one web process calling run_now at once used up the tries: a recipe's CI failure).
                slot_ms = max(slot_ms + random.randint(1, 16), self.clock.now_ms())
            raise AnarchonError(f"run_now({name!r}): the backend did not grant a manual run; try again")
