"""Fixtures for the dashboard's tests: real backends holding a known history.

``store`` is parametrised over the memory backend, SQLite (a file in
tmp_path) and Redis (the loopback server, a key prefix of the test's own,
deleted afterwards). ``seeded`` writes one job's history through the backend
API itself (claim, take-over, finish), so the dashboard reads records exactly
as a fleet leaves them. Helpers are fixtures because pytest imports test
modules with ``--import-mode=importlib``.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from anarchon import Backend, Job, MemoryBackend, MemoryStore, RunStatus
from anarchon.backend import Claim, Grant
from anarchon_conformance import free_port, testing

MINUTE = 60_000


class FixedClock:
    """The dashboard's "now", fixed so which slots are missed or pending is known."""

    def __init__(self, now_ms: int) -> None:
        self.now = now_ms

    def now_ms(self) -> int:
        return self.now

    def monotonic(self) -> float:
        return time.monotonic()


class Store:
    """Makes backend objects that act as separate instances of one store."""

    def __init__(self, kind: str, tmp_path: Path) -> None:
        self.kind = kind
        self.memory = MemoryStore()
        self.path = tmp_path / "web.sqlite3"
        self.prefix = f"tweb:{uuid.uuid4().hex[:10]}:"
        self.url = os.environ.get("ANARCHON_REDIS_URL", "redis://127.0.0.1:6379/0")
        self.opened: list[Backend] = []

    def backend(self) -> Backend:
        if self.kind == "memory":
            return MemoryBackend(self.memory)
        if self.kind == "sqlite":
            from anarchon_sqlite import SQLiteBackend

            return SQLiteBackend(str(self.path))
        from anarchon_redis import RedisBackend

        return RedisBackend(url=self.url, prefix=self.prefix)

    async def started(self) -> Backend:
        backend = self.backend()
        await backend.start()
        self.opened.append(backend)
        return backend

    async def cleanup(self) -> None:
        for backend in self.opened:
            await backend.close()
        self.opened.clear()
        if self.kind == "redis":
            from redis.asyncio import Redis

            client = Redis.from_url(self.url)
            try:
                async for key in client.scan_iter(match=f"{self.prefix}*", count=1000):
                    await client.delete(key)
            finally:
                await client.aclose()


def _redis_reachable(url: str) -> str | None:
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.RedisError as exc:
        return f"no Redis at {url} ({exc}); start one or set ANARCHON_REDIS_URL"
    finally:
        client.close()
    return None


@pytest.fixture(params=["memory", "sqlite", pytest.param("redis", marks=pytest.mark.redis)])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    s = Store(request.param, tmp_path)
    if s.kind == "redis" and (reason := _redis_reachable(s.url)):
        if os.environ.get("CI"):
            pytest.fail(f"CI is set, so this must not be skipped: {reason}")
        pytest.skip(f"!!! SKIPPED: {reason}")
    try:
        yield s
    finally:
        await s.cleanup()


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[Store]:
    s = Store("sqlite", tmp_path)
    try:
        yield s
    finally:
        await s.cleanup()


def make_job(backend: Backend, name: str = "ledger", cron: str = "* * * * *", **options: Any) -> Job:
    return testing.make_job(backend, name, cron, **options)


def claim(job: Job, slot_ms: int, instance: str = "i1", **kw: Any) -> Claim:
    return testing.make_claim(job, slot_ms, instance, **kw)


async def finish(backend: Backend, grant: Grant | None, status: RunStatus, error: str | None = None,
                 took_ms: int = 40) -> None:  # fmt: skip
    assert grant is not None
    start = grant.started_at_ms or time.time_ns() // 1_000_000
    run = grant.finished(status, started_ms=start, finished_ms=start + took_ms, error=error)
    assert await backend.finish(grant, run)


@dataclass
class Seeded:
    """One job's history with every outcome, slots a minute apart; ``now_ms`` is the dashboard's now."""

    job: Job
    base_ms: int
    now_ms: int
    manual_ms: int
    #: slot index -> expected outcome on the strip
    expected: dict[int, str]

    def slot(self, i: int) -> int:
        return self.base_ms + i * MINUTE


EXPECTED = {
    0: "succeeded", 1: "failed", 2: "timed-out", 3: "missed", 4: "succeeded", 5: "skipped",
    6: "caught-up", 7: "caught-up", 8: "caught-up", 9: "caught-up", 10: "taken-over", 11: "running", 12: "pending",
}  # fmt: skip

ERROR = "ValueError: <script>alert('x')</script> & boom"


