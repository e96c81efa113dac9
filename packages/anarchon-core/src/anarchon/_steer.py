"""The scheduler's fleet-steering calls: pause, resume, trigger, and waiting for a triggered run.

Each writes to the backend and returns; the fleet acts on its control poll
(``anarchon.control``). They work whether or not this scheduler is started,
and for any valid job name (a control process need not have the jobs).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

from ._identity import default_actor
from ._pausegate import PauseGate
from .audit import AuditEntry, read_audit, record_audit
from .backend import Backend
from .control import PauseState, RunRequest
from .errors import AnarchonError
from .groups import GroupState
from .options import check_job_name
from .run import Run

__all__ = ["Steering", "TriggerTimeoutError"]

#: How often ``trigger_result`` reads the history while it waits.
RESULT_POLL_S = 0.25


class TriggerTimeoutError(AnarchonError, TimeoutError):
    """No instance ran a triggered job (or the run did not end) within the wait."""


class Steering:
    """Mixed into :class:`~anarchon.Scheduler`."""

    _gate: PauseGate

    def _connected(self) -> contextlib.AbstractAsyncContextManager[Backend]:
        raise NotImplementedError

    async def pause(self, name: str, *, reason: str | None = None, by: str | None = None) -> PauseState:
        """Pause the job on every instance: its scheduled slots are recorded ``paused``, not run.

        Each instance stops claiming them at its next control poll (at most
        1.25 x ``CONTROL_POLL_MS`` = 625 ms); the pause is stored with the job,
        so it survives restarts of every instance. Runs already going finish.
        Manual runs (``run_now``, ``trigger``) still run. Raises
        :class:`~anarchon.errors.UnsupportedOperationError` on a backend
        without the ``pause`` capability (``anarchon backends`` lists each one's).

        ``by`` names who pauses (the dashboard passes the signed-in name; by
        default ``user@host`` of this process): it is stored with the pause and,
        with ``reason``, appended to the audit trail (:mod:`anarchon.audit`).
        """
        check_job_name(name)
        who = by or default_actor()
        async with self._connected() as backend:
            state = await backend.pause(name, reason=reason, by=who)
            await record_audit(backend, "pause", name, by=who, reason=reason, detail={"since_ms": state.since_ms})
        self._gate.learn(state)
        return state

    async def resume(self, name: str, *, reason: str | None = None, by: str | None = None) -> PauseState | None:
        """End the job's pause; the pause as it ended, or ``None`` when the job was not paused.

        Slots due during the pause stay paused: resuming runs none of them,
        and a catch-up after an outage skips them. The next slot after the
        resume runs as usual. ``by`` and ``reason`` go to the audit trail, as for :meth:`pause`
        (a resume of a job that was not paused is recorded too: someone asked).
        """
        check_job_name(name)
        who = by or default_actor()
        async with self._connected() as backend:
            state = await backend.resume(name, by=who)
            detail = {"was_paused": state is not None, "since_ms": state.since_ms if state is not None else None}
            await record_audit(backend, "resume", name, by=who, reason=reason, detail=detail)
        if state is not None:
            self._gate.learn(state)
        return state

    async def pauses(self) -> list[PauseState]:
        """Every pause stored in the backend's namespace, ended ones too (``until_ms`` set), by job name."""
        async with self._connected() as backend:
            return await backend.pauses()

    async def groups(self) -> list[GroupState]:
        """Each concurrency group with a stored limit or a live place: limit, running, waiting (anarchon.groups).

        Raises :class:`~anarchon.errors.UnsupportedOperationError` on a backend
        without the ``groups`` capability; ``anarchon groups list`` is the same
        from the command line.
        """
        async with self._connected() as backend:
            return await backend.groups()

    async def pause_state(self, name: str) -> PauseState | None:
        """The job's stored pause (an ended one too: ``until_ms`` set), ``None`` if never paused."""
        check_job_name(name)
        return next((p for p in await self.pauses() if p.job == name), None)

    async def trigger(self, name: str, *, reason: str | None = None, by: str | None = None) -> RunRequest:
        """Ask the fleet to run the job once now; returns the request at once.

        The first instance that has the job and polls (within about half a
        second) claims it as a manual run of ``request.slot_ms``; exactly one
        instance runs it. Unlike :meth:`run_now`, this process does not run
        it. Await :meth:`trigger_result` for the finished run. A request no
        instance takes within ``REQUEST_TTL_MS`` (5 minutes) is dropped.
        ``by`` and ``reason`` go to the audit trail, as for :meth:`pause`.
        """
        check_job_name(name)
        who = by or default_actor()
        async with self._connected() as backend:
            request = await backend.request_run(name, by=who)
            await record_audit(backend, "trigger", name, by=who, reason=reason, detail={"slot_ms": request.slot_ms})
        return request

    async def audit(self, *, limit: int = 50, before_id: int | None = None, job: str | None = None) -> list[AuditEntry]:
        """The audit trail, newest first: every pause, resume, trigger, backfill and schedule change.

        ``limit`` entries at most, those below ``before_id`` (the next page), of ``job`` alone when
        given; see :mod:`anarchon.audit`. Raises
        :class:`~anarchon.errors.UnsupportedOperationError` on a backend without the ``audit`` capability.
        """
        if job is not None:
            check_job_name(job)
        async with self._connected() as backend:
            return await read_audit(backend, limit=limit, before_id=before_id, job=job)

    async def trigger_result(self, request: RunRequest, *, timeout_s: float = 60.0) -> Run:
        """Wait for the run a :meth:`trigger` became to finish, and return it.

        Raises :class:`TriggerTimeoutError` when no instance took it, or the
        run had not ended, within ``timeout_s``. A request no instance took
        is then withdrawn, so it does not run when an instance starts later
        (one that read it in that very moment still runs it).
        """
        deadline = time.monotonic() + timeout_s
        seen: Run | None = None
        async with self._connected() as backend:
            async for run in _poll_run(backend, request):
                seen = run
                if run is not None and run.status.final:
                    return run
                if time.monotonic() > deadline:
                    if run is None:
                        await backend.run_requests_done([request])
                    break
        what = (
            f"instance {seen.instance} took it and it is still {seen.status.value}"
            if seen is not None
            else "no instance took it, and the request is withdrawn: is an instance with that job running on "
            "this backend and namespace?"
        )
        raise TriggerTimeoutError(
            f"trigger of {request.job!r} (slot {request.slot_ms}): no finished run after {timeout_s:g} s; {what}"
        )


async def _poll_run(backend: Backend, request: RunRequest) -> AsyncIterator[Run | None]:
    """The manual run of the request's slot as history shows it, read every ``RESULT_POLL_S``."""
    while True:
        runs = await backend.history(request.job, limit=500)
        yield next((r for r in runs if r.manual and r.slot_ms == request.slot_ms), None)
        await asyncio.sleep(RESULT_POLL_S)
