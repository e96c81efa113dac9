"""The backfill claim (:meth:`anarchon.LeaseBackend.backfill`): one script per slot on the job's keys.

The script (``lua/backfill.lua``) grants a slot's scheduled run only when the
slot has no record, under the run id the fleet's claim uses, so Redis runs
one of the racing scripts first and the others find its record. This module
builds the calls and reads the answers, and :class:`BackfillMixin` sends
them in one pipeline, as the backend sends claims.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from anarchon.backend import Claim, ClaimResult, Outcome

from . import _scripts as S
from ._full import Full
from ._names import Keyspace
from ._records import UNKNOWN, grant_of, run_of, text

if TYPE_CHECKING:
    from ._calls import Call

__all__ = ["BACKFILL", "BackfillMixin", "backfill_call", "backfill_result"]

BACKFILL = S.load("backfill", "now_ms", "num", "drop_if_done", "trim", "decode", "read_state")

_NUMBERS = struct.Struct("<7d")


def backfill_call(keys: Keyspace, hint: list[str], c: Claim) -> tuple[S.Script, list[str], list[Any]]:
    o = c.options
    k = keys.job(c.job)
    numbers = _NUMBERS.pack(
        c.slot_ms, c.catch_up, c.missed, c.now_ms, o.lease_ms, o.history_size, o.history_ttl_ms or 0
    )
    return BACKFILL, [k.state, k.runs, k.order, k.live, *hint], [numbers, c.token, c.instance, c.job]


def backfill_result(c: Claim, reply: list[Any]) -> ClaimResult:
    outcome = text(reply[0])
    if outcome == "lost":
        try:
            record = run_of(reply[1])
        except (ValueError, KeyError, TypeError):  # a record no version of ours wrote: still a record
            record = None
        return ClaimResult(Outcome.LOST, record=record)
    if isinstance(reply[1], int):
        return ClaimResult(Outcome.WON, c.granted(fencing=reply[1], lease_ms=c.options.lease_ms))
    return ClaimResult(Outcome.WON, grant_of(reply[1]))


class BackfillMixin:
    """Mixed into :class:`~anarchon_redis.RedisBackend`: :meth:`anarchon.LeaseBackend.backfill`."""

    cluster: bool
    _keys: Keyspace
    _full: Full

    if TYPE_CHECKING:  # the backend's own, used here

        def _hint(self) -> list[str]: ...

        def _redis(self) -> Any: ...

        async def _calls_waited(
            self, calls: Sequence[Call], *, strict: int | None = None
        ) -> tuple[list[Any], list[bool]]: ...

    async def backfill(self, claims: Sequence[Claim]) -> list[ClaimResult]:
        """One script per backfill claim, in one pipeline."""
        if not claims:
            return []
        calls = [backfill_call(self._keys, self._hint(), c) for c in claims]
        if self.cluster:
            calls += [(S.TOUCH, [self._keys.hint], [c.job, c.options.lease_ms]) for c in claims]
        replies, reached = await self._calls_waited(calls, strict=0)
        results = [
            UNKNOWN if isinstance(reply, Exception) else backfill_result(c, reply)
            for c, reply in zip(claims, replies, strict=False)
        ]
        await self._full.check(self._redis(), calls, replies, won=any(r.outcome is Outcome.WON for r in results))
        return [r if ok or r.outcome is not Outcome.WON else UNKNOWN for r, ok in zip(results, reached, strict=False)]
