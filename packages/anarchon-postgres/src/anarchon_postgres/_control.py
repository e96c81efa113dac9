"""Pauses and run requests in PostgreSQL: tables ``pauses`` and ``requests`` of the schema (migration 5).

A paused job's scheduled claims go to the ``claim_paused`` function, which
decides each under the job row's lock, as ``claim()`` does, so a slot is
recorded ``paused`` once. Every other statement here is one short query.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from anarchon.backend import Claim, ClaimResult, Outcome
from anarchon.control import REQUEST_TTL_MS, PauseState, RunRequest, paused_run
from anarchon.run import ms_to_datetime

from ._schema import quote_schema, render_sql

if TYPE_CHECKING:
    import asyncpg  # type: ignore[import-untyped]

__all__ = ["ControlMixin"]

T = TypeVar("T")

#: Tries of a request whose slot a concurrent request of the same job took.
_REQUEST_TRIES = 10
#: The migration that made the ``pauses`` table: a schema from before it stores no pause.
PAUSES_SINCE = 5


@dataclass(frozen=True)
class _Statements:
    """Each field is the resource file ``sql/statement_control_<field>.sql``, rendered by :func:`.render_sql`."""

    pause: str
    resume: str
    pauses: str
    claim_paused: str
    request: str
    requests: str
    done: str
    notify: str


@functools.lru_cache(maxsize=64)
def _statements(schema: str) -> _Statements:
    s = quote_schema(schema)
    return _Statements(
        **{f.name: render_sql(f"statement_control_{f.name}.sql", s).strip() for f in dataclasses.fields(_Statements)}
    )


def _state(row: Any) -> PauseState:
    return PauseState(row[0], row[1], row[2], row[3], row[4])


class ControlMixin:
    """Mixed into :class:`~anarchon_postgres.PostgresBackend`."""

    schema: str
    _timeout: float
    _read_only: bool
    schema_version: int | None

    if TYPE_CHECKING:  # the backend's own, used here

        def _missing_schema(self) -> None: ...

        async def _call(self, what: str, op: Callable[[asyncpg.Connection, bool], Awaitable[T]]) -> T: ...

    async def _one(self, what: str, sql: str, *args: Any) -> list[Any]:
        timeout = self._timeout

        async def op(conn: asyncpg.Connection, retry: bool) -> list[Any]:
            return list(await conn.fetch(sql, *args, timeout=timeout))

        return await self._call(what, op)

    async def pause(self, job: str, *, reason: str | None = None, by: str | None = None) -> PauseState:
        (row,) = await self._one("pause", _statements(self.schema).pause, job, reason, by)
        await self._tell_control(job)
        return _state(row)

    async def resume(self, job: str, *, by: str | None = None) -> PauseState | None:
        rows = await self._one("resume", _statements(self.schema).resume, job)
        await self._tell_control(job)
        return _state(rows[0]) if rows else None

    async def _tell_control(self, job: str) -> None:
        """Notify the change on the schema's control channel (after its commit); one lost is read by the 10 s poll."""
        with contextlib.suppress(Exception):
            await self._one("notify", _statements(self.schema).notify, job)

    async def pauses(self) -> list[PauseState]:
        if self._read_only and (self.schema_version or 0) < PAUSES_SINCE:
            # A look (``anarchon pauses``, ``jobs``) never migrates: no tables at all is a LookupError
            # naming the schema, as for history; a schema from before pauses existed holds none.
            self._missing_schema()
            return []
        return [_state(row) for row in await self._one("pauses", _statements(self.schema).pauses)]

    async def claim_paused(self, claims: Sequence[Claim]) -> list[ClaimResult | None]:
        sent = [c for c in claims if not c.manual]  # manual runs are never paused
        if not sent:
            return [None] * len(claims)
        columns = (
            [c.job for c in sent],
            [c.slot_ms for c in sent],
            [c.token for c in sent],
            [c.instance for c in sent],
            [ms_to_datetime(c.now_ms) for c in sent],
            [c.catch_up for c in sent],
            [c.missed for c in sent],
            [c.options.lease_ms for c in sent],
            [c.options.history_size for c in sent],
            [c.options.history_ttl_ms for c in sent],
        )
        rows = {
            row[0]: row[1] for row in await self._one("claim_paused", _statements(self.schema).claim_paused, *columns)
        }
        answers = iter([_answer(c, rows[n]) for n, c in enumerate(sent, 1)])
        return [None if c.manual else next(answers) for c in claims]

    async def request_run(self, job: str, *, by: str | None = None) -> RunRequest:
        for _ in range(_REQUEST_TRIES):
            rows = await self._one("request_run", _statements(self.schema).request, job, by, REQUEST_TTL_MS)
            if rows:
                await self._tell_control(job)
                return RunRequest(job, rows[0][0], by)
        raise RuntimeError(f"request_run({job!r}): {_REQUEST_TRIES} concurrent requests took every slot; try again")

    async def run_requests(self) -> list[RunRequest]:
        rows = await self._one("run_requests", _statements(self.schema).requests, REQUEST_TTL_MS)
        return [RunRequest(row[0], row[1], row[2]) for row in rows]

    async def run_requests_done(self, requests: Sequence[RunRequest]) -> None:
        if requests:
            jobs, slots = [r.job for r in requests], [r.slot_ms for r in requests]
            await self._one("run_requests_done", _statements(self.schema).done, jobs, slots)


def _answer(c: Claim, outcome: str) -> ClaimResult | None:
    if outcome == "none":
        return None
    if outcome == "paused":
        return ClaimResult(Outcome.PAUSED, record=paused_run(c))
    return ClaimResult(Outcome.LOST)
