"""Fixtures: a reachable PostgreSQL, a fresh schema per test, backends on it.

Helpers are handed out as fixtures because pytest imports test modules with
``--import-mode=importlib``, where a test cannot import its conftest.
"""

from __future__ import annotations

import asyncio
import glob
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from anarchon.backend import Claim
from anarchon.job import Job
from anarchon_conformance import eventually, free_port, testing
from anarchon_conformance.testing import FaultProxy
from anarchon_postgres import PostgresBackend

DSN_ENV = "ANARCHON_POSTGRES_DSN"
DEFAULT_DSN = "postgresql://127.0.0.1:5432/postgres"


def postgres_dsn() -> str:
    return os.environ.get(DSN_ENV, DEFAULT_DSN)


async def _reachable(dsn: str) -> str | None:
    try:
        conn = await asyncpg.connect(dsn, timeout=5)
    except (OSError, asyncio.TimeoutError, asyncpg.PostgresError) as exc:
        return f"{type(exc).__name__}: {exc}"
    await conn.close()
    return None


@pytest.fixture(scope="session")
def pg_dsn() -> str:
    dsn = postgres_dsn()
    problem = asyncio.run(_reachable(dsn))
    if problem is not None:
        message = f"PostgreSQL NOT REACHABLE at {dsn} ({problem}); set {DSN_ENV} to run the postgres tests"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return dsn


@pytest.fixture
async def schema(pg_dsn: str) -> AsyncIterator[str]:
    """A schema no other test uses, dropped afterwards."""
    name = f"anarchon_t_{uuid.uuid4().hex[:12]}"
    yield name
    conn = await asyncpg.connect(pg_dsn)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
    finally:
        await conn.close()


BackendFactory = Callable[..., Awaitable[PostgresBackend]]


@pytest.fixture
async def make_backend(pg_dsn: str, schema: str) -> AsyncIterator[BackendFactory]:
    """Started backends on the test's schema (one per instance), closed afterwards."""
    made: list[PostgresBackend] = []

    async def make(**kwargs: Any) -> PostgresBackend:
        kwargs.setdefault("dsn", pg_dsn)
        kwargs.setdefault("schema", schema)
        backend = PostgresBackend(**kwargs)
        made.append(backend)
        await backend.start()
        return backend

    yield make
    await asyncio.gather(*(b.close() for b in made))


@pytest.fixture
async def backend(make_backend: BackendFactory) -> PostgresBackend:
    return await make_backend()


def _make_job(name: str = "job", **options: Any) -> Job:
    return testing.make_job(PostgresBackend(), name, testing.EVERY_SECOND, **options)


def _make_claim(
    job: Job,
    slot_ms: int,
    instance: str = "i1",
    token: str | None = None,
    *,
    manual: bool = False,
    now_ms: int = 1_700_000_000_000,
) -> Claim:
    return testing.make_claim(job, slot_ms, instance, token=token, now_ms=now_ms, manual=manual)


@pytest.fixture
async def tcp_proxy(pg_dsn: str) -> AsyncIterator[Callable[[], Awaitable[tuple[FaultProxy, str]]]]:
    """Start proxies to the test server; each gives back itself and a DSN through it."""
    proxies: list[FaultProxy] = []
    parts = urlsplit(pg_dsn)

    async def make() -> tuple[FaultProxy, str]:
        proxy = FaultProxy(parts.hostname or "127.0.0.1", parts.port or 5432)
        await proxy.start()
        proxies.append(proxy)
        netloc = f"{parts.username + '@' if parts.username else ''}127.0.0.1:{proxy.port}"
        return proxy, urlunsplit(parts._replace(netloc=netloc))

    yield make
    for proxy in proxies:
        await proxy.close()


@pytest.fixture
def make_job() -> Callable[..., Job]:
    return _make_job


@pytest.fixture
def make_claim() -> Callable[..., Claim]:
    return _make_claim


@pytest.fixture
def wait_until() -> Callable[..., Awaitable[None]]:
    return eventually


PG_BIN = sorted(glob.glob("/usr/lib/postgresql/*/bin"))


def _as_postgres(*argv: str) -> None:
    """Run a server tool as the ``postgres`` user when the tests run as root (initdb refuses root)."""
    user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    done = subprocess.run([*user, *argv], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{argv[0]}: {done.stderr[-800:]}"


@pytest.fixture(scope="module")
def private_postgres() -> Iterator[Callable[..., str]]:
    """Start private PostgreSQL servers with settings of the test's own; each call gives a DSN.

    For what the shared server must never be put through (a small
    ``max_connections``, taken whole): ``initdb`` and ``pg_ctl`` on a free port,
    ``fsync=off``, trust on 127.0.0.1 and a socket in the data's temp dir (not
    ``tmp_path``: the ``postgres`` user must enter it), stopped and removed
    after the module. ``start("-c max_connections=12")`` adds server options.
    """
    if not PG_BIN:
        if os.environ.get("CI"):
            pytest.fail("CI is set: /usr/lib/postgresql/*/bin is needed to start a private server")
        pytest.skip("!!! SKIPPED: no /usr/lib/postgresql/*/bin to start a private PostgreSQL")
    pg = PG_BIN[-1]
    started: list[Path] = []

    def start(*options: str) -> str:
        root = Path(tempfile.mkdtemp(prefix="anarchon-pgprivate-"))
        root.chmod(0o755)
        if os.geteuid() == 0:
            shutil.chown(root, "postgres", "postgres")
        started.append(root)
        port = free_port()
        opts = " ".join([f"-p {port} -c listen_addresses=127.0.0.1 -k {root} -c fsync=off", *options])
        _as_postgres(f"{pg}/initdb", "-D", str(root / "data"), "-A", "trust", "-U", "postgres", "--no-sync")
        _as_postgres(f"{pg}/pg_ctl", "-D", str(root / "data"), "-l", str(root / "log"), "-o", opts, "-w", "start")
        return f"postgresql://postgres@127.0.0.1:{port}/postgres"

    try:
        yield start
    finally:
        for root in started:
            if (root / "data" / "postmaster.pid").exists():
                user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
                subprocess.run(
                    [*user, f"{pg}/pg_ctl", "-D", str(root / "data"), "-m", "immediate", "-w", "stop"],
                    capture_output=True,
                    timeout=60,
                )
            shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def schema_at(pg_dsn: str) -> Callable[[str, int], Awaitable[None]]:
    """Make a schema as a release of ``version`` left it (for the tests of a later migration)."""
    from anarchon_postgres._schema import _MIGRATIONS, quote_schema

    async def make(schema: str, version: int) -> None:
        quoted = quote_schema(schema)
        conn = await asyncpg.connect(pg_dsn)
        try:
            async with conn.transaction():
                await conn.execute(f"CREATE SCHEMA {quoted}")
                await conn.execute(
                    f"CREATE TABLE {quoted}.schema_version (version integer PRIMARY KEY, applied_at "
                    "timestamptz NOT NULL DEFAULT now())"
                )
                for n, migration in enumerate(_MIGRATIONS[:version], 1):
                    await conn.execute(migration(quoted))
                    await conn.execute(f"INSERT INTO {quoted}.schema_version (version) VALUES ({n})")
        finally:
            await conn.close()

    return make
