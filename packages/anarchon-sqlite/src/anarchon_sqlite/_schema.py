"""The database layout, its version, and the checks made when a file is opened.

The version lives in a row of ``anarchon_meta`` rather than in
``PRAGMA user_version``, because the file may be the application's own
database, whose migrations may already own ``user_version``. A release that
changes the layout raises :data:`SCHEMA_VERSION` and adds a step to
:data:`_MIGRATIONS`; a file written by a newer release is refused, never
guessed at. What an older release can ignore (a table, an index, a nullable
column it never names) is added without raising it (:data:`_ADDED`,
:data:`_ADDED_COLUMNS`), so the processes sharing a file can be upgraded one
at a time.
"""

from __future__ import annotations

import sqlite3
import time

from ._errors import DatabaseFileError
from ._sql import statement

__all__ = ["SCHEMA_VERSION", "SYNCHRONOUS_MODES", "open_store"]

SCHEMA_VERSION = 1

#: ``PRAGMA synchronous`` values offered; the pragma takes no bound parameter,
#: so only these exact words ever reach the SQL.
SYNCHRONOUS_MODES = ("normal", "full")

# Tables (and their indexes) added after version 1 without raising the version: a release
# that does not know one ignores it (its instances never beat, pause, take requests or read
# stored schedules), so a fleet can be upgraded one instance at a time. Created when missing,
# each time a file is opened, in this order (an index after its table).
_ADDED = {
    # One row per instance that beats: alive until (host clock, ms); anarchon.liveness.
    "anarchon_instances": statement("schema_add_instances"),
    # A job's pause (until_ms NULL while it lasts) and the run requests not yet taken: _control.
    "anarchon_pauses": statement("schema_add_pauses"),
    "anarchon_requests": statement("schema_add_requests"),
    # Each live instance's head and job definitions: the fleet registry (_registry).
    "anarchon_registry": statement("schema_add_registry"),
    # Stored schedules (_schedules): one row per name (record NULL: a tombstone), each name's
    # change log, and the one-row counter every change takes its revision from. The counter is
    # a row, not MAX(revision): purged tombstones would take the highest revision with them.
    "anarchon_schedules": statement("schema_add_schedules"),
    # The poll's "what changed after revision n", and the purge of old tombstones.
    "anarchon_schedules_by_revision": statement("schema_add_schedules_by_revision"),
    "anarchon_schedules_tombstones": statement("schema_add_schedules_tombstones"),
    "anarchon_schedule_log": statement("schema_add_schedule_log"),
    "anarchon_schedule_counter": statement("schema_add_schedule_counter"),
    # The audit trail (_audit): appended, never updated, read newest first and by job.
    "anarchon_audit": statement("schema_add_audit"),
    "anarchon_audit_by_job": statement("schema_add_audit_by_job"),
    # Concurrency groups (_groups): each group's limit, and one entry per run that asked for a
    # place; the entries indexed in turn (the count of places held, the oldest waiting) and by holder.
    "anarchon_group_limits": statement("schema_add_group_limits"),
    "anarchon_places": statement("schema_add_places"),
    "anarchon_places_turn": statement("schema_add_places_turn"),
    "anarchon_places_by_holder": statement("schema_add_places_by_holder"),
}

# Columns of anarchon_runs added after version 1 without raising the version, on the same terms: a
# release that does not know one never names it, so it leaves it alone. Added when missing, each time
# a file is opened (a new file has them from schema_create_runs).
_ADDED_COLUMNS = {
    # The attempts a take-over replaced (anarchon.run.Attempt), a JSON list, oldest first; NULL for none.
    "earlier": statement("schema_add_runs_earlier"),
}

_CREATE = (
    statement("schema_create_meta"),
    # One row per job: the mark (newest decided scheduled slot), the newest
    # scheduled slot won (take-over's "newest run"), the fencing counter, and
    # how many runs history holds, so trimming needs no COUNT(*).
    statement("schema_create_jobs"),
    # One row per slot (and one per manual run): the history record and its lease.
    statement("schema_create_runs"),
    # Live leases only: the overlap check, abandoning and take-over read this.
    statement("schema_create_runs_running_index"),
)

#: ``{version: statements}`` bringing a file from ``version - 1`` to ``version``.
_MIGRATIONS: dict[int, tuple[str, ...]] = {}


def _stored_version(conn: sqlite3.Connection) -> int | None:
    found = conn.execute(statement("schema_meta_exists")).fetchone()
    if found is None:
        return None
    row = conn.execute(statement("schema_version_read")).fetchone()
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


def _missing_columns(conn: sqlite3.Connection) -> list[str]:
    """The statements adding the columns of :data:`_ADDED_COLUMNS` that ``anarchon_runs`` lacks."""
    have = {row[0] for row in conn.execute(statement("schema_runs_columns"))}
    return [ddl for name, ddl in _ADDED_COLUMNS.items() if name not in have]


def _add_tables(conn: sqlite3.Connection) -> None:
    """Create what :data:`_ADDED` and :data:`_ADDED_COLUMNS` name and the file lacks, under the write lock.

    A file with it all is only read. ``schema_tables`` lists indexes too (they share one
    namespace with tables), so a file that has a table but not its newer index gains the
    index. A column has no ``IF NOT EXISTS``: which ones are missing is read again under
    the lock, so of many processes opening an older file at once one adds each.
    """
    have = {row[0] for row in conn.execute(statement("schema_tables"))}
    if all(name in have for name in _ADDED) and not _missing_columns(conn):
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        for ddl in _ADDED.values():
            conn.execute(ddl)
        for ddl in _missing_columns(conn):
            conn.execute(ddl)
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
            for ddl in _CREATE:
                conn.execute(ddl)
            conn.execute(statement("schema_version_insert"), (SCHEMA_VERSION,))
        elif version > SCHEMA_VERSION:
            raise _refuse_newer(path, version)
        else:
            for step in range(version + 1, SCHEMA_VERSION + 1):
                for ddl in _MIGRATIONS[step]:
                    conn.execute(ddl)
            conn.execute(statement("schema_version_update"), (SCHEMA_VERSION,))
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    _add_tables(conn)
