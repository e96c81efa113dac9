"""Fixtures for the NATS backend tests: the shared server, private servers, names.

Every test gets its own stream name and prefix and deletes the stream
afterwards. Tests that stop servers start their own ``nats-server`` processes
on free ports (never the shared one) and kill them even when the test fails.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client

from anarchon_nats import NatsBackend

sys.path.insert(0, str(Path(__file__).parent))

from nats_helpers import NATS_SERVER, Cluster, Servers, free_port, wait_jetstream

DEFAULT_URL = "nats://127.0.0.1:4222"


def server_url() -> str:
    """The server the tests use, read when asked: a plugin (make test-docker) may set it after import."""
    return os.environ.get("ANARCHON_NATS_URL", DEFAULT_URL)


def _unavailable(reason: str) -> None:
    message = (
        f"NATS with JetStream is not reachable at {server_url()}: {reason}. "
        "Set ANARCHON_NATS_URL or run nats-server -js"
    )
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(f"!!! {message} !!!")


@pytest.fixture(scope="session")
def nats_url() -> str:
    url = server_url()

    async def probe() -> None:
        nc = await nats.connect(url, connect_timeout=2, max_reconnect_attempts=0, allow_reconnect=False)
        try:
            await nc.jetstream().account_info()
        finally:
            await nc.close()

    try:
        asyncio.run(probe())
    except Exception as exc:
        _unavailable(f"{type(exc).__name__}: {exc}")
    return url


@dataclass
class Names:
    stream: str
    prefix: str


@pytest.fixture
async def names(nats_url: str) -> AsyncIterator[Names]:
    """A stream and prefix no other test uses; the stream and its fleet registry's bucket are deleted afterwards."""
    tag = uuid.uuid4().hex[:10]
    n = Names(stream=f"T_{tag}", prefix=f"t{tag}.cron.")
    yield n
    nc = await nats.connect(nats_url)
    try:
        for name in (n.stream, f"KV_{n.stream}_registry"):
            with contextlib.suppress(nats.js.errors.NotFoundError):
                await nc.jetstream().delete_stream(name)
    finally:
        await nc.close()


@pytest.fixture
async def client(nats_url: str) -> AsyncIterator[Client]:
    """A plain nats-py client of the test's own, for looking at the stream."""
    nc = await nats.connect(nats_url)
    yield nc
    await nc.close()


@pytest.fixture
async def backends(nats_url: str, names: Names) -> AsyncIterator[Callable[..., Any]]:
    """``await backends(n, **kw)``: n started backends (n instances) on the test's stream."""
    made: list[NatsBackend] = []

    async def make(count: int = 1, **kw: Any) -> list[NatsBackend]:
        kw.setdefault("servers", nats_url)
        kw.setdefault("stream", names.stream)
        kw.setdefault("prefix", names.prefix)
        new = [NatsBackend(**kw) for _ in range(count)]
        made.extend(new)
        await asyncio.gather(*(b.start() for b in new))
        return new

    yield make
    await asyncio.gather(*(b.close() for b in made))


@pytest.fixture(scope="session")
def servers(request: pytest.FixtureRequest) -> Servers:
    if not Path(NATS_SERVER).exists():
        pytest.skip(f"!!! nats-server not found at {NATS_SERVER}: private-server tests cannot run !!!")
    root = Path(tempfile.mkdtemp(prefix="anarchon-nats-"))
    pool = Servers(root)
    # Finalizers, registered before any server starts, run even when setup or a test fails.
    request.addfinalizer(lambda: shutil.rmtree(root, ignore_errors=True))
    request.addfinalizer(pool.kill_all)  # noqa: PT021
    atexit.register(pool.kill_all)
    return pool


@pytest.fixture(scope="session")
def cluster(servers: Servers) -> Cluster:
    """Three nats-server nodes with JetStream, routed into one cluster, on free ports."""
    cports = [free_port() for _ in range(3)]
    nodes = []
    for i in range(3):
        routes = ", ".join(f"nats-route://127.0.0.1:{p}" for j, p in enumerate(cports) if j != i)
        body = (
            'jetstream { store_dir: "@STORE@", max_memory_store: 64MB, max_file_store: 256MB }\n'
            f'cluster {{ name: anarchon-test, listen: "127.0.0.1:{cports[i]}", routes: [{routes}] }}'
        )
        nodes.append(servers.new(f"n{i + 1}", body))
    for n in nodes:
        n.start()
    asyncio.run(wait_jetstream([n.url for n in nodes]))
    return Cluster(nodes)
