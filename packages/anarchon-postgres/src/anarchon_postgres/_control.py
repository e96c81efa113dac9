"""Pauses and run requests in PostgreSQL: tables ``pauses`` and ``requests`` of the schema (migration 4).

A paused job's scheduled claims go to the ``claim_paused`` function, which
decides each under the job row's lock, as ``claim()`` does, so a slot is
recorded ``paused`` once. Every other statement here is one short query.
"""

from __future__ import annotations

# ruff: noqa: S608 - the only identifier in this SQL is the schema name, checked and quoted first
import functools
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from anarchon.backend import Claim, ClaimResult, Outcome
from anarchon.control import REQUEST_TTL_MS, PauseState, RunRequest, paused_run
from anarchon.run import ms_to_datetime

from ._schema import quote_schema

if TYPE_CHECKING:
    import asyncpg  # type: ignore[import-untyped]

__all__ = ["ControlMixin"]

T = TypeVar("T")

_NOW_MS = "floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
_PAUSE_COLUMNS = "job, since_ms, until_ms, reason, paused_by"
#: Tries of a request whose slot a concurrent request of the same job took.
_REQUEST_TRIES = 10


@dataclass(frozen=True)
class _Statements:
    pause: str
    resume: str
    pauses: str
    claim_paused: str
    request: str
    requests: str
    done: str


@functools.lru_cache(maxsize=64)
def _statements(schema: str) -> _Statements:
    s = quote_schema(schema)
    return _Statements(
        # A job already paused keeps its since; a resumed one starts a new pause.
        pause=(
            f"INSERT INTO {s}.pauses AS p ({_PAUSE_COLUMNS}) VALUES ($1, {_NOW_MS}, NULL, $2, $3) "
            "ON CONFLICT (job) DO UPDATE SET since_ms = CASE WHEN p.until_ms IS NULL THEN p.since_ms "
            "ELSE excluded.since_ms END, until_ms = NULL, reason = excluded.reason, paused_by = excluded.paused_by "
            f"RETURNING {_PAUSE_COLUMNS}"
        ),
        resume=(
            f"UPDATE {s}.pauses SET until_ms = greatest(since_ms, {_NOW_MS}) WHERE job = $1 AND until_ms IS NULL "
            f"RETURNING {_PAUSE_COLUMNS}"
        ),
        pauses=f"SELECT {_PAUSE_COLUMNS} FROM {s}.pauses ORDER BY job",
        claim_paused=f"SELECT o_n, o_outcome FROM {s}.claim_paused($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        # One more millisecond per request of the job already at that slot; expired ones deleted first.
        # After the job's newest request, if that is at or past now; a concurrent request at the same slot
        # makes this insert nothing, and the caller asks again. Expired requests are deleted first.
        request=(
            f"WITH old AS (DELETE FROM {s}.requests WHERE slot_ms < {_NOW_MS} - $3) "
            f"INSERT INTO {s}.requests (job, slot_ms, requested_by) "
            f"SELECT $1, greatest({_NOW_MS}, coalesce((SELECT max(slot_ms) + 1 FROM {s}.requests WHERE job = $1), 0)), "
            "$2 ON CONFLICT DO NOTHING RETURNING slot_ms"
        ),
        requests=(
            f"SELECT job, slot_ms, requested_by FROM {s}.requests WHERE slot_ms >= {_NOW_MS} - $1 ORDER BY slot_ms, job"
        ),
        done=f"DELETE FROM {s}.requests r USING unnest($1::text[], $2::bigint[]) AS d(job, slot_ms) "
        "WHERE r.job = d.job AND r.slot_ms = d.slot_ms",
    )


def _state(row: Any) -> PauseState:
    return PauseState(row[0], row[1], row[2], row[3], row[4])


class ControlMixin:
    """Mixed into :class:`~anarchon_postgres.PostgresBackend`."""

    schema: str
    _timeout: float

    if TYPE_CHECKING:  # the backend's own, used here

        async def _call(self, what: str, op: Callable[[asyncpg.Connection, bool], Awaitable[T]]) -> T: ...

    async def _one(self, what: str, sql: str, *args: Any) -> list[Any]:
        timeout = self._timeout

        async def op(conn: asyncpg.Connection, retry: bool) -> list[Any]:
            return list(await conn.fetch(sql, *args, timeout=timeout))

        return await self._call(what, op)

    async def pause(self, job: str, *, reason: str | None = None, by: str | None = None) -> PauseState:
        (row,) = await self._one("pause", _statements(self.schema).pause, job, reason, by)
        return _state(row)

    async def resume(self, job: str, *, by: str | None = None) -> PauseState | None:
        rows = await self._one("resume", _statements(self.schema).resume, job)
        return _state(rows[0]) if rows else None

    async def pauses(self) -> list[PauseState]:
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
