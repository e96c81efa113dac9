"""The fleet registry in Redis: three keys under one hash tag, and the heartbeat set beside them.

``<prefix>{registry}:heads`` and ``:jobs`` are hashes of instance id to its
head and job definitions (:mod:`anarchon.fleet`); ``:seen`` is a sorted set
of instance id to the time its entry expires on the server's clock, pushed
forward every registry poll (every 3 s while the instance's heartbeat
holds). The tag puts the three on one node of a cluster, so each write is
one script. An entry counts as live while its instance's heartbeat
(``<prefix>instances``: read by the same script on one server, in a
second call on a cluster, where it lives in another slot) has not
expired, or, without a heartbeat record, while the entry has not: a
killed instance leaves with its heartbeat, in about 1.5 s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from anarchon.fleet import REGISTRY_TTL_MS
from anarchon.liveness import LIVENESS_TTL_MS, RETAIN_DEAD_MS

from . import _scripts as S
from ._records import text

if TYPE_CHECKING:
    from ._names import Keyspace

__all__ = ["RegistryMixin"]


class RegistryMixin:
    """Mixed into :class:`~anarchon_redis.RedisBackend`."""

    _keys: Keyspace
    cluster: bool

    if TYPE_CHECKING:  # the backend's own, used here

        async def _call(self, script: S.Script, keys: list[str], args: list[Any]) -> Any: ...

        def _redis(self) -> Any: ...

    async def register(self, instance: str, head: str, jobs: str) -> None:
        await self._call(S.REGISTER, list(self._keys.registry), [instance, head, jobs, REGISTRY_TTL_MS, RETAIN_DEAD_MS])

    async def keep_registered(self, instance: str) -> None:
        await self._call(S.REGISTRY_KEEP, [self._keys.registry[2]], [instance, REGISTRY_TTL_MS])

    async def unregister(self, instance: str) -> None:
        await self._call(S.UNREGISTER, list(self._keys.registry), [instance])

    async def registered(self) -> list[tuple[str, str, int | None]]:
        heads, _, seen = self._keys.registry
        # On one server the script reads the heartbeats too: one round trip a second per instance.
        keys = [heads, seen] if self.cluster else [heads, seen, self._keys.instances]
        stamp, entries, beats = await self._call(S.REGISTERED, keys, [])
        now = int(float(text(stamp)))
        if self.cluster:
            pairs = await self._redis().zrangebyscore(self._keys.instances, "-inf", "+inf", withscores=True)
            alive = {text(member): int(score) for member, score in pairs}
        else:
            alive = {text(beats[i]): int(float(text(beats[i + 1]))) for i in range(0, len(beats), 2)}
        out: list[tuple[str, str, int | None]] = []
        for i in range(0, len(entries), 3):
            instance, head, expires = text(entries[i]), text(entries[i + 1]), int(float(text(entries[i + 2])))
            until = alive.get(instance)
            if (until if until is not None else expires) < now:
                continue  # its heartbeat expired (dead, whatever its entry says), or its entry without one
            seen_ms = expires - REGISTRY_TTL_MS
            out.append((instance, head, seen_ms if until is None else max(seen_ms, until - LIVENESS_TTL_MS)))
        return out

    async def registered_jobs(self, instances: Sequence[str]) -> dict[str, str]:
        if not instances:
            return {}
        values = await self._redis().hmget(self._keys.registry[1], list(instances))
        return {i: text(v) for i, v in zip(instances, values, strict=True) if v is not None}
