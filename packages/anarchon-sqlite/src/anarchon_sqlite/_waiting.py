"""Waiting for the write lock: the writers of one process take turns before they ask SQLite.

SQLite's busy handler sleeps 1, 2, 5, 10, … up to 100 ms between tries,
while a claim holds the write lock for about a tenth of a millisecond. With
16 instances in one process on one file, nine claims in ten waited 10 ms or
more on a lock long free, and the few that polled took the GIL from the one
thread that held the write lock and needed it to finish. So the writers of a
process queue on a lock per file first (:func:`in_turn`) and reach SQLite one
at a time, handed on without sleeping. That lock only spares work: SQLite's
own lock still decides, and between processes its busy handler still waits.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable
from typing import TypeVar

__all__ = ["in_turn", "is_busy"]

T = TypeVar("T")

_turns: dict[str, threading.Lock] = {}
_turns_guard = threading.Lock()


def _forget_turns() -> None:
    """A forked child must not inherit a lock that a thread of its parent held."""
    global _turns_guard
    _turns.clear()
    _turns_guard = threading.Lock()


os.register_at_fork(after_in_child=_forget_turns)


def _turn(path: str) -> threading.Lock:
    with _turns_guard:
        return _turns.setdefault(path, threading.Lock())


def is_busy(exc: sqlite3.Error) -> bool:
    """A lock held too long by another connection: the connection itself is fine."""
    name = getattr(exc, "sqlite_errorname", "")
    return name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in str(exc)


def in_turn(path: str, timeout_s: float, fn: Callable[[], T]) -> T:
    """``fn()`` once no other writer of this process to ``path`` is inside its transaction.

    Called on the connection's own thread. The turn is waited for as SQLite
    waits for its lock: past ``timeout_s`` this raises the same "database is
    locked" error, and ``fn`` never ran.
    """
    turn = _turn(path)
    if not turn.acquire(timeout=timeout_s):
        raise sqlite3.OperationalError("database is locked (by another connection of this process)")
    try:
        return fn()
    finally:
        turn.release()
