"""Instance liveness on Redis: one sorted set of heartbeats, and the dead owners handed to the scripts.

Each instance's record is a member of ``<prefix>instances`` scored by its
``alive_until`` on the server's clock (``TIME``); one script per beat sets it,
drops records dead for longer than :data:`~anarchon.liveness.RETAIN_DEAD_MS`
and returns the dead ones (:class:`RedisHeart`).

The claim and take-over scripts cannot read that key atomically: on a cluster
it lives in another slot than the job's keys. So a heart shares with its
backend a :class:`DeadOwners` holder of what its latest beat reported, and
the backend passes those ``(instance, alive_until)`` pairs to the scripts
(none in the common case: nothing then costs anything). A script counts a
running run as dead only if its owner is listed *and* the run was last
granted or renewed before that ``alive_until``, so a list that is stale (the
owner came back since) never condemns a run taken after the revival. The same
path serves a single server, so there is one rule to test.

A pair is passed only until a take-over pass of this backend over its jobs
has run with it: that pass took over or abandoned every run the dead owner
held in them (all granted before its record expired, so all there already).
Records of stopped instances stay dead for ten minutes; a rolling deploy
would otherwise add every stopped instance to every claim for that long.

On a cluster that comparison sets a job node's clock against the instances
node's: it assumes their clocks agree to within the time an owner needs to
beat again and claim after its record expired (NTP keeps them within
milliseconds).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any, Union

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import NoScriptError, OutOfMemoryError, ResponseError

from anarchon.liveness import RETAIN_DEAD_MS, Beat, Heart
from anarchon.urls import redact_url

from . import _scripts as S
from ._full import RedisFullError, full_message, memory_info
from ._records import text
from ._sentinel import connect, follow_primary

__all__ = ["DeadOwners", "RedisHeart", "script_args"]

#: How often a heartbeat on a Sentinel URL asks the Sentinels where the primary is.
FOLLOW_S = 1.0

Client = Union["Redis", "RedisCluster"]


class DeadOwners:
    """The dead instances of the latest beat, written by the heartbeat thread, read by the backend's calls.

    One immutable set of ``(instance, alive_until)`` swapped under a lock.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pairs: frozenset[tuple[str, int]] = frozenset()

    def update(self, dead: Mapping[str, int]) -> None:
        pairs = frozenset(dead.items())
        with self._lock:
            self._pairs = pairs

    def snapshot(self) -> frozenset[tuple[str, int]]:
        with self._lock:
            return self._pairs


def script_args(pairs: frozenset[tuple[str, int]]) -> tuple[str | int, ...]:
    """The pairs as the scripts read them (``helpers/dead.lua``): instance, alive_until, …"""
    return tuple(x for name, until in sorted(pairs) for x in (name, until))


class RedisHeart(Heart):
    """One instance's heartbeat, on a client of its own made in the heartbeat thread's loop.

    It holds only plain data of its backend (URL, mode, key) and the
    :class:`DeadOwners` holder, which is thread-safe.
    """

    tells_next_expiry = True

    def __init__(self, url: str, cluster: bool, key: str, connect_timeout_s: float, dead: DeadOwners) -> None:
        self._url = url
        self._cluster = cluster
        self._key = key
        self._timeout = connect_timeout_s
        self._dead = dead
        self._client: Client | None = None
        self._followed = -FOLLOW_S

    async def open(self) -> None:
        self._client = connect(self._url, self._cluster, self._timeout)

    async def _run(self, script: S.Script, *args: Any) -> Any:
        client = self._client
        if client is None:
            raise RuntimeError("RedisHeart used before open()")
        try:
            try:
                return await client.evalsha(script.sha, 1, self._key, *args)
            except NoScriptError:
                return await client.eval(script.source, 1, self._key, *args)
        except OutOfMemoryError as exc:  # the beat itself goes through (beat.lua); a leave may not
            node, info = await memory_info(client, self._key)
            raise RedisFullError(full_message(redact_url(self._url) + node, info)) from exc
        except ResponseError as exc:
            if "WRONGTYPE" in str(exc):
                raise ResponseError(
                    f"the heartbeat key {self._key} is not a sorted set (something else wrote it); delete it "
                    "(the instances recreate it with their next beat)"
                ) from exc
            raise

    async def beat(self, instance: str, ttl_ms: int) -> Beat:
        now = time.monotonic()
        if now - self._followed >= FOLLOW_S:  # through Sentinel: beat where the claims go (_sentinel.py)
            self._followed = now
            await follow_primary(self._client)
        flat, next_ms = await self._run(S.BEAT, instance, ttl_ms, RETAIN_DEAD_MS)
        dead = {text(flat[i]): int(float(text(flat[i + 1]))) for i in range(0, len(flat), 2)}
        self._dead.update(dead)
        return Beat(dead, None if next_ms is None else int(next_ms))

    async def leave(self, instance: str) -> None:
        await self._run(S.LEAVE, instance)

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()
