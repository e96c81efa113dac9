"""SQLiteBackend: leases in a WAL database file shared by the processes of one host."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, TypeVar
from urllib.parse import unquote, urlsplit

import aiosqlite

from anarchon.backend import Capabilities, Claim, ClaimResult, Grant, LeaseBackend, Outcome
from anarchon.batching import Batcher
from anarchon.options import check_history_limit
from anarchon.run import Run
from anarchon.urls import integer, read_url_options

from . import _store
from ._audit import AuditMixin
from ._backfill import BackfillMixin
from ._control import ControlMixin
from ._errors import DatabaseFileError
from ._groups import GroupsMixin
from ._guarantees import GuaranteesMixin
from ._heart import SQLiteHeart
from ._registry import RegistryMixin
from ._revive import ReviveMixin
from ._schedules import SchedulesMixin
from ._schema import SYNCHRONOUS_MODES, open_store
from ._space import check_room, no_space
from ._waiting import in_turn, is_busy

if TYPE_CHECKING:
    from anarchon.job import Job

__all__ = ["SQLiteBackend"]

T = TypeVar("T")

_URL_FORMS = "sqlite:///relative/path.sqlite3 or sqlite:////absolute/path.sqlite3"

#: The options a URL's query may set, each with the conversion of its text (``__init__`` checks them).
_URL_OPTIONS = {"busy_timeout_ms": integer, "synchronous": str.lower}


async def _on_thread(conn: aiosqlite.Connection, fn: Callable[[sqlite3.Connection], T]) -> T:
    """Run ``fn`` whole on the connection's own thread, as one queued call.

    aiosqlite's ``_execute`` is its only way to hand that thread a whole
    function; the alternative, one await per statement, would hold the write
    lock across event-loop turns and leave it held when a caller is
    cancelled mid-transaction.
    """
    result: T = await conn._execute(lambda: fn(conn._conn))  # type: ignore[no-untyped-call]
    return result


class SQLiteBackend(
    GuaranteesMixin,
    ControlMixin,
    RegistryMixin,
    SchedulesMixin,
    AuditMixin,
    GroupsMixin,
    BackfillMixin,
    ReviveMixin,
    LeaseBackend,
):
    """A lease backend in one SQLite file (``sqlite:///path``), the embedded default.

    Each object is one instance with one connection; objects in any number
    of processes on one host share the file. Every claim batch, renewal,
    take-over and batch of finishes is one ``BEGIN IMMEDIATE`` transaction;
    leases expire on the host's clock, which all those processes share.

    ``busy_timeout_ms`` is how long a call waits for another process's write
    lock before it raises (the scheduler treats that as *unknown*: it does
    not run the slot and tries again). ``synchronous`` is ``"normal"`` (the
    default: a commit survives the process being killed, but the last
    commits before a power cut or OS crash may be lost) or ``"full"`` (a
    commit survives that too, for about 4 times the cost of each write).
    """

    name: ClassVar[str] = "sqlite"
    url_schemes: ClassVar[tuple[str, ...]] = ("sqlite",)
    capabilities: ClassVar[Capabilities] = Capabilities(
        lease=True,
        history_ttl=True,
        server_clock=False,
        multi_process=True,
        liveness=True,
        registry=True,
        backfill=True,
        revive=True,
        pause=True,
        trigger=True,
        schedules=True,
        guarantees=True,
        audit=True,
        attempts=True,
        groups=True,  # group_notify stays off: SQLite tells no other process; instances poll (_groups)
    )

    def __init__(
        self,
        path: str | os.PathLike[str] = "anarchon.sqlite3",
        *,
        busy_timeout_ms: int = 5000,
        synchronous: str = "normal",
    ) -> None:
        raw = os.fspath(path)
        if not isinstance(raw, str) or not raw:
            raise ValueError(f"path={path!r} must name a database file, for example 'anarchon.sqlite3'")
        if raw == ":memory:" or raw.startswith("file:"):
            raise ValueError(
                f"path={raw!r}: give SQLiteBackend a plain file path, which every instance can share; "
                "for one process without a file use MemoryBackend (memory://)"
            )
        if isinstance(busy_timeout_ms, bool) or not isinstance(busy_timeout_ms, int) or busy_timeout_ms < 0:
            raise ValueError(f"busy_timeout_ms={busy_timeout_ms!r} must be an integer >= 0, for example 5000")
        if synchronous not in SYNCHRONOUS_MODES:
            raise ValueError(
                f"synchronous={synchronous!r} must be 'normal' (the default: fast, survives a killed process) "
                "or 'full' (also survives a power cut, slower writes)"
            )
        self.path = os.path.abspath(raw)
        self.busy_timeout_ms = busy_timeout_ms
        self.synchronous = synchronous
        self._conn: aiosqlite.Connection | None = None
        #: The finishes made in one event-loop turn, written in one transaction (see :meth:`finish`).
        self._finishes: Batcher[tuple[Grant, Run]] | None = None
        #: The host clock that judges leases; replaced only by this package's tests.
        self._clock: Callable[[], int] = _store.wall_ms
        self._broken = False
        self._opening = asyncio.Lock()  # one connection per object, however start() is called
        #: Opened by start_read_only() on a path with no file: every read raises LookupError.
        self._absent = False

    @classmethod
    def from_url(cls, url: str) -> SQLiteBackend:
        """``sqlite:///relative/path`` (from the working directory) or ``sqlite:////absolute/path``.

        Options go in the query: ``?busy_timeout_ms=10000&synchronous=full``.
        """
        parts = urlsplit(url)
        if parts.scheme.lower() not in cls.url_schemes:
            raise ValueError(f"{url!r} is not a sqlite URL; use {_URL_FORMS}")
        if parts.netloc:
            raise ValueError(
                f"{url!r} names a host ({parts.netloc!r}); SQLite has none: use {_URL_FORMS} (three slashes, "
                "or four for an absolute path)"
            )
        path = unquote(parts.path[1:])
        if not path:
            raise ValueError(f"{url!r} names no file; use {_URL_FORMS}")
        found = read_url_options(url, _URL_OPTIONS, what="SQLite")
        return cls(path, **found.values)  # type: ignore[arg-type]  # converted here, checked by __init__

    def __repr__(self) -> str:
        return f"SQLiteBackend(path={self.path!r}, synchronous={self.synchronous!r})"

    # -- lifecycle -------------------------------------------------------------------

    def _check_path(self) -> None:
        """Catch the usual mistakes before SQLite reports them as 'unable to open'."""
        path = Path(self.path)
        folder = path.parent
        if not folder.is_dir():
            raise DatabaseFileError(
                f"cannot open SQLite database {path}: folder {folder} does not exist; create it "
                f"(mkdir -p {folder}) or pass another path",
                path=self.path,
            )
        if path.is_dir():
            raise DatabaseFileError(
                f"cannot open SQLite database {path}: it is a folder; pass a file path such as "
                f"{path / 'anarchon.sqlite3'}",
                path=self.path,
            )
        # WAL mode creates path-wal and path-shm beside the file, so the folder must be writable too.
        if not os.access(folder, os.W_OK | os.X_OK):
            raise DatabaseFileError(
                f"cannot write SQLite database {path}: this user may not write folder {folder}, where SQLite "
                f"keeps the file and its {path.name}-wal and {path.name}-shm companions; give it write "
                "permission there, or pass a path in a folder it owns",
                path=self.path,
            )
        if path.exists() and not os.access(path, os.R_OK | os.W_OK):
            raise DatabaseFileError(
                f"cannot write SQLite database {path}: this user may not read and write it; give it "
                f"permission (chmod u+rw {path}) or pass another path",
                path=self.path,
            )

    async def start(self) -> None:
        self._absent = False
        async with self._opening:
            if self._conn is None or self._broken:
                await self._open()

    async def start_read_only(self) -> None:
        """Open for a look (``anarchon history``, ``jobs``, ``pauses``, ``check``): never create the file.

        A path with no database file is one nothing ran under, often a typo: every read then
        raises ``LookupError`` naming it, as PostgreSQL does for a schema without tables,
        rather than creating an empty database there and answering "no runs". The folder is
        checked as :meth:`start` checks it, so ``anarchon check`` still fails on a folder the
        fleet could not write. An existing file is opened as :meth:`start` opens it.
        """
        if await asyncio.to_thread(os.path.exists, self.path):
            await self.start()
            return
        self._check_path()
        await self._drop()
        self._absent = True

    async def _open(self) -> None:
        await self._drop()
        self._check_path()
        conn = aiosqlite.connect(
            self.path, timeout=self.busy_timeout_ms / 1000, isolation_level=None, cached_statements=256
        )
        try:
            await conn
        except sqlite3.Error as exc:
            # aiosqlite stops its thread on its own; wait for it while this loop still runs to hear back
            await asyncio.to_thread(conn._thread.join, 5.0)
            raise (no_space(self.path, exc) or self._unopenable(exc)) from exc
        try:
            await _on_thread(conn, lambda raw: self._open_store(raw))
        except sqlite3.OperationalError as exc:
            await conn.close()
            if is_busy(exc):
                raise
            raise (no_space(self.path, exc) or self._unopenable(exc)) from exc
        except BaseException:
            await conn.close()
            raise
        self._conn = conn
        self._broken = False

    def _open_store(self, raw: sqlite3.Connection) -> None:
        open_store(raw, self.path, self.synchronous, self.busy_timeout_ms / 1000)

    def _unopenable(self, exc: sqlite3.Error) -> DatabaseFileError:
        return DatabaseFileError(
            f"cannot open SQLite database {self.path} ({exc}): check that its folder exists and this user "
            "may write the file and the folder (SQLite creates -wal and -shm files there), and that the disk "
            "is local and not full",
            path=self.path,
        )

    async def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(sqlite3.Error, ValueError):  # its errors were already raised
                await conn.close()

    async def close(self) -> None:
        if self._finishes is not None:
            await self._finishes.drain()
        await self._drop()
        self._broken = self._absent = False

    async def _call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """One transaction (or read) on this instance's connection, reopened after a failure."""
        if self._absent:
            raise LookupError(
                f"SQLite database {self.path} does not exist: nothing ran under this path; check the path "
                "(sqlite:///relative/to/cwd or sqlite:////absolute in the URL), or start the fleet, which creates it"
            )
        if self._broken:
            async with self._opening:
                if self._broken:
                    await self._open()
        conn = self._conn
        if conn is None:
            raise RuntimeError(f"{self!r} is not started: await backend.start() first (the Scheduler does)")
        try:
            result = await _on_thread(conn, fn)
        except sqlite3.Error as exc:
            if is_busy(exc):
                raise sqlite3.OperationalError(
                    f"SQLite database {self.path} is locked: another process held its write lock longer than "
                    f"busy_timeout_ms={self.busy_timeout_ms}; this call's answer is unknown and the scheduler "
                    "will retry it. If it keeps happening, raise busy_timeout_ms or look for a process that "
                    "keeps the file locked"
                ) from exc
            full = no_space(self.path, exc)
            if full is not None:
                # The connection is sound (the transaction rolled back whole); only the disk is not.
                raise full from exc
            self._broken = True  # reopen on the next call: the contract asks backends to recover
            raise
        return result

    async def _write(self, body: _store.Body[T]) -> T:
        check_room(self.path)  # a full filesystem refuses every write alike, until there is room (_space)
        clock = self._clock
        path, timeout_s = self.path, self.busy_timeout_ms / 1000
        return await self._call(lambda conn: in_turn(path, timeout_s, lambda: _store.transaction(conn, body, clock)))

    # -- claiming --------------------------------------------------------------------

    async def claim(self, claims: Sequence[Claim]) -> list[ClaimResult]:
        """Claims another instance decided are answered from a read (``decided_elsewhere``); the rest in a write."""
        if not claims:
            return []
        lost = await self._call(lambda conn: _store.decided_elsewhere(conn, claims))
        rest = [c for i, c in enumerate(claims) if i not in lost]
        answers = iter(await self._write(_store.claim(rest)) if rest else [])
        return [ClaimResult(Outcome.LOST) if i in lost else next(answers) for i in range(len(claims))]

    async def finish(self, grant: Grant, run: Run) -> bool:
        """Record the run; the finishes made together share one transaction.

        A thousand runs of one slot end within milliseconds of each other.
        Written one by one, each took the write lock and committed on its
        own: a thousand lock turns a second per instance, which starved the
        fleet's heartbeats of the lock on a busy host (the ledger showed
        runs ended but not recorded in time, taken over and run again). One
        transaction at a time, holding every finish gathered meanwhile, takes
        the lock once per batch; a batch that fails fails each of its
        finishes, which the scheduler retries one by one, as it would one.
        """
        if self._finishes is None:
            self._finishes = Batcher(self._finish_many, in_flight=1)
        return bool(await self._finishes.call((grant, run)))

    async def _finish_many(self, items: Sequence[tuple[Grant, Run]]) -> list[bool]:
        return await self._write(_store.finish_many(items))

    async def history(self, job: str, limit: int = 100) -> list[Run]:
        limit = check_history_limit(limit)
        return await self._call(lambda conn: _store.history(conn, job, limit))

    # -- lease tier -------------------------------------------------------------------

    async def renew(self, grants: Sequence[Grant]) -> list[bool]:
        if not grants:
            return []
        return await self._write(_store.renew(grants))

    async def take_over(self, jobs: Sequence[Job], instance: str) -> list[ClaimResult]:
        if not jobs:
            return []
        return await self._write(_store.take_over(jobs, instance))

    async def hand_over(self, grant: Grant) -> bool:
        return await self._write(_store.hand_over(grant))

    def heart(self) -> SQLiteHeart:
        return SQLiteHeart(self.path, self.busy_timeout_ms, self.synchronous, self._clock)

    async def marks(self, jobs: Sequence[Job]) -> dict[str, int | None]:
        if not jobs:
            return {}
        # Only the scheduler's recovery and catch-up read marks, to claim with them: while the
        # filesystem is full that answer would end the outage for claims that cannot be written.
        check_room(self.path)
        return await self._call(lambda conn: _store.marks(conn, jobs))
