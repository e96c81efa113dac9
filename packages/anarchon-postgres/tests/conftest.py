"""Fixtures: a reachable PostgreSQL, a fresh schema per test, backends on it.

Helpers are handed out as fixtures because pytest imports test modules with
``--import-mode=importlib``, where a test cannot import its conftest.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from anarchon.backend import Claim
from anarchon.job import Job
from anarchon_conformance import eventually, testing
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
