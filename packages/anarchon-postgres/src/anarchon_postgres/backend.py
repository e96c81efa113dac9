"""PostgresBackend: the lease tier on a PostgreSQL server teams already run."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import asyncpg  # type: ignore[import-untyped]

from anarchon.backend import Capabilities, Claim, ClaimResult, Grant, LeaseBackend, Outcome
from anarchon.batching import Batcher
from anarchon.errors import BackendUnavailableError
from anarchon.liveness import Heart
from anarchon.options import check_history_limit
from anarchon.records import read_runs
from anarchon.replication import check_min_replicas, check_replica_timeout
from anarchon.run import Run, datetime_to_ms

from ._audit import AuditMixin
from ._backfill import BackfillMixin, BackfillStatements
from ._calls import UNREACHABLE, CallsMixin
from ._control import ControlMixin
from ._groups import GroupsMixin
from ._guarantees import GuaranteesMixin
from ._heart import PostgresHeart
from ._records import batch_args, claim_args, claim_result, finish_args, history_run
from ._registry import RegistryMixin
from ._revive import ReviveMixin
from ._schedules import SchedulesMixin
from ._schema import (
    SCHEMA_VERSION,
    _resource,
    check_schema_name,
    ensure_schema,
    installed_version,
    migration_script,
    quote_schema,
)
from ._standbys import StandbysMixin, StandbyWatch
from ._statements import Statements
from ._url import read_postgres_url, redact_dsn

if TYPE_CHECKING:
    from anarchon.job import Job

__all__ = ["PostgresBackend"]

log = logging.getLogger("anarchon.postgres")

T = TypeVar("T")

#: A batch longer than this is claimed in parts of this size, ``_CLAIMS_AT_ONCE``
#: at a time: 10,000 slots due in one second then keep both cores of a small
#: server busy (one statement runs on one), and leave the pool connections for
#: finishes and renewals.
_CHUNK = 1000
_CLAIMS_AT_ONCE = 2


class PostgresBackend(
    GuaranteesMixin, CallsMixin, ControlMixin, RegistryMixin, SchedulesMixin, AuditMixin, BackfillMixin, ReviveMixin,
    StandbysMixin, GroupsMixin, LeaseBackend,
):  # fmt: skip
    """A lease backend on PostgreSQL ≥ 13 (``postgresql://`` or ``postgres://``).

    Each claim, take-over, renewal and finish is one statement calling a
    PL/pgSQL function (or one ``UPDATE``), so one short transaction and one
    round trip; lease expiry is judged on the server's clock. ``pool`` is the
    caller's and is never closed; without it the backend opens its own small
    pool from ``dsn``. Tables live in ``schema`` and are created by
    :meth:`start` when missing; :meth:`start_read_only` connects without
    creating anything, and :meth:`migration_sql` prints what :meth:`start`
    would apply, for a DBA.

    ``min_replicas`` (``"auto"``: one standby while one streams from the
    server) is how many standbys must have flushed a grant before it runs,
    waiting up to ``replica_timeout_ms`` (see :mod:`._standbys`).

    The URL's query may set ``schema``, ``timeout_ms``, ``min_replicas`` and
    ``replica_timeout_ms`` (``postgresql://db/app?schema=billing``); an
    argument left at its default gives way to the URL, one that contradicts it
    is refused.
    """

    name: ClassVar[str] = "postgres"
    url_schemes: ClassVar[tuple[str, ...]] = ("postgresql", "postgres")
    capabilities: ClassVar[Capabilities] = Capabilities(
        lease=True,
        history_ttl=True,
        server_clock=True,
        multi_process=True,
        liveness=True,
        backfill=True,
        revive=True,
        pause=True,
        trigger=True,
        registry=True,
        schedules=True,
        schedule_notify=True,
        guarantees=True,
        audit=True,
        attempts=True,
        decided_notify=True,
        control_notify=True,
        groups=True,
        group_notify=True,
    )

    def __init__(
        self,
        dsn: str = "postgresql://localhost/postgres",
        pool: asyncpg.Pool | None = None,
        schema: str = "anarchon",
        *,
        timeout_ms: int = 5_000,
        min_replicas: int | str = "auto",
        replica_timeout_ms: int = 100,
    ) -> None:
        found = read_postgres_url(dsn)
        schema = found.pick("schema", schema, "anarchon")
        timeout_ms = found.pick("timeout_ms", timeout_ms, 5_000)
        min_replicas = found.pick("min_replicas", min_replicas, "auto")
        replica_timeout_ms = found.pick("replica_timeout_ms", replica_timeout_ms, 100)
        #: None: "auto" (see ._standbys).
        self.min_replicas = check_min_replicas(min_replicas, "standbys")
        self.replica_timeout_ms = check_replica_timeout(replica_timeout_ms, "standbys")
        self.schema = check_schema_name(schema)
        if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int) or timeout_ms <= 0:
            raise ValueError(f"timeout_ms={timeout_ms!r} must be a positive integer (milliseconds), e.g. 5000")
        dsn = found.url
        self._dsn = dsn
        self._timeout = timeout_ms / 1000
        #: The job list a take-over poll last got, and its longest lease (see ``_longest_lease_ms``).
        self._longest_lease: tuple[Sequence[Job], int] | None = None
        self._own_pool = pool is None
        self._pool: asyncpg.Pool | None = pool
        self._sql = Statements.for_schema(quote_schema(schema))
        self._backfill_sql = BackfillStatements.for_schema(quote_schema(schema))
        self._read_only = False
        #: The schema's version as start() or start_read_only() found it (None before either).
        self.schema_version: int | None = None
        self._finishes: Batcher[tuple[Any, ...]] | None = None
        self._chunk = _CHUNK
        self._claiming: asyncio.Semaphore | None = None
        self._standby_watch = StandbyWatch(repr(self))

    @classmethod
    def from_url(cls, url: str) -> PostgresBackend:
        """``postgresql://user@host/db?schema=billing&timeout_ms=5000``; asyncpg's connection keys
        (``sslmode``, ``application_name``…) stay in the DSN, any other key is refused (see :mod:`._url`)."""
        return cls(dsn=url)

    @property
    def dsn(self) -> str:
        """The DSN with its password masked; the real one is never shown."""
        return redact_dsn(self._dsn)

    def __repr__(self) -> str:
        if self._own_pool:
            return f"PostgresBackend(dsn={self.dsn!r}, schema={self.schema!r})"
        return f"PostgresBackend(pool=<caller's pool at {id(self._pool):#x}>, schema={self.schema!r})"

    # -- lifecycle -------------------------------------------------------

    async def start(self) -> None:
        if self._pool is None:
            self._pool = await self._open_pool()
        try:
            async with self._pool.acquire(timeout=self._timeout) as conn:
                await ensure_schema(conn, self.schema)
                self._max_connections = await conn.fetchval(_resource("max_connections.sql"), timeout=self._timeout)
            self._read_only, self.schema_version = False, SCHEMA_VERSION
            if self.min_replicas is None:
                await self._standby_watch.refresh(self._read_standbys)  # the first claims already wait if they must
        except asyncpg.TooManyConnectionsError as exc:  # a caller's pool, opening its first connection
            await self._drop_own_pool()
            raise self._no_free_connection().error(exc, starting=True) from exc
        except asyncpg.InsufficientPrivilegeError as exc:
            await self._drop_own_pool()
            raise PermissionError(
                f"anarchon-postgres cannot create schema {self.schema!r} at {self._where()}: {exc}; "
                "grant CREATE on the database to this user, or start it once as a user who may"
            ) from exc
        except UNREACHABLE as exc:
            await self._drop_own_pool()
            raise BackendUnavailableError(
                f"PostgreSQL at {self._where()} failed while preparing schema {self.schema!r}: "
                f"{type(exc).__name__}: {exc}; check that the server is up and try again"
            ) from exc

    async def start_read_only(self) -> None:
        """Connect without creating or migrating anything: for ``anarchon history``, ``jobs``, ``check``.

        Read-only commands use this in place of :meth:`start`, so looking at a
        fleet never writes to the database (a DBA may own the schema: see
        :meth:`migration_sql`). The schema's version is read into
        :attr:`schema_version`; :meth:`history` of a schema that does not
        exist raises ``LookupError`` naming it, rather than answering "no
        runs" for a namespace nobody uses.
        """
        if self._pool is None:
            self._pool = await self._open_pool()
        self._read_only = True
        try:
            async with self._pool.acquire(timeout=self._timeout) as conn:
                self.schema_version = await installed_version(conn, self.schema)
        except asyncpg.TooManyConnectionsError as exc:
            await self._drop_own_pool()
            raise self._no_free_connection().error(exc, starting=True) from exc
        except UNREACHABLE as exc:
            await self._drop_own_pool()
            raise BackendUnavailableError(
                f"PostgreSQL at {self._where()} failed while reading schema {self.schema!r}: "
                f"{type(exc).__name__}: {exc}; check that the server is up and try again"
            ) from exc

    def migration_sql(self) -> str:
        """The SQL :meth:`start` would run on this schema, as one psql script (``anarchon migrate --sql``).

        From the version :meth:`start_read_only` found (from nothing before it).
        """
        return migration_script(self.schema, self.schema_version or 0)

    @property
    def needs_migration(self) -> bool:
        """Whether :meth:`start` would still create or migrate the schema (known once connected)."""
        return self.schema_version is not None and self.schema_version < SCHEMA_VERSION

    async def close(self) -> None:
        if self._finishes is not None:
            await self._finishes.drain()
        await self._close_listener()
        await self._drop_own_pool()

    # -- claiming -----------------------------------------------------------

    async def claim(self, claims: Sequence[Claim]) -> list[ClaimResult]:
        """Decide the claims; a batch of scheduled slots of distinct jobs goes through claim_batch.

        claim_batch answers the slots it can tell are decided without a
        lock, takes the job rows no other instance holds (``SKIP LOCKED``)
        and decides those together. It hands back the slots whose row was
        held (``pending``: asked again, waiting this time, when the other
        instance has usually decided them) and the rare ones only the general
        claim function decides (new jobs, a late slot that may be recorded
        skipped), which go there.
        """
        if not claims:
            return []
        names = {c.job for c in claims}
        if len(claims) == 1 or len(names) < len(claims) or any(c.manual for c in claims):
            return await self._claim_general(claims)
        if len(claims) <= self._chunk:
            return await self._claim_scheduled(claims)
        if self._claiming is None:
            self._claiming = asyncio.Semaphore(_CLAIMS_AT_ONCE)
        parts = [claims[i : i + self._chunk] for i in range(0, len(claims), self._chunk)]
        answers = await asyncio.gather(*(self._claim_part(p) for p in parts), return_exceptions=True)
        for answer in answers:
            if isinstance(answer, BaseException):
                raise answer  # the parts that were answered are as good as lost: their leases expire
        return [r for answer in answers if not isinstance(answer, BaseException) for r in answer]

    async def _claim_part(self, claims: Sequence[Claim]) -> list[ClaimResult]:
        assert self._claiming is not None
        async with self._claiming:
            return await self._claim_scheduled(claims)

    async def _claim_scheduled(self, claims: Sequence[Claim]) -> list[ClaimResult]:
        """Scheduled slots of distinct jobs: claim_batch, then once more waiting, then the general path."""
        results: list[ClaimResult | None] = [None] * len(claims)
        rest = list(range(len(claims)))
        for wait in (False, True):
            rows = await self._claim_batch([claims[i] for i in rest], wait=wait)
            pending: list[int] = []
            for i, (row, answer) in zip(rest, rows, strict=True):
                if row["o_outcome"] == "pending":
                    pending.append(i)
                elif row["o_outcome"] != "general":
                    results[i] = answer
            held = set(pending)
            general = [i for i in rest if results[i] is None and i not in held]
            if general:
                for i, result in zip(general, await self._claim_general([claims[i] for i in general]), strict=True):
                    results[i] = result
            rest = pending
            if not rest:
                break
        return [r if r is not None else ClaimResult(Outcome.UNKNOWN) for r in results]

    async def _claim_batch(
        self, claims: Sequence[Claim], *, wait: bool
    ) -> list[tuple[asyncpg.Record, ClaimResult | None]]:
        """Each claim's row, and its answer where the row decides it (a grant unknown unless a standby has it)."""
        args = (wait, *zip(*map(batch_args, claims), strict=True))
        standbys = self._standbys_to_wait()

        async def op(conn: asyncpg.Connection, retry: bool) -> list[tuple[asyncpg.Record, ClaimResult | None]]:
            rows: list[asyncpg.Record] = await conn.fetch(self._sql.claim_batch, *args, timeout=self._timeout)
            by_n = {row["o_n"]: row for row in rows}
            ordered = [by_n[n] for n in range(1, len(claims) + 1)]
            decided = [i for i, row in enumerate(ordered) if row["o_outcome"] not in ("pending", "general")]
            answers = await self._confirm(conn, standbys, [claim_result(claims[i], ordered[i]) for i in decided])
            out: list[tuple[asyncpg.Record, ClaimResult | None]] = [(row, None) for row in ordered]
            for i, answer in zip(decided, answers, strict=True):
                out[i] = (ordered[i], answer)
            return out

        return await self._call("claim", op)

    async def _claim_general(self, claims: Sequence[Claim]) -> list[ClaimResult]:
        if len(claims) == 1:
            sql, args = self._sql.claim_one, claim_args(claims[0])
        else:
            sql, args = self._sql.claim, tuple(zip(*map(claim_args, claims), strict=True))

        standbys = self._standbys_to_wait()

        async def op(conn: asyncpg.Connection, retry: bool) -> list[ClaimResult]:
            rows = {row["o_n"]: row for row in await conn.fetch(sql, *args, timeout=self._timeout)}
            return await self._confirm(conn, standbys, [claim_result(c, rows[n]) for n, c in enumerate(claims, 1)])

        return await self._call("claim", op)

    async def finish(self, grant: Grant, run: Run) -> bool:
        """Record the run; finishes made together share one statement and one commit (see ``_batch``)."""
        if self._finishes is None:
            # Two statements out at most, so a claim always finds one of the pool's connections.
            self._finishes = Batcher(self._finish_many, in_flight=2)
        return bool(await self._finishes.call(finish_args(grant, run)))

    async def _finish_many(self, items: Sequence[tuple[Any, ...]]) -> list[bool]:
        if len(items) == 1:

            async def one(conn: asyncpg.Connection, retry: bool) -> list[bool]:
                sql = self._sql.finish_retry if retry else self._sql.finish
                return [bool(await conn.fetchval(sql, *items[0], timeout=self._timeout))]

            return await self._call("finish", one)
        args = tuple(zip(*items, strict=True))

        async def many(conn: asyncpg.Connection, retry: bool) -> set[tuple[str, int, bool, str]]:
            sql = self._sql.finish_many_retry if retry else self._sql.finish_many
            return {tuple(row) for row in await conn.fetch(sql, *args, timeout=self._timeout)}

        done = await self._call("finish", many)
        return [item[:4] in done for item in items]

    async def history(self, job: str, limit: int = 100) -> list[Run]:
        check_history_limit(limit)
        self._missing_schema()
        sql = self._sql.history_for(self._read_only, self.schema_version)

        async def fetch(n: int) -> list[asyncpg.Record]:
            async def op(conn: asyncpg.Connection, retry: bool) -> list[asyncpg.Record]:
                rows: list[asyncpg.Record] = await conn.fetch(sql, job, n, timeout=self._timeout)
                return rows

            return await self._call("history", op)

        return await read_runs(fetch, lambda r: history_run(r, job), limit)

    async def now_ms(self) -> int:
        async def op(conn: asyncpg.Connection, retry: bool) -> int:
            return int(await conn.fetchval(self._sql.now_ms, timeout=self._timeout))

        return await self._call("now_ms", op)

    # -- lease tier ---------------------------------------------------------

    async def renew(self, grants: Sequence[Grant]) -> list[bool]:
        if not grants:
            return []
        args = (
            [g.job for g in grants],
            [g.slot_ms for g in grants],
            [g.manual for g in grants],
            [g.token for g in grants],
        )

        standbys = self._standbys_to_wait()

        async def op(conn: asyncpg.Connection, retry: bool) -> set[tuple[str, int, bool, str]]:
            rows = await conn.fetch(self._sql.renew, *args, timeout=self._timeout)
            # A renewal no standby has may vanish in a failover, and the run be taken over there meanwhile.
            return {tuple(row) for row in rows} if rows and await self._confirmed(conn, standbys) else set()

        renewed = await self._call("renew", op)
        return [(g.job, g.slot_ms, g.manual, g.token) in renewed for g in grants]

    def _longest_lease_ms(self, jobs: Sequence[Job]) -> int:
        """The longest ``lease_ms`` of ``jobs``, kept while the poll passes the same job list again.

        The scheduler passes one tuple until a job is added or removed; reading
        every job's lease each second was 1.0 of the 1.3 s of CPU an idle
        scheduler of 100,000 jobs spent in 30 s (cProfile), 3 % of a core.
        """
        cached = self._longest_lease
        if cached is None or cached[0] is not jobs:
            cached = self._longest_lease = (jobs, max(j.options.lease_ms for j in jobs))
        return cached[1]

    async def take_over(self, jobs: Sequence[Job], instance: str) -> list[ClaimResult]:
        """Grant again, or abandon, the expired runs of these jobs (lease expired, or the owner's heartbeat).

        A poll first reads which jobs have an expired run at all, so the
        usual answer (none) costs one small query, not three arrays as long
        as the job list (10,000 jobs: about 45 ms of client CPU a second).
        """
        if not jobs:
            return []
        # Owners dead for longer than this have stopped renewing for longer, so their runs' leases expired too.
        dead_within = self._longest_lease_ms(jobs) + 2 * round(self._timeout * 1000)
        standbys = self._standbys_to_wait()

        async def op(conn: asyncpg.Connection, retry: bool) -> list[asyncpg.Record]:
            polled = await conn.fetch(self._sql.expired_jobs, dead_within, timeout=self._timeout)
            expired = {row[0] for row in polled}
            mine = [j for j in jobs if j.name in expired] if expired else []
            if not mine:
                return []
            args = (
                [j.name for j in mine],
                [j.options.max_attempts for j in mine],
                [j.options.lease_ms for j in mine],
                instance,
            )
            rows: list[asyncpg.Record] = await conn.fetch(self._sql.take_over, *args, timeout=self._timeout)
            # Every row is a grant. Runs taken over but on no standby are not run: their leases expire, and
            # they are taken over again.
            return rows if not rows or await self._confirmed(conn, standbys) else []

        return [
            ClaimResult(
                Outcome.WON,
                Grant(
                    job=r["o_job"],
                    slot_ms=r["o_slot_ms"],
                    instance=instance,
                    token=r["o_token"],
                    attempt=r["o_attempt"],
                    fencing=r["o_fencing"],
                    manual=r["o_manual"],
                    catch_up=r["o_catch_up"],
                    missed=r["o_missed"],
                    started_at_ms=datetime_to_ms(r["o_started_at"]),
                    lease_ms=r["o_lease_ms"],
                ),
            )
            for r in await self._call("take_over", op)
        ]

    def heart(self) -> Heart | None:
        """This instance's heartbeat, on a connection of its own to the same DSN (see :mod:`._heart`).

        ``None`` on a caller's ``pool``: the heartbeat thread cannot use a pool
        of another event loop, and the backend does not know how that pool
        connects. That instance's runs then wait for their lease when it dies,
        as before liveness; pass ``dsn`` instead of ``pool`` to have both.

        The heart's session commits with ``synchronous_commit = off``: a beat
        needs no WAL flush (nor a synchronous standby's answer), since a beat
        lost in a server crash only makes its instance look dead as early as
        the crash does anyway (README, "When an instance dies").
        """
        if not self._own_pool:
            return None
        return PostgresHeart(
            self._dsn,
            self._sql.beat,
            self._sql.leave,
            timeout_s=self._timeout,
            settings={**self._settings(), "synchronous_commit": "off"},
            no_free=self._no_free_connection(),
        )

    async def hand_over(self, grant: Grant) -> bool:
        async def op(conn: asyncpg.Connection, retry: bool) -> bool:
            row = await conn.fetchval(
                self._sql.hand_over, grant.job, grant.slot_ms, grant.manual, grant.token, timeout=self._timeout
            )
            return bool(row)

        return await self._call("hand_over", op)

    async def marks(self, jobs: Sequence[Job]) -> dict[str, int | None]:
        names = [j.name for j in jobs]

        async def op(conn: asyncpg.Connection, retry: bool) -> dict[str, int | None]:
            rows = await conn.fetch(self._sql.marks, names, timeout=self._timeout)
            return {r["name"]: r["mark"] for r in rows}

        found = await self._call("marks", op) if names else {}
        return {name: found.get(name) for name in names}
