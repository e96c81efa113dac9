"""The tables and functions the backend keeps in its schema, and their migrations.

The SQL lives in resource files beside this module (``sql/migration_<n>.sql``
and what they include), shipped in the wheel and read with
:mod:`importlib.resources`. Every lease rule runs inside PL/pgSQL functions
created there, so each claim, take-over, renewal and finish is one
statement and one round trip. The schema name is the only identifier ever
put into SQL text; it is checked and quoted first, and every value travels as
a query parameter.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import re
from collections.abc import Callable
from importlib import resources

import asyncpg  # type: ignore[import-untyped]

__all__ = [
    "SCHEMA_VERSION",
    "check_schema_name",
    "control_channel",
    "decided_channel",
    "ensure_schema",
    "groups_channel",
    "installed_version",
    "migration_script",
    "migration_steps",
    "quote_schema",
    "render_sql",
    "schedules_channel",
]

log = logging.getLogger("anarchon.postgres")

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")

#: Advisory-lock class shared by every anarchon schema ("anar" in ASCII); the
#: second key is ``hashtext(schema)``, so instances on different schemas do
#: not wait for each other.
_LOCK_CLASS = 0x616E6172


def check_schema_name(schema: object) -> str:
    if not isinstance(schema, str) or not _IDENTIFIER.fullmatch(schema):
        raise ValueError(
            f"schema={schema!r} is not a plain PostgreSQL identifier: use 1 to 63 letters, digits or '_', "
            "not starting with a digit, for example schema='anarchon'"
        )
    if schema.lower().startswith("pg_") or schema.lower() == "information_schema":
        raise ValueError(
            f"schema={schema!r} is a PostgreSQL system schema (pg_catalog, pg_toast, pg_*, information_schema): "
            "anarchon's tables must not live there; pick another, for example schema='anarchon'"
        )
    return schema


def quote_schema(schema: str) -> str:
    return f'"{check_schema_name(schema)}"'


#: PostgreSQL's longest identifier (NAMEDATALEN - 1), a channel name included: ``pg_notify`` refuses a longer one.
_NAME_MAX = 63
_CHANNEL = re.compile(r"[A-Za-z0-9_]{1,63}")


def schedules_channel(schema: str) -> str:
    """The channel the schema's stored-schedule changes are notified on (``pg_notify``, ``LISTEN``).

    ``anarchon_schedules_<schema>``, made from the checked schema name only, so
    letters, digits and ``_``; past 63 characters its end is a hash of the
    schema, so two schemas never share one (if two did, each would wake the
    other's instances for one poll more, nothing worse). Case is kept: asyncpg
    quotes the name it listens on, and ``pg_notify`` takes it as it is.
    """
    return _channel("schedules", schema)


def decided_channel(schema: str) -> str:
    """The channel the claims of the schema notify each scheduled slot they decided on (ranked claims).

    ``anarchon_decided_<schema>``, made as :func:`schedules_channel` is.
    """
    return _channel("decided", schema)


def control_channel(schema: str) -> str:
    """The channel each pause, resume and run request of the schema is notified on (the job's name).

    ``anarchon_control_<schema>``, made as :func:`schedules_channel` is.
    """
    return _channel("control", schema)


def groups_channel(schema: str) -> str:
    """The channel each place left and each limit set in the schema is notified on (capability ``group_notify``).

    ``anarchon_groups_<schema>``, made as :func:`schedules_channel` is.
    """
    return _channel("groups", schema)


def _channel(kind: str, schema: str) -> str:
    channel = f"anarchon_{kind}_{check_schema_name(schema)}"
    if len(channel) > _NAME_MAX:
        channel = f"{channel[: _NAME_MAX - 13]}_{hashlib.sha256(schema.encode()).hexdigest()[:12]}"
    if not _CHANNEL.fullmatch(channel):
        raise ValueError(f"{kind} channel {channel!r} is not a plain identifier")
    return channel


#: What the resource files under ``sql/`` may ask to have filled in: the
#: quoted schema, the server's clock in milliseconds, and the schema's
#: schedules channel as a string literal (:func:`schedules_channel`).
_NOW_MS = "floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
_PLACEHOLDER = re.compile(r"@([a-z_]+)@")
_INCLUDE = re.compile(r"^-- @include ([a-z0-9_]+\.sql)$", re.MULTILINE)


@functools.cache
def _resource(name: str) -> str:
    """The text of ``sql/<name>``, read once per process (every backend renders its statements from it)."""
    return resources.files(__package__).joinpath("sql", name).read_text(encoding="utf-8")


def render_sql(name: str, quoted_schema: str) -> str:
    """The SQL of resource ``sql/<name>`` for one schema.

    ``-- @include other.sql`` lines are replaced by that file; ``@schema@`` by
    the schema name, which must come quoted from :func:`quote_schema` (checked
    again here), ``@now_ms@`` by the server-clock expression, ``@channel@`` by
    the schema's :func:`schedules_channel` in quotes, ``@decided@`` by its
    :func:`decided_channel` in quotes, ``@control@`` by its :func:`control_channel`, ``@groups@`` by its
    :func:`groups_channel`. Any other placeholder is a bug in the file and fails loudly.
    """
    if not (quoted_schema.startswith('"') and quoted_schema.endswith('"')):
        raise ValueError(f"render_sql needs a schema quoted by quote_schema(), got {quoted_schema!r}")
    check_schema_name(quoted_schema[1:-1])
    text = _INCLUDE.sub(lambda m: _resource(m.group(1)), _resource(name))
    schema = quoted_schema[1:-1]
    values = {
        "schema": quoted_schema,
        "now_ms": _NOW_MS,
        "channel": f"'{schedules_channel(schema)}'",
        "decided": f"'{decided_channel(schema)}'",
        "control": f"'{control_channel(schema)}'",
        "groups": f"'{groups_channel(schema)}'",
    }

    def fill(m: re.Match[str]) -> str:
        if m.group(1) not in values:
            raise KeyError(f"sql/{name}: unknown placeholder @{m.group(1)}@")
        return values[m.group(1)]

    return _PLACEHOLDER.sub(fill, text)


def _migration(name: str) -> Callable[[str], str]:
    def migration(quoted_schema: str) -> str:
        return render_sql(name, quoted_schema)

    migration.__name__ = migration.__qualname__ = name.removesuffix(".sql")
    return migration


#: Migration n (1-based) brings the schema from version n-1 to n. Append only,
#: and keep each one compatible with the releases before it: an instance of an
#: older release finds a newer schema and keeps working (rolling upgrades).
_MIGRATIONS = (
    _migration("migration_1.sql"),  # tables, indexes, history trim, claim and take-over functions
    _migration("migration_2.sql"),  # the claim function names the mark it found (o_previous_mark)
    _migration("migration_3.sql"),  # claim_batch: set-based batches, losers lock nothing; jobs fillfactor
    _migration("migration_4.sql"),  # instances (heartbeats); a dead owner's runs count as expired
    _migration("migration_5.sql"),  # pauses, run requests, claim_paused (steering the fleet)
    _migration("migration_6.sql"),  # finish_many, renew_many: row by row, a plan no ANALYZE can turn
    _migration("migration_7.sql"),  # registry: each live instance's head and job definitions
    _migration("migration_8.sql"),  # stored schedules: records by revision, their logs, one counter
    _migration("migration_9.sql"),  # a job's fencing counter starts at the clock (fencing_floor), not 0
    _migration("migration_10.sql"),  # put_schedule notifies each change (pg_notify) for the instances' LISTEN
    _migration("migration_11.sql"),  # audit: every pause, resume, trigger, backfill and schedule change, appended
    _migration("migration_12.sql"),  # runs.earlier: a take-over keeps the attempt it replaces (take_over again)
    _migration("migration_13.sql"),  # claim, claim_batch notify each scheduled slot decided (ranked claims)
    _migration("migration_14.sql"),  # claims and take-overs condemn no owner while no record is alive
    _migration("migration_15.sql"),  # concurrency groups: limits, places, the places function
)
SCHEMA_VERSION = len(_MIGRATIONS)


async def _version(conn: asyncpg.Connection, schema: str, quoted: str) -> int:
    if not await conn.fetchval(_resource("schema_exists.sql"), schema):
        return 0
    return int(await conn.fetchval(render_sql("schema_version_read.sql", quoted)))


async def ensure_schema(conn: asyncpg.Connection, schema: str) -> bool:
    """Create or upgrade the schema; ``True`` when this call changed it.

    Many instances start at once: the check runs again under a
    transaction-scoped advisory lock, so exactly one of them creates the
    tables and the others find them made. A schema already at the current
    version is left alone without taking the lock or needing CREATE rights.
    """
    quoted = quote_schema(schema)
    if await _version(conn, schema, quoted) >= SCHEMA_VERSION:
        return False
    async with conn.transaction():
        await conn.execute(_resource("schema_lock.sql"), _LOCK_CLASS, schema)
        current = await _version(conn, schema, quoted)
        if current >= SCHEMA_VERSION:
            return False
        for version, statement in migration_steps(quoted, current):
            await conn.execute(statement)
            if version:
                log.info("anarchon-postgres: schema %s migrated to version %d", schema, version)
    return True


def migration_steps(quoted: str, current: int) -> list[tuple[int, str]]:
    """The statements that bring a schema from version ``current`` to :data:`SCHEMA_VERSION`, in order.

    Each comes with the version it completes (0 for the set-up before the
    first). :func:`ensure_schema` runs them under its advisory lock;
    :func:`migration_script` prints them for a DBA, so both are one list.
    """
    steps = [
        (0, render_sql("schema_create.sql", quoted).strip()),
        (0, render_sql("schema_version_table.sql", quoted).strip()),
    ]
    record = render_sql("schema_version_insert.sql", quoted).strip()
    for version in range(current + 1, SCHEMA_VERSION + 1):
        steps.append((0, _MIGRATIONS[version - 1](quoted).strip()))
        # The version is a literal, not $1: the DBA's script (migration_script) runs these as they are.
        steps.append((version, record.replace("$1", str(int(version)))))
    return steps


async def installed_version(conn: asyncpg.Connection, schema: str) -> int:
    """The schema's version as found, 0 when it has no anarchon tables; reads only."""
    return await _version(conn, schema, quote_schema(schema))


def migration_script(schema: str, current: int) -> str:
    """A psql script applying what :func:`ensure_schema` would, for a DBA to read and run.

    One transaction under the same advisory lock as :meth:`PostgresBackend.start`,
    so it is safe while instances start.
    """
    quoted = quote_schema(schema)
    if current >= SCHEMA_VERSION:
        return f"-- schema {schema} is at version {current}; this release needs {SCHEMA_VERSION}: nothing to apply\n"
    body = ";\n\n".join(statement.rstrip().rstrip(";") for _, statement in migration_steps(quoted, current))
    return (
        f"-- anarchon-postgres: schema {schema} from version {current} to {SCHEMA_VERSION}\n"
        "BEGIN;\n"
        f"SELECT pg_advisory_xact_lock({_LOCK_CLASS}, hashtext('{schema}'));\n\n"
        f"{body};\n\nCOMMIT;\n"
    )