async def seed(store: Store, name: str = "ledger", minutes_ago: int = 60) -> Seeded:
    """Write the history of EXPECTED through two backend instances, as two fleet members would."""
    a, b = await store.started(), await store.started()
    real_now = time.time_ns() // 1_000_000
    base = real_now // MINUTE * MINUTE - minutes_ago * MINUTE
    job = make_job(a, name, lease_ms=60_000)
    short = make_job(a, name, lease_ms=100)
    s = Seeded(job, base, base + 12 * MINUTE + 30_000, base + 5 * MINUTE + 30_000, EXPECTED)

    async def won(c: Claim, on: Backend = a) -> Grant:
        (result,) = await on.claim([c])
        assert result.won and result.grant is not None, result
        return result.grant

    await finish(a, await won(claim(job, s.slot(0))), RunStatus.SUCCEEDED, took_ms=100)
    await finish(a, await won(claim(job, s.slot(1))), RunStatus.FAILED, error=ERROR, took_ms=200)
    await finish(a, await won(claim(job, s.slot(2))), RunStatus.TIMED_OUT, took_ms=300)
    held = await won(claim(job, s.slot(4)))
    (skipped,) = await b.claim([claim(job, s.slot(5), "i2")])
    assert skipped.outcome.value == "skipped", skipped
    await finish(a, held, RunStatus.SUCCEEDED, took_ms=400)
    await finish(b, await won(claim(job, s.manual_ms, "i2", manual=True), b), RunStatus.SUCCEEDED, took_ms=500)
    await finish(a, await won(claim(job, s.slot(9), catch_up=True, missed=4)), RunStatus.SUCCEEDED, took_ms=600)
    await won(claim(short, s.slot(10)))  # i1 "dies": it never renews nor finishes
    deadline = time.monotonic() + 10
    while not (taken := await b.take_over([short], "i2")):
        assert time.monotonic() < deadline, "the 100 ms lease never expired"
        await asyncio.sleep(0.02)
    assert taken[0].grant is not None and taken[0].grant.attempt == 2
    await finish(b, taken[0].grant, RunStatus.SUCCEEDED, took_ms=700)
    await won(claim(job, s.slot(11), "i2"), b)  # still running
    return s


@pytest.fixture(name="seed")
def seed_fixture() -> Callable[..., Any]:
    return seed


@pytest.fixture(name="fixed_clock")
def fixed_clock_fixture() -> type[FixedClock]:
    return FixedClock


@pytest.fixture(params=["sqlite", pytest.param("redis", marks=pytest.mark.redis)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A backend URL for a dashboard served apart from its fleet: a SQLite file, or a Redis prefix of its own."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/web.sqlite3"
        return
    import redis

    base = os.environ.get("ANARCHON_REDIS_URL", "redis://127.0.0.1:6379/0")
    if reason := _redis_reachable(base):
        if os.environ.get("CI"):
            pytest.fail(f"CI is set, so this must not be skipped: {reason}")
        pytest.skip(f"!!! SKIPPED: {reason}")
    prefix = f"tweb-{secrets.token_hex(4)}:"
    client = redis.Redis.from_url(base, socket_connect_timeout=2)
    try:
        yield f"{base}?prefix={prefix}"
    finally:
        for key in client.scan_iter(match=f"{prefix}*"):
            client.delete(key)
        client.close()


# -- the browser tests: Debian's Chromium through Playwright, and anarchon-web in a process of its own -------------

#: Debian's Chromium (``apt-get install chromium``; ``.ci/run`` installs it), never ``playwright install``'s.
CHROMIUM = os.environ.get("ANARCHON_CHROMIUM", "/usr/bin/chromium")  # another Chromium build, if it must
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """Where screenshots go: ``test-artifacts/web/`` at the repository root (``ANARCHON_ARTIFACTS`` moves it)."""
    path = Path(os.environ.get("ANARCHON_ARTIFACTS", ROOT / "test-artifacts")) / "web"
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        reason = f"{CHROMIUM} is missing: apt-get install -y chromium chromium-driver, or set ANARCHON_CHROMIUM"
        if os.environ.get("CI"):
            pytest.fail(f"CI is set, so this must not be skipped: {reason}")
        pytest.skip(f"!!! SKIPPED: {reason}")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


Served = tuple["subprocess.Popen[str]", str]


@pytest.fixture
def serve_web() -> Iterator[Callable[..., Served]]:
    """``serve_web(url, *options, env=None)``: ``anarchon-web --backend URL`` on a free port, returned (the
    process and its address) once it answers; stopped after the test."""
    import httpx2 as httpx

    servers: list[subprocess.Popen[str]] = []

    def serve(url: str, *options: str, env: dict[str, str] | None = None) -> Served:
        port = free_port()
        argv = [sys.executable, "-m", "anarchon_web.cli", "--backend", url, "--port", str(port), *options]
        server = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        servers.append(server)
        address = f"http://127.0.0.1:{port}/"
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(address + "static/style.css", timeout=5).raise_for_status()
                return server, address
            except httpx.ConnectError:
                if server.poll() is not None or time.monotonic() > deadline:
                    server.kill()
                    raise AssertionError(f"anarchon-web did not start: {server.communicate()}") from None
                time.sleep(0.05)  # the port opens when it opens: polled, with a deadline

    yield serve
    for server in servers:
        if server.poll() is None:
            server.terminate()
            server.wait(30)
