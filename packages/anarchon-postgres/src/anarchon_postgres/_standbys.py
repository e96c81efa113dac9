"""``min_replicas``: a grant counts only once a standby has flushed it.

PostgreSQL streams to a standby after the commit returned (unless
``synchronous_standby_names`` names it), so a standby promoted after a crash
can lack the last claims, and a second instance then wins the same slot on it:
79 slots ran twice in the failover scenario with the old defaults. And in a
switch-over the old primary goes on granting to the clients still connected to
it while the promoted standby grants the same slots to the others.

So after a statement that grants (a claim, a take-over, a renewal, a revive or
a backfill) commits, the backend reads the server's WAL position and waits,
up to ``replica_timeout_ms`` (100 ms), until ``min_replicas`` standbys report
it flushed (``pg_stat_replication.flush_lsn``, which a standby reports as soon
as it flushed). A grant not known to be on a standby is *unknown*: the
scheduler never runs it, and the slot is lost rather than risk running it twice.
Nothing changes on the server; a standby that keeps up costs one more round
trip per granting statement (one statement carries a batch of claims).

``min_replicas="auto"``, the default, waits for one standby while one streams
from the server, or did within :data:`STICKY_S` on the same timeline, and for
none on a server that never had one: the switch-over's old primary, left
without its standby, then refuses to confirm what it grants, and the promoted
standby, on a new timeline, confirms at once until a standby of its own
streams. It reads ``pg_stat_replication`` at start and then at most every
:data:`WATCH_PERIOD_S`, only while claims are made. A role that cannot read
the standbys' positions (``flush_lsn`` is NULL without ``pg_read_all_stats``)
cannot wait (it sees the standbys' rows with their state NULL): ``auto``
then waits for none, with one warning; a number waits and every grant is
unknown.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

import asyncpg  # type: ignore[import-untyped]

from anarchon.backend import ClaimResult, Outcome

from ._schema import _resource

__all__ = ["STICKY_S", "StandbyWatch", "StandbysMixin"]

T = TypeVar("T")

log = logging.getLogger("anarchon.postgres")

#: How often ``auto`` reads the server's standbys (only when a claim asks).
WATCH_PERIOD_S = 1.0
#: How long ``auto`` keeps waiting after the timeline's last standby left (a switch-over's length, and more).
STICKY_S = 60.0
#: The pause between two reads of the standbys' positions while a grant waits.
POLL_S = 0.002


class StandbyWatch:
    """How many standbys ``auto`` waits for: 1 while the server streams to one, or just did; else 0."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.streaming = 0
        self.readable = True
        self._timeline = ""
        #: Each timeline seen with a standby, and when one was last seen streaming on it.
        self._seen: dict[str, float] = {}
        self._checked: float | None = None
        self._task: asyncio.Task[None] | None = None
        self._warned = False
        self._warned_at = float("-inf")

    def wait_for(self, read: Callable[[], Awaitable[asyncpg.Record]]) -> int:
        """The standbys to wait for now; reads the server again (in the background) when due."""
        now = time.monotonic()
        due = self._checked is None or now - self._checked > WATCH_PERIOD_S
        if due and (self._task is None or self._task.done()):
            self._task = asyncio.get_running_loop().create_task(self.refresh(read))
        if not self.readable:
            return 0
        last = self._seen.get(self._timeline)
        return 1 if self.streaming or (last is not None and now - last < STICKY_S) else 0

    def stale(self, waited_ms: int) -> None:
        """A wait fell short: the standby may be gone (promoted, stopped); read the server at the next claim.

        Warned at most once a minute: each time, grants were refused, and their slots will not run.
        """
        self._checked = None
        now = time.monotonic()
        if now - self._warned_at >= STICKY_S:
            self._warned_at = now
            log.warning(
                "%s: no standby flushed a grant within replica_timeout_ms=%d: it is not run (its slot is lost, "
                "never run twice). The standby lags, stopped, or was promoted; grants run again once one "
                "streams and keeps up, or %d s after the last one left this server",
                self.what,
                waited_ms,
                round(STICKY_S),
            )

    async def refresh(self, read: Callable[[], Awaitable[asyncpg.Record]]) -> None:
        self._checked = time.monotonic()
        try:
            row = await read()
        except Exception as exc:  # the claims themselves say what is wrong with the server
            log.debug("%s: reading the standbys failed: %s", self.what, exc)
            return
        self.streaming, self._timeline = int(row["streaming"]), str(row["timeline"])
        hidden = int(row["hidden"])
        self.readable = not hidden
        if self.streaming and self.readable:
            self._seen[self._timeline] = time.monotonic()
        if not self.readable and not self._warned:
            self._warned = True
            log.warning(
                "%s: %d standby(s) stream from this server, but this role cannot read how far "
                "(pg_stat_replication shows their state and positions as NULL without pg_read_all_stats), so "
                "grants cannot wait for them and a failover may run a slot twice; grant pg_read_all_stats to this role",
                self.what,
                hidden,
            )


