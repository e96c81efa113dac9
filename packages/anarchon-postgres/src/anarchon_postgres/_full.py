"""A server with no free connection (SQLSTATE 53300): one error naming the cause and the fix.

PostgreSQL refuses a new session once ``max_connections`` are taken (less the
slots it reserves for superusers), or once a role's or a database's
``CONNECTION LIMIT`` is. asyncpg then raises ``TooManyConnectionsError`` with
the server's bare text ("sorry, too many clients already"), which says
neither which limit, nor what to change, nor that the instance goes on by
itself once a connection frees. An instance meets it when it starts (its
pool's first connection), when its pool grows or replaces a connection the
server ended, and when its heartbeat connects again. Each of those turns it
into the :class:`~anarchon.errors.BackendUnavailableError` built here, so a
failed start, the scheduler's one warning per outage and the heartbeat's
warning all say the same thing.

``max_connections`` is read at :meth:`PostgresBackend.start`: once the server
is full there is no session left to ask it.

A refusal while the pool still holds connections is no outage: the call waits
for one of those (:func:`own_connection`), as it waits at ``max_size``, so an
instance keeps claiming with what it holds, its calls taking turns, instead of
failing the claims that would have needed one connection more (their slots
lost until the catch-up). That is logged once in a while (:func:`capped`),
since the server is at its limit all the same.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

import asyncpg  # type: ignore[import-untyped]

from anarchon.errors import BackendUnavailableError

__all__ = ["NoFreeConnection", "capped", "own_connection"]

#: How often a call waiting for one of the pool's own connections looks whether one came back.
_POLL_S = 0.005
#: The pool going on with what it holds is logged at most this often (seconds).
CAPPED_WARN_EVERY_S = 600.0


@dataclass(frozen=True)
class NoFreeConnection:
    """Builds the error for one backend: where it connects, the limit it saw, what one instance holds."""

    where: str
    #: ``max_connections`` as start() read it; None before (a start refused at once never learns it).
    max_connections: int | None
    #: Connections one instance may hold: its pool's, and one more for its heartbeat when it keeps one.
    per_instance: int
    pool_max: int

    def error(self, exc: asyncpg.TooManyConnectionsError, *, starting: bool) -> BackendUnavailableError:
        """The refusal ``exc`` as a :class:`BackendUnavailableError` whose text says what to do."""
        server = str(exc)
        limit, fix = self.cause(exc)
        now = (
            "this instance cannot start until one frees"
            if starting
            else "this instance claims nothing until one frees, then goes on by itself"
        )
        heart = " and 1 for its heartbeat" if self.per_instance > self.pool_max else ""
        return BackendUnavailableError(
            f"PostgreSQL at {self.where} has no free connection ({limit} reached, SQLSTATE 53300: {server}): "
            f"{now}. Each instance holds up to {self.per_instance} (a pool of up to {self.pool_max}{heart}); "
            f"{fix}, give the server's other clients fewer connections, or put a pooler such as PgBouncer in front"
        )

    def cause(self, exc: asyncpg.TooManyConnectionsError) -> tuple[str, str]:
        """The limit the server's text names, and how to raise it."""
        server = str(exc).lower()
        if "for role" in server:
            return "the role's CONNECTION LIMIT", "raise it (ALTER ROLE … CONNECTION LIMIT n)"
        if "for database" in server:
            return "the database's CONNECTION LIMIT", "raise it (ALTER DATABASE … CONNECTION LIMIT n)"
        known = "" if self.max_connections is None else f"={self.max_connections}"
        if "reserved" in server:
            # "remaining connection slots are reserved for …": the rest of max_connections is kept for superusers.
            return (
                f"max_connections{known} less the slots reserved for superusers",
                "raise max_connections (or lower superuser_reserved_connections / reserved_connections)",
            )
        return f"max_connections{known}", "raise max_connections in postgresql.conf (a restart applies it)"


async def own_connection(
    pool: asyncpg.Pool, refused: asyncpg.TooManyConnectionsError, timeout_s: float
) -> asyncpg.Connection:
    """One of the connections ``pool`` holds, once another call hands it back (within ``timeout_s``).

    asyncpg hands out an idle open connection before it opens one (its queue
    puts them first), so once one is idle, acquiring takes it without asking
    the server. asyncpg has no event for a release, hence the short polls;
    the wait is that of the call holding the connection, milliseconds. Raises
    the last refusal when the pool holds none any more or the time is up.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        if pool.get_idle_size():
            try:
                conn: asyncpg.Connection = await pool.acquire()
                return conn
            except asyncpg.TooManyConnectionsError as exc:  # the one idle had ended: it was opened again
                refused = exc
        if not pool.get_size() or time.monotonic() > deadline:
            raise refused
        await asyncio.sleep(_POLL_S)


def capped(
    log: logging.Logger,
    last: float | None,
    no_free: NoFreeConnection,
    refused: asyncpg.TooManyConnectionsError,
    held: int,
) -> float | None:
    """Say (at most every ``CAPPED_WARN_EVERY_S``) that the server refused the pool one connection more.

    Nothing fails, but the instance is as slow as its ``held`` connections
    allow, and the next connection it loses is not given back: the operator
    should know before that. Returns when it last said so.
    """
    now = time.monotonic()
    if last is not None and now - last < CAPPED_WARN_EVERY_S:
        return last
    limit, fix = no_free.cause(refused)
    log.warning(
        "PostgreSQL at %s refused this instance one connection more (%s reached, SQLSTATE 53300): it goes on "
        "with the %d it holds, its calls taking turns, but one it loses is not given back while the server "
        "is full; %s, or give its other clients fewer connections",
        no_free.where,
        limit,
        held,
        fix,
    )
    return now
