"""Concurrency groups in Redis (capabilities ``groups`` and ``group_notify``; see :mod:`anarchon.groups`).

Each group has four keys (:class:`._names.GroupKeys`): a hash of its
entries (``<job> <slot_ms> <0|1>`` to ``<instance> <token>``), the set of
those holding a place, a sorted set of the waiting ones by slot, whose ties
Redis breaks by member, so by job, then scheduled before manual: the order
places go in (:attr:`anarchon.groups.Place.order`), and an index of the
entries by holder. The limits are one hash, and the groups with entries one
set, for :meth:`GroupsMixin.groups`.

:meth:`GroupsMixin.places` is one script (``lua/places.lua``), one atomic
step on the server's clock, with every leave and ask of the call (the core
sends at most :data:`anarchon._places.ASK_MAX` asks a pass, so one call
suffices). It judges each holder by its heartbeat record, read in the same
step: the group keys are tagged with the heartbeat key's name, so they share
its slot on a cluster (:mod:`._names`). As the reference, it drops every
entry of a dead holder in each group asked in, found through the holder
index: its cost is one range read per instance holding entries in the group,
the entries dropped, and the places given, never the whole queue.

The script publishes the freed groups' names on ``<prefix>groups`` in its
step: when a leave freed a place, and when a place went to an entry that no
ask of the call named (its holder, dead or not, asks at once instead of at
its next poll); ``set_group`` publishes too. :meth:`GroupsMixin.watch_groups`
hears them on the subscription loop of :meth:`._notify.NotifyMixin._watch`.

A place is answered held only once the write reached the replicas claims
wait for (``min_replicas``, see :mod:`._replicas`): one a failover could
lose is answered not held, and the next ask, a second later, gets it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from anarchon.groups import GroupState, Place, check_group_limit, check_group_name

from . import _scripts as S
from ._records import text

if TYPE_CHECKING:
    from ._calls import Call
    from ._names import Keyspace

__all__ = ["GroupsMixin", "entry_id"]


def entry_id(place: Place) -> str:
    """A place's member in its group's keys: ``<job> <slot_ms> <0|1>``.

    Of two waiting entries of one slot Redis sorts the member first that
    sorts first bytewise: the job names (``' '`` is below every character a
    name may hold, so ``a`` comes before ``a-b``, as in Python), then ``0``
    (scheduled) before ``1`` (manual), as ``False < True``.
    """
    return f"{place.job} {place.slot_ms} {int(place.manual)}"


class GroupsMixin:
    """Mixed into :class:`~anarchon_redis.RedisBackend`."""

    _keys: Keyspace

    if TYPE_CHECKING:  # the backend's own, used here

        async def _call(self, script: S.Script, keys: list[str], args: list[Any]) -> Any: ...

        async def _calls_waited(
            self, calls: Sequence[Call], *, strict: int | None = None
        ) -> tuple[list[Any], list[bool]]: ...

        def _redis(self) -> Any: ...

        async def _watch(
            self, channel: str, told: Callable[[str], None], subscribed: Callable[[], None] | None
        ) -> None: ...

    async def set_group(self, group: str, max_running: int | None) -> None:
        limit = "" if max_running is None else check_group_limit(max_running)
        await self._call(S.SET_GROUP, [self._keys.groups[0]], [check_group_name(group), limit, self._channel])

    async def groups(self) -> list[GroupState]:
        limits_key, named_key = self._keys.groups
        limits = {text(g): text(v) for g, v in (await self._redis().hgetall(limits_key)).items()}
        names = sorted(set(limits) | {text(g) for g in await self._redis().smembers(named_key)})
        if not names:
            return []
        keys = [self._keys.instances]
        for name in names:
            k = self._keys.group(name)
            keys += [k.places, k.waiting, k.running]
        replies = await self._call(S.GROUP_STATES, keys, [])
        states = []
        for name, (has, running, waiting, oldest) in zip(names, replies, strict=True):
            limit = _limit(limits.get(name))
            if limit is None and not int(has):
                continue  # its last entry went after the names were read
            oldest_ms = int(float(text(oldest))) if oldest else None
            states.append(GroupState(name, limit, int(running), int(waiting), oldest_ms))
        return states

    async def places(self, leave: Sequence[Place], take: Sequence[Place]) -> list[bool]:
        if not leave and not take:
            return []
        numbers: dict[str, int] = {}
        for p in (*leave, *take):
            numbers.setdefault(p.group, len(numbers) + 1)
        keys = [self._keys.instances, *self._keys.groups]
        for group in numbers:
            k = self._keys.group(group)
            keys += [k.places, k.waiting, k.running, k.holders]
        args: list[Any] = [self._channel, len(numbers), len(leave), *numbers]
        for p in leave:
            args += [numbers[p.group], entry_id(p), p.token]
        for p in take:
            args += [numbers[p.group], entry_id(p), p.slot_ms, p.instance, p.token]
        replies, reached = await self._calls_waited([(S.PLACES, keys, args)], strict=1)
        return [bool(answer) and reached[0] for answer in replies[0]]

    async def watch_groups(self, freed: Callable[[], None]) -> None:
        """Subscribe to ``<prefix>groups`` until cancelled; ``freed`` once subscribed, and after each notice."""
        await self._watch(self._channel, lambda _: freed(), freed)

    @property
    def _channel(self) -> str:
        return self._keys.groups_channel


def _limit(raw: str | None) -> int | None:
    """A stored limit; one that is not a whole number reads as none here (``places`` refuses to run on it)."""
    try:
        return None if raw is None else int(raw)
    except ValueError:
        return None