async def read_standbys(conn: asyncpg.Connection, timeout: float) -> asyncpg.Record:
    return await conn.fetchrow(_resource("standbys_watch.sql"), timeout=timeout)


async def flushed(conn: asyncpg.Connection, replicas: int, timeout_ms: int, statement_timeout: float) -> bool:
    """After a commit on ``conn``: whether ``replicas`` standbys flushed it within ``timeout_ms``."""
    row = await conn.fetchrow(_resource("standbys_flushed_first.sql"), timeout=statement_timeout)
    if int(row["flushed"]) >= replicas:
        return True
    deadline = time.monotonic() + timeout_ms / 1000
    query = _resource("standbys_flushed.sql")
    while time.monotonic() < deadline:
        await asyncio.sleep(POLL_S)
        if int(await conn.fetchval(query, row["lsn"], timeout=statement_timeout)) >= replicas:
            return True
    return False


class StandbysMixin:
    """Mixed into :class:`~anarchon_postgres.PostgresBackend`: what a granting statement waits for."""

    min_replicas: int | None
    replica_timeout_ms: int
    _timeout: float
    _standby_watch: StandbyWatch

    if TYPE_CHECKING:  # the backend's own, used here

        async def _call(self, what: str, op: Callable[[asyncpg.Connection, bool], Awaitable[T]]) -> T: ...

    def _standbys_to_wait(self) -> int:
        """How many standbys the next granting statement waits for (read before the statement is sent)."""
        if self.min_replicas is not None:
            return self.min_replicas
        return self._standby_watch.wait_for(self._read_standbys)

    async def _read_standbys(self) -> asyncpg.Record:
        async def op(conn: asyncpg.Connection, retry: bool) -> asyncpg.Record:
            return await read_standbys(conn, self._timeout)

        return await self._call("standbys", op)

    async def _confirmed(self, conn: asyncpg.Connection, wait: int) -> bool:
        """After a granting statement committed on ``conn``: whether its grants may run (``wait`` standbys have it)."""
        if not wait:
            return True
        if await flushed(conn, wait, self.replica_timeout_ms, self._timeout):
            return True
        self._standby_watch.stale(self.replica_timeout_ms)
        return False

    async def _confirm(self, conn: asyncpg.Connection, wait: int, results: list[ClaimResult]) -> list[ClaimResult]:
        """The answers, each grant unknown unless confirmed (a loss or a skip needs no standby)."""
        if not any(r.outcome is Outcome.WON for r in results) or await self._confirmed(conn, wait):
            return results
        return [UNCONFIRMED if r.outcome is Outcome.WON else r for r in results]


#: A grant no standby is known to have: never run (it may vanish in a failover, and the slot be won again).
UNCONFIRMED = ClaimResult(Outcome.UNKNOWN)
