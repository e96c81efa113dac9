"""SQLite: the primitive is ``INSERT OR IGNORE`` on a WAL file, read back through ``rowcount``."""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from pathlib import Path

import aiosqlite

from .._target import BackendSpec, RawClient, Target


def _folder(ns: str) -> Path:
    return Path(tempfile.gettempdir()) / f"anarchon-{ns}"


class _Raw(RawClient):
    description = "`INSERT OR IGNORE` + `rowcount` (WAL, synchronous NORMAL, aiosqlite)"

    def __init__(self, path: Path) -> None:
        self.path = path

    async def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = await aiosqlite.connect(self.path, timeout=5.0, isolation_level=None, cached_statements=256)
        await self.conn.execute("PRAGMA journal_mode = WAL")
        await self.conn.execute("PRAGMA synchronous = NORMAL")
        await self.conn.execute("CREATE TABLE IF NOT EXISTS gate (key TEXT PRIMARY KEY) WITHOUT ROWID")

    async def once(self, key: str) -> bool:
        cursor = await self.conn.execute("INSERT OR IGNORE INTO gate VALUES (?)", (key,))
        return cursor.rowcount == 1

    async def close(self) -> None:
        await self.conn.close()


class SQLiteTarget(Target):
    name = "sqlite"

    async def unreachable(self) -> str | None:
        return None

    def spec(self, ns: str) -> BackendSpec:
        folder = _folder(ns)
        folder.mkdir(parents=True, exist_ok=True)
        return BackendSpec("anarchon_sqlite:SQLiteBackend", {"path": str(folder / "anarchon.sqlite3")})

    async def footprint(self, ns: str) -> dict[str, float]:
        folder = _folder(ns)
        path = folder / "anarchon.sqlite3"
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            rows = conn.execute("SELECT (SELECT count(*) FROM anarchon_runs) + (SELECT count(*) FROM anarchon_jobs)")
            (count,) = rows.fetchone()
        finally:
            conn.close()
        size = sum(f.stat().st_size for f in folder.glob("anarchon.sqlite3*"))
        return {"rows": float(count), "MB": size / 1e6}

    def raw(self, ns: str) -> RawClient:
        return _Raw(_folder(ns) / "raw.sqlite3")

    async def cleanup(self, ns: str) -> None:
        shutil.rmtree(_folder(ns), ignore_errors=True)

    async def versions(self) -> dict[str, str]:
        return {"aiosqlite": aiosqlite.__version__, "SQLite": sqlite3.sqlite_version}


TARGET = SQLiteTarget()
