"""Stored schedules in Redis: five keys under one hash tag, so each change is one script on one node.

``<prefix>{schedules}:revision`` is the counter every change takes its
revision from (``INCR``); ``:records`` a hash of name to record; ``:changes``
a sorted set of every name (tombstones too) scored by its last revision, so
"what changed after R" is one ``ZRANGEBYSCORE``; ``:removed`` a sorted set of
tombstones scored by when, for the purge after
:data:`~anarchon.schedules.TOMBSTONE_MS`; ``:logs`` a hash of name to its
change log (a JSON list of ``[revision, change]``, the last
:data:`~anarchon.schedules.LOG_KEEP`). The log is a field, not a key per
name, so the script touches only keys it declares. Every instance's poll is
one ``GET``; reading the changed records is ``HMGET`` by the thousand. The
script also publishes each change's revision on ``<prefix>{schedules}:changed``,
which every instance's subscription hears (:mod:`._notify`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from anarchon.errors import ScheduleConflictError
from anarchon.options import check_job_name
from anarchon.schedules import LOG_KEEP, REUSE_AFTER_MS, TOMBSTONE_MS

from . import _scripts as S
from ._notify import NotifyMixin
from ._records import text

if TYPE_CHECKING:
    from ._names import Keyspace

__all__ = ["StoredMixin"]

#: Records read per ``HMGET`` when many changed (100,000 at a start).
CHUNK = 1000


class StoredMixin(NotifyMixin):
    """Mixed into :class:`~anarchon_redis.RedisBackend`; ``wait_schedules`` is :class:`._notify.NotifyMixin`'s."""

    _keys: Keyspace

    if TYPE_CHECKING:  # the backend's own, used here

        async def _call(self, script: S.Script, keys: list[str], args: list[Any]) -> Any: ...

        def _redis(self) -> Any: ...

        async def now_ms(self) -> int: ...

        @property
        def _pauses_key(self) -> str: ...

    async def put_schedule(self, name: str, record: str | None, *, expect: int | None, change: str) -> int:
        check_job_name(name)
        args = [name, record or "", "1" if record is None else "0", "" if expect is None else expect, change]
        args += [TOMBSTONE_MS, LOG_KEEP, self._keys.schedules_channel]
        done, number = await self._call(S.SCHEDULE_PUT, list(self._keys.schedules), args)
        if int(done) == 0:
            raise ScheduleConflictError(name, expect, int(number))
        return int(number)

    async def schedules_revision(self) -> int:
        value = await self._redis().get(self._keys.schedules[0])
        return int(value) if value is not None else 0

    async def schedules_since(self, revision: int) -> list[tuple[str, str | None, int]]:
        _, records, changes, _, _ = self._keys.schedules
        ranked = await self._redis().zrangebyscore(changes, f"({revision}", "+inf", withscores=True)
        out: list[tuple[str, str | None, int]] = []
        for start in range(0, len(ranked), CHUNK):
            part = ranked[start : start + CHUNK]
            names = [text(member) for member, _ in part]
            values = await self._redis().hmget(records, names)
            for name, (_, score), value in zip(names, part, values, strict=True):
                if value is not None or revision:
                    out.append((name, text(value) if value is not None else None, int(score)))
        return out

    async def schedule(self, name: str) -> tuple[str, int] | None:
        _, records, changes, _, _ = self._keys.schedules
        reply = await self._call(S.SCHEDULE_GET, [records, changes], [name])
        return (text(reply[0]), int(float(text(reply[1])))) if reply else None

    async def schedule_log(self, name: str) -> list[tuple[int, str]]:
        held = await self._redis().hget(self._keys.schedules[4], name)
        if held is None:
            return []
        return [(int(rev), str(change)) for rev, change in json.loads(text(held))]

    async def forget_removed(self, older_than_ms: int) -> list[str]:
        """Each old tombstone's job keys (one script on the job's slot), its pause, then the tombstones.

        The tombstones go last, and only those still removed before the cutoff, so a crash in
        between leaves them to the next call rather than a job's keys behind for ever.
        """
        _, _, changes, removed, logs = self._keys.schedules
        cutoff = await self.now_ms() - older_than_ms
        old = [
            (text(m), int(score))
            for m, score in await self._redis().zrangebyscore(removed, "-inf", cutoff, withscores=True)
        ]
        forgotten = []
        for name, removed_ms in old:
            k = self._keys.job(name)
            if int(await self._call(S.FORGET, [k.state, k.runs, k.order, k.live], [removed_ms + REUSE_AFTER_MS])):
                await self._redis().hdel(self._pauses_key, name)
                forgotten.append(name)
        if old:
            await self._call(S.SCHEDULE_FORGET, [changes, removed, logs], [cutoff, *(name for name, _ in old)])
        return forgotten
