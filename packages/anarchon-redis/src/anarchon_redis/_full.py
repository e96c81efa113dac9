"""A full Redis (``maxmemory`` reached, ``maxmemory-policy noeviction``): one error for the whole backend.

At its limit Redis refuses every command that may grow memory with an
``OOM`` error, whatever keys it touches. Read as a script error on one job's
keys, that was one ERROR line per job per slot, none naming the cause, and
each recovery of the scheduler ended at once (reads still work, so the
backend seemed to answer), the next claim starting a new outage with a new
warning: 28-37 lines for 3 instances in a 4 s outage (``tests/test_redis_full.py``).
So a refusal is raised as one :class:`RedisFullError` that says what to do;
the scheduler logs the first failure of an outage once, and recovers (take-over,
catch-up of the slots missed, which it counts) when the backend answers again.

*Answers again* must mean *takes writes again*: after a refusal, each take-over
pass (the call that ends the scheduler's recovery) first sends ``ZADD <key> XX
0 ""``, which writes nothing but is refused while Redis is full (:meth:`Full.probe`).

What is refused is new work only. Redis refuses a script's first write when
that command may grow memory; once a script has written, Redis lets the rest
through, so that no script stops half-way (scripts without flags, as ours,
on Redis 6.2 and 7). The scripts that keep the runs already granted
(heartbeat, renewal, finish, hand-over) start with a write that cannot grow
memory (``ZREM``, ``ZREMRANGEBYSCORE``), so they go through. Refused, every
instance's heartbeat lapsed and stopped its runs, which were taken over and
run a second time once Redis had room; a refused finish leaves its run
``running`` until then. They move a score or replace a record: a few hundred
bytes per run in flight. The same rule can let a claim through (one that
first drops a lease whose record is gone), and with it the later claims of
its ``CLAIM_MANY`` script: such grants are returned, not dropped (:meth:`Full.check`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from redis.asyncio.cluster import RedisCluster
from redis.exceptions import OutOfMemoryError, ResponseError

__all__ = ["Full", "RedisFullError", "full_message", "memory_info", "refused_for_memory"]


class RedisFullError(OutOfMemoryError):
    """Redis refuses writes for want of memory: no slot is claimed until it has room.

    An :class:`~redis.exceptions.OutOfMemoryError` still, so code that handles
    Redis's own refusal handles this one.
    """


def refused_for_memory(reply: object) -> bool:
    """Whether a reply is Redis's ``OOM`` refusal (redis-py maps the prefix; a script's text may keep it)."""
    return isinstance(reply, OutOfMemoryError) or (isinstance(reply, ResponseError) and str(reply).startswith("OOM"))


async def memory_info(client: Any, key: str) -> tuple[str, Mapping[str, Any]]:
    """``INFO memory`` of the server holding ``key`` (named on a cluster), or nothing if it cannot be read.

    Only the message needs it: whatever stops the reading (``INFO`` renamed on
    a managed Redis, a cluster client between two maps of its slots), the
    refusal is still reported.
    """
    try:
        if isinstance(client, RedisCluster):
            node = client.get_node_from_key(key)
            if node is None:
                return "", {}
            info = await client.info("memory", target_nodes=node)
            if info and all(isinstance(v, dict) for v in info.values()):  # answered per node
                info = next(iter(info.values()))
            return f" (node {node.name})", info
        return "", await client.info("memory")
    except Exception:
        return "", {}


def full_message(where: str, info: Mapping[str, Any]) -> str:
    figures = (
        f"maxmemory {info['maxmemory']} bytes, used {info.get('used_memory_human', '?')}, "
        f"maxmemory-policy {info.get('maxmemory_policy', '?')}"
        if "maxmemory" in info
        else "INFO memory could not be read"
    )
    return (
        f"Redis at {where} is out of memory ({figures}) and refuses writes: no slot is claimed until it has "
        "room, the runs already started go on and are recorded; free memory or raise maxmemory (keep "
        "maxmemory-policy noeviction: a policy that evicts drops claims; anarchon check reports it)"
    )


class Full:
    """Whether Redis refused this backend a write for memory, and the error its calls raise meanwhile.

    The message (one ``INFO memory``) is made once per outage; a probe that
    goes through forgets both.
    """

    def __init__(self, where: str) -> None:
        self._where = where
        #: A key of the refused call: the probe goes to its server (its node, on a cluster).
        self._key: str | None = None
        self._message: str | None = None

    async def error(self, client: Any, key: str) -> RedisFullError:
        if self._message is None:
            node, info = await memory_info(client, key)
            self._message = full_message(self._where + node, info)
        self._key = key
        return RedisFullError(self._message)

    async def check(
        self, client: Any, calls: Sequence[tuple[Any, list[str], list[Any]]], replies: Sequence[Any], *, won: bool
    ) -> None:
        """Raise :class:`RedisFullError` if Redis refused one of the calls for memory and none of them won.

        A grant that went through all the same (a script that had written
        already) is returned rather than dropped: dropped, its lease would
        keep the job's next slots skipped for a run nobody runs.
        """
        if won:
            return
        for (_, keys, _), reply in zip(calls, replies, strict=False):
            if refused_for_memory(reply):
                raise await self.error(client, keys[0])

    async def probe(self, client: Any) -> None:
        """After a refusal: raise while Redis still refuses writes; once one goes through, forget the refusal.

        ``ZADD key XX 0 ""`` adds no member and creates no key (no job,
        instance or run is named ""), and Redis checks memory before the
        key's type, so a key of another type answers too.
        """
        key = self._key
        if key is None:
            return
        try:
            await client.execute_command("ZADD", key, "XX", 0, "")
        except ResponseError as exc:
            if refused_for_memory(exc):
                raise RedisFullError(self._message or str(exc)) from exc
        self._key = self._message = None
