"""The fleet registry of a :class:`~anarchon.memory.MemoryStore`: the reference for the server backends.

An entry is live while its instance's heartbeat record has not expired, or,
for an instance without one (``liveness=False``), while it was refreshed
within :data:`~anarchon.fleet.REGISTRY_TTL_MS`: a killed instance leaves the
views (and stops deciding drift) with its heartbeat, in about 1.5 s, and one
without a heartbeat with its TTL. A beating instance so needs no refresh
every poll (the scheduler refreshes it every
:data:`~anarchon.fleet.REGISTRY_KEEP_BEATING_MS`). ``seen_ms`` is the later
of its last refresh and its last beat.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Protocol

from .fleet import REGISTRY_TTL_MS
from .liveness import LIVENESS_TTL_MS, RETAIN_DEAD_MS

__all__ = ["MemoryFleet", "RegistryMixin"]


class _Store(Protocol):
    """What the registry needs of the store (a :class:`~anarchon.memory.MemoryStore`)."""

    clock: Callable[[], int]
    _lock: threading.Lock
    _alive: dict[str, int]


class MemoryFleet:
    def __init__(self, store: _Store) -> None:
        self._store = store
        #: instance -> (head, jobs, expires_ms)
        self._entries: dict[str, tuple[str, str, int]] = {}

    def register(self, instance: str, head: str, jobs: str) -> None:
        with self._store._lock:
            self._entries[instance] = (head, jobs, self._store.clock() + REGISTRY_TTL_MS)

    def keep(self, instance: str) -> None:
        with self._store._lock:
            entry = self._entries.get(instance)
            if entry is not None:
                self._entries[instance] = (entry[0], entry[1], self._store.clock() + REGISTRY_TTL_MS)

    def unregister(self, instance: str) -> None:
        with self._store._lock:
            self._entries.pop(instance, None)

    def registered(self) -> list[tuple[str, str, int | None]]:
        live: list[tuple[str, str, int | None]] = []
        with self._store._lock:
            now = self._store.clock()
            for instance, (head, _, expires) in sorted(self._entries.items()):
                alive = self._store._alive.get(instance)
                if expires < now - RETAIN_DEAD_MS and (alive is None or alive < now):
                    del self._entries[instance]
                elif alive >= now if alive is not None else expires >= now:
                    seen = expires - REGISTRY_TTL_MS
                    live.append((instance, head, seen if alive is None else max(seen, alive - LIVENESS_TTL_MS)))
        return live

    def jobs(self, instances: Sequence[str]) -> dict[str, str]:
        with self._store._lock:
            return {i: self._entries[i][1] for i in instances if i in self._entries}


class _Registered(Protocol):
    fleet: MemoryFleet


class RegistryMixin:
    """Mixed into :class:`~anarchon.memory.MemoryBackend`: the registry, kept in the store's :class:`MemoryFleet`."""

    store: _Registered

    async def register(self, instance: str, head: str, jobs: str) -> None:
        self.store.fleet.register(instance, head, jobs)

    async def keep_registered(self, instance: str) -> None:
        self.store.fleet.keep(instance)

    async def unregister(self, instance: str) -> None:
        self.store.fleet.unregister(instance)

    async def registered(self) -> list[tuple[str, str, int | None]]:
        return self.store.fleet.registered()

    async def registered_jobs(self, instances: Sequence[str]) -> dict[str, str]:
        return self.store.fleet.jobs(instances)
