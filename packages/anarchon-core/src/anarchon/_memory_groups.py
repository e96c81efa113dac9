"""Concurrency groups of a :class:`~anarchon.memory.MemoryStore`: the reference for the server backends.

Each group keeps its limit and one entry per run that asked for a place,
under the store's one lock, so :meth:`MemoryGroups.places` is one atomic
step as a server backend's script or transaction is. The rule it follows is
:meth:`anarchon.backend.Backend.places`'s docstring.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from ._memory_book import Store
from ._memory_decided import MemoryDecided
from .groups import GroupState, Place

__all__ = ["GroupsMixin", "MemoryGroups", "holder_dead"]


def holder_dead(alive: dict[str, int], instance: str, now: int) -> bool:
    """Whether a place's holder is dead: its heartbeat record expired while some record is alive, or it has none.

    An instance with a place beat before it claimed (groups need liveness), so
    one without a record was dead long enough for its record to be dropped.
    The silence rule (:func:`anarchon.liveness.after_silence`) holds here as
    for claims: when every record expired, the store was silent, not the fleet.
    """
    until = alive.get(instance)
    if until is None:
        return True
    return until < now <= max(alive.values())


@dataclass
class _Entry:
    place: Place
    running: bool


class MemoryGroups:
    def __init__(self, store: Store, alive: dict[str, int]) -> None:
        self._store = store
        self._alive = alive
        self._limits: dict[str, int] = {}
        self._entries: dict[str, dict[str, _Entry]] = {}
        #: Watchers told of each freed place or set limit (capability ``group_notify``).
        self.watchers = MemoryDecided()

    def set_group(self, group: str, limit: int | None) -> None:
        with self._store._lock:
            if limit is None:
                self._limits.pop(group, None)
            else:
                self._limits[group] = limit
        self.watchers.tell((("", 0),))

    def places(self, leave: Sequence[Place], take: Sequence[Place]) -> list[bool]:
        freed = False
        with self._store._lock:
            now = self._store.clock()
            for p in leave:
                entries = self._entries.get(p.group, {})
                entry = entries.get(p.key)
                if entry is not None and entry.place.token == p.token:
                    del entries[p.key]
                    freed = True
            for p in take:
                entries = self._entries.setdefault(p.group, {})
                entry = entries.get(p.key)
                if entry is None or entry.place.token != p.token:
                    entries[p.key] = _Entry(p, False)
            for group in {p.group for p in take}:
                self._admit(group, now)
            # An asker judged dead itself had its entry dropped: no place for it.
            answers = [e.running if (e := self._entries[p.group].get(p.key)) is not None else False for p in take]
        if freed:
            self.watchers.tell((("", 0),))
        return answers

    def _admit(self, group: str, now: int) -> None:
        """Drop the entries of dead holders, then give the free places to the oldest waiting entries."""
        entries = self._entries[group]
        for key in [k for k, e in entries.items() if holder_dead(self._alive, e.place.instance, now)]:
            del entries[key]
        limit = self._limits.get(group)
        waiting = sorted((e for e in entries.values() if not e.running), key=lambda e: e.place.order)
        free = len(waiting) if limit is None else limit - sum(e.running for e in entries.values())
        for entry in waiting[: max(0, free)]:
            entry.running = True

    def groups(self) -> list[GroupState]:
        with self._store._lock:
            now = self._store.clock()
            names = set(self._limits) | {g for g, e in self._entries.items() if e}
            states = []
            for name in sorted(names):
                live = [
                    e
                    for e in self._entries.get(name, {}).values()
                    if not holder_dead(self._alive, e.place.instance, now)
                ]
                waiting = [e.place.slot_ms for e in live if not e.running]
                states.append(
                    GroupState(
                        name,
                        self._limits.get(name),
                        sum(e.running for e in live),
                        len(waiting),
                        min(waiting) if waiting else None,
                    )
                )
            return states


class _HasGroups(Protocol):
    @property
    def groups_state(self) -> MemoryGroups: ...


class GroupsMixin:
    """The group methods of :class:`~anarchon.memory.MemoryBackend`."""

    store: _HasGroups

    async def set_group(self, group: str, max_running: int | None) -> None:
        self.store.groups_state.set_group(group, max_running)

    async def groups(self) -> list[GroupState]:
        return self.store.groups_state.groups()

    async def places(self, leave: Sequence[Place], take: Sequence[Place]) -> list[bool]:
        return self.store.groups_state.places(leave, take)

    async def watch_groups(self, freed: Callable[[], None]) -> None:
        await self.store.groups_state.watchers.watch(lambda _: freed())
