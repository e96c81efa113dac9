"""The audit trail of a :class:`~anarchon.memory.MemoryStore`: the reference for the server backends.

A list of ``(id, job, entry)`` under the store's lock, ids from one counter
that never goes back, trimmed to the newest :data:`~anarchon.audit.AUDIT_KEEP`
on append (``keep`` lets a test trim a small trail).
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Protocol

from .audit import AUDIT_KEEP

__all__ = ["AuditMixin", "MemoryAudit"]


class _Store(Protocol):
    _lock: threading.Lock


class MemoryAudit:
    def __init__(self, store: _Store, keep: int = AUDIT_KEEP) -> None:
        self._store = store
        self._last = 0
        self._entries: deque[tuple[int, str, str]] = deque(maxlen=keep)

    def append(self, job: str, entry: str) -> int:
        with self._store._lock:
            self._last += 1
            self._entries.append((self._last, job, entry))
            return self._last

    def entries(self, limit: int, before_id: int | None, job: str | None) -> list[tuple[int, str]]:
        out: list[tuple[int, str]] = []
        with self._store._lock:
            for entry_id, of, text in reversed(self._entries):
                if len(out) >= limit:
                    break
                if (before_id is None or entry_id < before_id) and (job is None or of == job):
                    out.append((entry_id, text))
        return out


class _Audited(Protocol):
    audit: MemoryAudit


class AuditMixin:
    """Mixed into :class:`~anarchon.memory.MemoryBackend`."""

    store: _Audited

    async def audit_append(self, job: str, entry: str) -> int:
        return self.store.audit.append(job, entry)

    async def audit_entries(
        self, *, limit: int, before_id: int | None = None, job: str | None = None
    ) -> list[tuple[int, str]]:
        return self.store.audit.entries(limit, before_id, job)
