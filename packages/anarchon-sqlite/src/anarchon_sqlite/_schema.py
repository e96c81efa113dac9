"""The database layout, its version, and the checks made when a file is opened.

The version lives in a row of ``anarchon_meta`` rather than in
``PRAGMA user_version``, because the file may be the application's own
database, whose migrations may already own ``user_version``. A release that
changes the layout raises :data:`SCHEMA_VERSION` and adds a step to
:data:`_MIGRATIONS`; a file written by a newer release is refused, never
guessed at.
"""

from __future__ import annotations

import sqlite3
import time

from ._errors import DatabaseFileError

__all__ = ["SCHEMA_VERSION", "SYNCHRONOUS_MODES", "open_store"]

SCHEMA_VERSION = 1

#: ``PRAGMA synchronous`` values offered; the pragma takes no bound parameter,
#: so only these exact words ever reach the SQL.
SYNCHRONOUS_MODES = ("normal", "full")

# Tables added after version 1 without raising the version: a release that does not know
# one ignores it (its instances never beat, pause or take requests), so a fleet can be
# upgraded one instance at a time. Created when missing, each time a file is opened.
_ADDED = {
    # One row per instance that beats: alive until (host clock, ms); anarchon.liveness.
    "anarchon_instances": "CREATE TABLE IF NOT EXISTS anarchon_instances ("
    "instance TEXT PRIMARY KEY, alive_until INTEGER NOT NULL)",
    # A job's pause (until_ms NULL while it lasts) and the run requests not yet taken: _control.
    "anarchon_pauses": "CREATE TABLE IF NOT EXISTS anarchon_pauses ("
    "job TEXT PRIMARY KEY, since_ms INTEGER NOT NULL, until_ms INTEGER, reason TEXT, paused_by TEXT)",
    "anarchon_requests": "CREATE TABLE IF NOT EXISTS anarchon_requests ("
    "job TEXT NOT NULL, slot_ms INTEGER NOT NULL, requested_by TEXT, PRIMARY KEY (job, slot_ms)) WITHOUT ROWID",
}

_CREATE = (
    "CREATE TABLE anarchon_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)",
    # One row per job: the mark (newest decided scheduled slot), the newest
    # scheduled slot won (take-over's "newest run"), the fencing counter, and
    # how many runs history holds, so trimming needs no COUNT(*).
    """CREATE TABLE anarchon_jobs (
        job TEXT PRIMARY KEY,
        mark INTEGER,
        won INTEGER,
        fencing INTEGER NOT NULL DEFAULT 0,
        kept INTEGER NOT NULL DEFAULT 0
    )""",
    # One row per slot (and one per manual run): the history record and its lease.
    """CREATE TABLE anarchon_runs (
        job TEXT NOT NULL,
        slot_ms INTEGER NOT NULL,
        manual INTEGER NOT NULL,
        status TEXT NOT NULL,
        instance TEXT NOT NULL,
        attempt INTEGER NOT NULL,
        fencing INTEGER,
        catch_up INTEGER NOT NULL,
        missed INTEGER NOT NULL,
        started_at_us INTEGER,
        finished_at_us INTEGER,
        duration_ms INTEGER,
        error TEXT,
        token TEXT NOT NULL,
        lease_ms INTEGER NOT NULL,
        expires_ms INTEGER NOT NULL,
        handed_over INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (job, slot_ms, manual)
    ) WITHOUT ROWID""",
    # Live leases only: the overlap check, abandoning and take-over read this.
    "CREATE INDEX anarchon_runs_running ON anarchon_runs (job, expires_ms) WHERE status = 'running'",
)

#: ``{version: statements}`` bringing a file from ``version - 1`` to ``version``.
_MIGRATIONS: dict[int, tuple[str, ...]] = {}


def _stored_version(conn: sqlite3.Connection) -> int | None:
    found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'anarchon_meta'").fetchone()
    if found is None:
        return None
    row = conn.execute("SELECT value FROM anarchon_meta WHERE key = 'schema_version'").fetchone()
    return int(row[0]) if row else None


def _refuse_newer(path: str, version: int) -> DatabaseFileError:
    return DatabaseFileError(
        f"SQLite database {path} was written by a newer anarchon-sqlite (schema version {version}; this "
        f"release reads up to {SCHEMA_VERSION}): upgrade anarchon-sqlite on every instance that shares the "
        "file, or point path at another file",
        path=path,
    )


def _use_wal(conn: sqlite3.Connection, path: str, timeout_s: float) -> None:
    """Switch the file to WAL once; later opens find it so and take no lock.

    Switching needs a moment alone with the file, and SQLite answers "locked"
    at once, without the busy handler, when another process opens it then:
    so retry until the busy timeout, as every other statement waits.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            mode = str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower()
            if mode != "wal":
                mode = str(conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]).lower()
            break
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.002)
    if mode != "wal":
        raise DatabaseFileError(
            f"SQLite database {path} could not be switched to WAL mode (it stayed in {mode!r} mode), which "
            "processes need to share it: put the file on a local disk (not a network share), and check that "
            "no other program holds it in exclusive locking mode",
            path=path,
        )


def _add_tables(conn: sqlite3.Connection) -> None:
    """Create the tables of :data:`_ADDED` that are missing, under the write lock; a file with them is only read."""
    have = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if all(name in have for name in _ADDED):
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        for statement in _ADDED.values():
            conn.execute(statement)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def open_store(conn: sqlite3.Connection, path: str, synchronous: str, timeout_s: float) -> None:
    """Configure a fresh connection and make sure the layout is there and current.

    Safe when many processes open a new file at once: the layout is created
    inside ``BEGIN IMMEDIATE`` after re-reading the version under the lock.
    """
    try:
        _use_wal(conn, path, timeout_s)
    except sqlite3.DatabaseError as exc:
        if isinstance(exc, sqlite3.OperationalError):
            raise
        raise DatabaseFileError(
            f"{path} is not a SQLite database ({exc}): point path at another file, or move this one away "
            "so anarchon creates a new database there",
            path=path,
        ) from exc
    if synchronous not in SYNCHRONOUS_MODES:  # checked in __init__ too: never format an unchecked word
        raise ValueError(f"synchronous={synchronous!r} must be one of {SYNCHRONOUS_MODES}")
    conn.execute(f"PRAGMA synchronous = {synchronous.upper()}")

    version = _stored_version(conn)
    if version == SCHEMA_VERSION:
        _add_tables(conn)
        return
    if version is not None and version > SCHEMA_VERSION:
        raise _refuse_newer(path, version)
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = _stored_version(conn)
        if version is None:
            for statement in _CREATE:
                conn.execute(statement)
            conn.execute("INSERT INTO anarchon_meta (key, value) VALUES ('schema_version', ?)", (SCHEMA_VERSION,))
        elif version > SCHEMA_VERSION:
            raise _refuse_newer(path, version)
        else:
            for step in range(version + 1, SCHEMA_VERSION + 1):
                for statement in _MIGRATIONS[step]:
                    conn.execute(statement)
            conn.execute("UPDATE anarchon_meta SET value = ? WHERE key = 'schema_version'", (SCHEMA_VERSION,))
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    _add_tables(conn)
