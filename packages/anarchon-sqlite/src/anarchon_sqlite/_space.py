"""A full filesystem under the SQLite file: one clear error, and no write tried until there is room.

On a full disk SQLite answers ``database or disk is full`` (SQLITE_FULL) only
to the writes that need a new block: reads, and writes that fit in blocks the
WAL already holds, still succeed. The scheduler took each such success for
the end of the outage, so measured on a 4 MB tmpfs (3 instances, 10
every-second jobs, 4 or 8 s full) each instance logged the bare SQLite text
5 to 6 times, once per recovery before its heartbeat lapsed, and with
``liveness=False`` once per recovery probe (38 times in 8 s).

So the first write that fails for want of space closes a gate for the file,
shared by every connection of this process to it (the scheduler's and the
heartbeat's): until the filesystem has :data:`ROOM_BYTES` free again, every
write and the recovery's ``marks()`` read raise :class:`DatabaseFullError`
at once, without reaching SQLite. The outage then looks the same to every
part of the scheduler, which warns once and waits; the first call after
space was freed opens the gate, and one line says how long it was shut and
how many calls it refused. Reads (``history()``, the command line's looks)
stay open: the file is intact, since each write is one ``BEGIN IMMEDIATE``
transaction that a failure rolls back whole.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from dataclasses import dataclass

from ._errors import DatabaseFullError
from ._guarantees import LOW_SPACE_BYTES

__all__ = ["ROOM_BYTES", "check_room", "no_space", "space"]

log = logging.getLogger("anarchon.sqlite")

#: Free space that reopens the gate: a few hundred WAL frames, a few seconds of a busy fleet's writes
#: (an eighth of the filesystem on one smaller than 8 MB, so that the gate of a tiny one opens too).
ROOM_BYTES = 1024 * 1024
_MB = 1024 * 1024


@dataclass
class _Shut:
    """A file's closed gate: since when (monotonic), the code that closed it, calls refused since."""

    since: float
    code: str
    refused: int = 0


_shut: dict[str, _Shut] = {}
_guard = threading.Lock()


def _forget() -> None:
    """A forked child starts with its own gates (and a lock no parent thread holds)."""
    global _guard
    _shut.clear()
    _guard = threading.Lock()


os.register_at_fork(after_in_child=_forget)


def space(path: str) -> tuple[int, int] | None:
    """Bytes free on the filesystem holding ``path``, and the room that reopens its gate (``None``: unknown).

    Root may write into the blocks reserved for it, so it counts them, as the
    filesystem will; anyone else counts only what is available to all users.
    """
    try:
        st = os.statvfs(os.path.dirname(path) or ".")
    except OSError:
        return None
    blocks = st.f_bfree if os.geteuid() == 0 else st.f_bavail
    return blocks * st.f_frsize, min(ROOM_BYTES, st.f_blocks * st.f_frsize // 8)


def _code(exc: sqlite3.Error) -> str:
    return str(getattr(exc, "sqlite_errorname", "") or "")


def _size(n: int) -> str:
    return f"{n // _MB} MB" if n >= _MB else f"{n // 1024} KB"


def _message(path: str, code: str, found: tuple[int, int] | None) -> str:
    free, room = found or (None, ROOM_BYTES)
    left = "" if free is None else f", {_size(free)} free"
    return (
        f"the SQLite file {path} cannot grow: its filesystem is full ({code}{left}); no slot is claimed "
        f"and no run is recorded until there is room, and the fleet resumes by itself once {_size(room)} "
        f"is free: free space on that filesystem or move the file to a larger one (anarchon check warns below "
        f"{LOW_SPACE_BYTES // _MB} MB free)"
    )


def no_space(path: str, exc: sqlite3.Error) -> DatabaseFullError | None:
    """The clear error for ``exc`` if it means the filesystem is full, closing the gate; else ``None``.

    SQLITE_FULL says so itself. A full filesystem can also surface as an I/O
    error (growing the ``-shm`` file, or a write whose errno SQLite did not
    map), which is taken for one only while the filesystem is nearly full.
    """
    if isinstance(exc, DatabaseFullError):
        return exc
    code = _code(exc)
    found = space(path)
    full = code == "SQLITE_FULL" or "database or disk is full" in str(exc)
    if not full and not (code.startswith("SQLITE_IOERR") and found is not None and found[0] < found[1]):
        return None
    code = code or "SQLITE_FULL"
    with _guard:
        _shut.setdefault(path, _Shut(time.monotonic(), code))
    return _error(path, code, found)


def _error(path: str, code: str, found: tuple[int, int] | None) -> DatabaseFullError:
    free = None if found is None else found[0]
    return DatabaseFullError(_message(path, code, found), path=path, code=code, free=free)


def check_room(path: str) -> None:
    """Raise :class:`DatabaseFullError` while the gate of ``path`` is shut and its filesystem has no room.

    Costs nothing while the gate is open (no system call); while it is shut,
    one ``statvfs``. The call that finds room again opens the gate and says
    how long it was shut.
    """
    if path not in _shut:
        return
    found = space(path)
    with _guard:
        shut = _shut.get(path)
        if shut is None:
            return
        if found is not None and found[0] < found[1]:
            shut.refused += 1
            code = shut.code
        else:
            del _shut[path]
            log.info(
                "SQLite file %s has room again (%s free): writes resume after %.1f s; %d call(s) were refused "
                "meanwhile (the scheduler catches missed slots up as each job's catch_up says)",
                path,
                "?" if found is None else _size(found[0]),
                time.monotonic() - shut.since,
                shut.refused,
            )
            return
    raise _error(path, code, found)
