"""Pauses and run requests in the SQLite file: two tables beside the job's book.

``anarchon_pauses`` holds one row per job ever paused (``until_ms`` NULL while
the pause lasts) and ``anarchon_requests`` the run requests not yet taken.
Both are created when a file is opened, if missing (``CREATE TABLE IF NOT
EXISTS`` under the write lock), so files of schema version 1 gain them
without a migration and releases without them ignore them. A paused claim is
one ``BEGIN IMMEDIATE`` transaction, as every claim is, so it is decided once.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from anarchon.backend import Claim, ClaimResult, Outcome
from anarchon.control import REQUEST_TTL_MS, PauseState, RunRequest, paused_run
from anarchon.run import RunStatus

from . import _store
from ._sql import statement
from ._store import Body

T = TypeVar("T")

__all__ = [
    "ControlMixin",
    "claim_paused",
    "pause",
    "pauses",
    "request_run",
    "resume",
    "run_requests",
    "run_requests_done",
]


def _state(row: tuple[str, int, int | None, str | None, str | None]) -> PauseState:
    return PauseState(job=row[0], since_ms=row[1], until_ms=row[2], reason=row[3], by=row[4])


_SELECT_PAUSE = statement("control_select_pause")


def pause(job: str, reason: str | None, by: str | None) -> _store.Body[PauseState]:
    def body(conn: sqlite3.Connection, now: int) -> PauseState:
        old = conn.execute(_SELECT_PAUSE, (job,)).fetchone()
        since = old[1] if old is not None and old[2] is None else now
        conn.execute(
            statement("control_pause"),
            (job, since, reason, by),
        )
        return PauseState(job, since, None, reason, by)

    return body


def resume(job: str) -> _store.Body[PauseState | None]:
    def body(conn: sqlite3.Connection, now: int) -> PauseState | None:
        old = conn.execute(_SELECT_PAUSE, (job,)).fetchone()
        if old is None or old[2] is not None:
            return None
        until = max(old[1], now)
        conn.execute(statement("control_resume"), (until, job))
        return _state((old[0], old[1], until, old[3], old[4]))

    return body


def pauses(conn: sqlite3.Connection) -> list[PauseState]:
    rows = conn.execute(statement("control_pauses"))
    return [_state(row) for row in rows]


def _claim_paused(conn: sqlite3.Connection, c: Claim, now: int) -> ClaimResult | None:
    found = conn.execute(_SELECT_PAUSE, (c.job,)).fetchone()
    if c.manual or found is None or not _state(found).covers(c.slot_ms):
        return None
    existing = conn.execute(_store._SELECT_RUN, (c.job, c.slot_ms, 0)).fetchone()
    if existing is not None:
        if existing[13] == c.token and existing[3] == RunStatus.PAUSED.value:
            return ClaimResult(Outcome.PAUSED, record=_store._run(existing))
        return ClaimResult(Outcome.LOST)
    conn.execute(statement("jobs_ensure"), (c.job,))
    mark, kept = conn.execute(statement("paused_job_read"), (c.job,)).fetchone()
    if mark is not None and c.slot_ms <= mark:
        return ClaimResult(Outcome.LOST)
    record = paused_run(c)
    started_us = c.now_ms * 1000
    row = (
        c.job, c.slot_ms, 0, RunStatus.PAUSED.value, c.instance, 1, None, int(c.catch_up), c.missed,
        started_us, started_us, 0, None, c.token, c.options.lease_ms, now, 0,
    )  # fmt: skip
    conn.execute(_store._INSERT_RUN, row)
    kept = _store._trim(conn, c.spec, kept + 1, now)
    conn.execute(statement("paused_job_update"), (c.slot_ms, kept, c.job))
    return ClaimResult(Outcome.PAUSED, record=record)


def claim_paused(claims: Sequence[Claim]) -> _store.Body[list[ClaimResult | None]]:
    return lambda conn, now: [_claim_paused(conn, c, now) for c in claims]


def request_run(job: str, by: str | None) -> _store.Body[RunRequest]:
    def body(conn: sqlite3.Connection, now: int) -> RunRequest:
        conn.execute(statement("requests_expire"), (now - REQUEST_TTL_MS,))
        slot = now
        while conn.execute(statement("request_exists"), (job, slot)).fetchone():
            slot += 1
        conn.execute(statement("request_insert"), (job, slot, by))
        return RunRequest(job, slot, by)

    return body


def run_requests(conn: sqlite3.Connection, now: int) -> list[RunRequest]:
    """A read, no write lock: every instance polls it. Expired requests are deleted by the writes."""
    rows = conn.execute(
        statement("control_run_requests"),
        (now - REQUEST_TTL_MS,),
    )
    return [RunRequest(job, slot, by) for job, slot, by in rows]


def run_requests_done(requests: Sequence[RunRequest]) -> _store.Body[None]:
    def body(conn: sqlite3.Connection, now: int) -> None:
        conn.execute(statement("requests_expire"), (now - REQUEST_TTL_MS,))
        conn.executemany(statement("request_delete"), [(r.job, r.slot_ms) for r in requests])

    return body


class ControlMixin:
    """Mixed into :class:`~anarchon_sqlite.SQLiteBackend`: pause, resume and run requests, each one transaction."""

    _clock: Callable[[], int]

    if TYPE_CHECKING:  # the backend's own, used here

        async def _call(self, fn: Callable[[sqlite3.Connection], T]) -> T: ...

        async def _write(self, body: Body[T]) -> T: ...

    async def pause(self, job: str, *, reason: str | None = None, by: str | None = None) -> PauseState:
        return await self._write(pause(job, reason, by))

    async def resume(self, job: str, *, by: str | None = None) -> PauseState | None:
        return await self._write(resume(job))

    async def pauses(self) -> list[PauseState]:
        return await self._call(pauses)

    async def claim_paused(self, claims: Sequence[Claim]) -> list[ClaimResult | None]:
        if not claims:
            return []
        return await self._write(claim_paused(claims))

    async def request_run(self, job: str, *, by: str | None = None) -> RunRequest:
        return await self._write(request_run(job, by))

    async def run_requests(self) -> list[RunRequest]:
        now = self._clock()
        return await self._call(lambda conn: run_requests(conn, now))

    async def run_requests_done(self, requests: Sequence[RunRequest]) -> None:
        if requests:
            await self._write(run_requests_done(requests))
