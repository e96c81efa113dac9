"""Pauses and run requests in Redis: with the job's keys, and one index per prefix for the polls.

A job's pause is four fields of its state hash (``paused_since``,
``paused_until`` once resumed, ``paused_reason``, ``paused_by``): it lives with
the job, under the job's hash tag, so ``claim_paused`` reads it in the same
script that records the slot. Every instance polls the pauses twice a second,
so they are also copied, as JSON, into one hash per prefix
(``<prefix>pauses``), read with one ``HGETALL``; on Redis Cluster that key is
on another node, so the copy is written after the job's own fields, and the
job's fields decide. Run requests are one sorted set per prefix
(``<prefix>requests``, member ``slot:job:by``, scored by slot).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from anarchon.backend import Claim, ClaimResult, Outcome
from anarchon.control import REQUEST_TTL_MS, PauseState, RunRequest

from . import _scripts as S
from ._records import run_of, text

if TYPE_CHECKING:
    from ._names import Keyspace

__all__ = ["ControlMixin"]


def _state_json(state: PauseState) -> str:
    return json.dumps(
        {"since": state.since_ms, "until": state.until_ms, "reason": state.reason, "by": state.by}, sort_keys=True
    )


def _state_of(job: str, raw: Any) -> PauseState | None:
    try:
        data = json.loads(raw)
        return PauseState(job, int(data["since"]), data.get("until"), data.get("reason"), data.get("by"))
    except (ValueError, TypeError, KeyError):
        return None  # not written by anarchon: no pause known from it (the job's own fields still decide)


def _request_of(member: Any) -> RunRequest | None:
    slot, _, rest = text(member).partition(":")
    job, _, by = rest.partition(":")
    if not slot.isdigit() or not job:
        return None
    return RunRequest(job, int(slot), by or None)


class ControlMixin:
    """Mixed into :class:`~anarchon_redis.RedisBackend`."""

    _keys: Keyspace

    if TYPE_CHECKING:  # the backend's own, used here

        async def _call(self, script: S.Script, keys: list[str], args: list[Any]) -> Any: ...

        def _redis(self) -> Any: ...

        async def _tell_control(self, job: str) -> None: ...

        async def _calls(
            self, calls: Sequence[tuple[S.Script, list[str], list[Any]]], *, strict: int | None = None
        ) -> list[Any]: ...

    @property
    def _pauses_key(self) -> str:
        return f"{self._keys.prefix}pauses"

    @property
    def _requests_key(self) -> str:
        return f"{self._keys.prefix}requests"

    async def pause(self, job: str, *, reason: str | None = None, by: str | None = None) -> PauseState:
        since = await self._call(S.PAUSE, [self._keys.job(job).state], [reason or "", by or ""])
        state = PauseState(job, int(since), None, reason, by)
        await self._redis().hset(self._pauses_key, job, _state_json(state))
        await self._tell_control(job)
        return state

    async def resume(self, job: str, *, by: str | None = None) -> PauseState | None:
        reply = await self._call(S.RESUME, [self._keys.job(job).state], [])
        if not reply:
            return None
        reason, paused_by = text(reply[2]) or None, text(reply[3]) or None
        state = PauseState(job, int(reply[0]), int(reply[1]), reason, paused_by)
        await self._redis().hset(self._pauses_key, job, _state_json(state))
        await self._tell_control(job)
        return state

    async def pauses(self) -> list[PauseState]:
        raw = await self._redis().hgetall(self._pauses_key)
        found = (_state_of(text(job), value) for job, value in raw.items())
        return sorted((p for p in found if p is not None), key=lambda p: p.job)

    async def claim_paused(self, claims: Sequence[Claim]) -> list[ClaimResult | None]:
        sent = [c for c in claims if not c.manual]  # manual runs are never paused
        if not sent:
            return [None] * len(claims)
        replies = iter(await self._calls([(S.CLAIM_PAUSED, *_keys_args(self, c)) for c in sent]))
        return [None if c.manual else _answer(next(replies)) for c in claims]

    async def request_run(self, job: str, *, by: str | None = None) -> RunRequest:
        slot = await self._call(S.REQUEST, [self._requests_key], [job, by or "", REQUEST_TTL_MS])
        await self._tell_control(job)
        return RunRequest(job, int(slot), by)

    async def run_requests(self) -> list[RunRequest]:
        members = await self._call(S.REQUESTS, [self._requests_key], [REQUEST_TTL_MS])
        return [r for r in map(_request_of, members) if r is not None]

    async def run_requests_done(self, requests: Sequence[RunRequest]) -> None:
        if requests:
            members = [f"{r.slot_ms}:{r.job}:{r.by or ''}" for r in requests]
            await self._redis().zrem(self._requests_key, *members)


def _keys_args(backend: ControlMixin, c: Claim) -> tuple[list[str], list[Any]]:
    k = backend._keys.job(c.job)
    opts = c.options
    args = [
        c.slot_ms, c.token, c.instance, c.job, c.now_ms, int(c.catch_up), c.missed, opts.lease_ms,
        opts.history_size, opts.history_ttl_ms or 0,
    ]  # fmt: skip
    return [k.state, k.runs, k.order, k.live], args


def _answer(reply: Any) -> ClaimResult | None:
    if reply is None:
        return None
    if text(reply[0]) == "paused":
        return ClaimResult(Outcome.PAUSED, record=run_of(reply[1]))
    return ClaimResult(Outcome.LOST)
