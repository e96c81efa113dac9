"""In-memory backend: the primitive is a dict insert under a lock, what MemoryStore.claim rests on."""

from __future__ import annotations

import sys
import threading

from anarchon.backend import Backend
from anarchon.memory import MemoryBackend, MemoryStore

from .._target import BackendSpec, RawClient, Target


class _Raw(RawClient):
    description = "dict insert if absent, under a `threading.Lock`"

    async def open(self) -> None:
        self._lock = threading.Lock()
        self._taken: dict[str, bool] = {}

    async def once(self, key: str) -> bool:
        with self._lock:
            if key in self._taken:
                return False
            self._taken[key] = True
            return True

    async def close(self) -> None:
        self._taken.clear()


class MemoryTarget(Target):
    name = "memory"
    fleet_instances = 1
    notes = [
        "memory: one process holds the store, so the end-to-end run is 1 instance process with the 1,000 jobs "
        "(the scheduler's own cost with a free referee), not 3"
    ]

    async def unreachable(self) -> str | None:
        return None

    def spec(self, ns: str) -> BackendSpec:
        return BackendSpec("anarchon.memory:MemoryBackend")

    def instances(self, ns: str, count: int) -> list[Backend]:
        store = MemoryStore()
        return [MemoryBackend(store) for _ in range(count)]

    def raw(self, ns: str) -> RawClient:
        return _Raw()

    async def versions(self) -> dict[str, str]:
        return {"python": sys.version.split()[0]}


TARGET = MemoryTarget()
