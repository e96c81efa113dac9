"""The revive claim (:meth:`anarchon.LeaseBackend.revive`): one script per slot on the job's keys.

The script (``lua/revive.lua``) replaces a slot's ``skipped`` record by a
new running run when no run of the job holds an unexpired lease, so Redis
runs one of the racing scripts first and the others find the slot running
under another token. Live leases are judged as the claim script's overlap
check judges them, with the dead owners this instance's heartbeat reported
(all of them: a revive is rare, and a pair a take-over pass already swept
costs it nothing but an argument). This module builds the calls and reads
the answers, and :class:`ReviveMixin` sends them in one pipeline, as the
backend sends claims (on a cluster with the hint's ``TOUCH``).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from anarchon.backend import Claim, ClaimResult, Outcome
from anarchon.run import Run

from . import _scripts as S
from ._full import Full, refused_for_memory
from ._heart import DeadOwners, script_args
from ._names import Keyspace
from ._records import LOST, UNKNOWN, grant_of, run_of, text

if TYPE_CHECKING:
    from ._calls import Call

__all__ = ["REVIVE", "ReviveMixin", "revive_call", "revive_result"]

log = logging.getLogger("anarchon.redis")

REVIVE = S.load("revive", "now_ms", "num", "decode", "read_state", "dead")

_NUMBERS = struct.Struct("<5d")


def revive_call(
    keys: Keyspace, hint: list[str], c: Claim, dead: tuple[str | int, ...] = ()
) -> tuple[S.Script, list[str], list[Any]]:
    k = keys.job(c.job)
    numbers = _NUMBERS.pack(c.slot_ms, c.catch_up, c.missed, c.now_ms, c.options.lease_ms)
    return REVIVE, [k.state, k.runs, k.order, k.live, *hint], [numbers, c.token, c.instance, c.job, *dead]


def _record(reply: list[Any]) -> Run | None:
    if len(reply) < 2:
        return None
    try:
        return run_of(reply[1])
    except (ValueError, KeyError, TypeError):  # a record no version of ours wrote: still a record
        return None


def revive_result(c: Claim, reply: list[Any]) -> ClaimResult:
    outcome = text(reply[0])
    if outcome == "lost":
        return ClaimResult(Outcome.LOST, record=_record(reply)) if len(reply) > 1 else LOST
    if outcome == "skipped":
        return ClaimResult(Outcome.SKIPPED, record=_record(reply))
    if isinstance(reply[1], int):
        return ClaimResult(Outcome.WON, c.granted(fencing=reply[1], lease_ms=c.options.lease_ms))
    return ClaimResult(Outcome.WON, grant_of(reply[1]))


class ReviveMixin:
    """Mixed into :class:`~anarchon_redis.RedisBackend`: :meth:`anarchon.LeaseBackend.revive`."""

    cluster: bool
    _keys: Keyspace
    _dead: DeadOwners
    _full: Full

    if TYPE_CHECKING:  # the backend's own, used here

        def _hint(self) -> list[str]: ...

        def _redis(self) -> Any: ...

        async def _calls_waited(
            self, calls: Sequence[Call], *, strict: int | None = None
        ) -> tuple[list[Any], list[bool]]: ...

    async def revive(self, claims: Sequence[Claim]) -> list[ClaimResult]:
        """One script per revive claim, in one pipeline; a grant not known on ``min_replicas`` is unknown."""
        if not claims:
            return []
        dead = script_args(self._dead.snapshot())
        calls = [revive_call(self._keys, self._hint(), c, dead) for c in claims]
        if self.cluster:
            calls += [(S.TOUCH, [self._keys.hint], [c.job, c.options.lease_ms]) for c in claims]
        replies, reached = await self._calls_waited(calls, strict=0)
        results: list[ClaimResult] = []
        for c, reply, ok in zip(claims, replies, reached, strict=False):
            if isinstance(reply, Exception):
                if not refused_for_memory(reply):  # a full Redis is the whole backend's: raised below
                    log.error("job %s: revive failed on its Redis keys: %s; the slot answers unknown", c.job, reply)
                results.append(UNKNOWN)
                continue
            result = revive_result(c, reply)
            # A grant not known to be on min_replicas replicas may vanish in a failover: unknown, never run.
            results.append(result if ok or result.outcome is not Outcome.WON else UNKNOWN)
        await self._full.check(self._redis(), calls, replies, won=any(r.outcome is Outcome.WON for r in results))
        return results
