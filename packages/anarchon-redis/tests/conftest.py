"""Fixtures for the Redis backend tests: the shared server, private servers, a cluster.

``store`` is parametrised over a single server (ANARCHON_REDIS_URL, default
the loopback server) and a three-node Redis Cluster this session starts on
free ports; each test gets its own key prefix, and its keys are deleted
afterwards. Private servers (restart tests, the cluster) are killed by
finalizers even when a test fails.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from anarchon.backend import Claim
from anarchon.job import Job
from anarchon_conformance import eventually, free_port, testing
from anarchon_redis import RedisBackend

DEFAULT_URL = "redis://127.0.0.1:6379/0"


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"CI is set, so this must not be skipped: {reason}")
    pytest.skip(f"!!! SKIPPED: {reason}")


def free_cluster_port() -> int:
    """A free port whose cluster bus port (port + 10000) is free and valid too."""
    while True:
        port = random.randint(20_000, 40_000)
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port + 10_000))
        except OSError:
            continue
        return port


def wait_ping(port: int, deadline_s: float = 10.0, **kwargs: Any) -> None:
    client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1, **kwargs)
    end = time.monotonic() + deadline_s
    try:
        while True:
            try:
                client.ping()
                return
            except redis.RedisError:
                if time.monotonic() > end:
                    raise
                time.sleep(0.05)
    finally:
        client.close()


class RedisServer:
    """A redis-server process of the test's own, on a free loopback port."""

    def __init__(self, directory: Path, *args: str, port: int | None = None) -> None:
        self.directory = directory
        self.port = port or free_port()
        self.args = args
        self.proc: subprocess.Popen[bytes] | None = None
        directory.mkdir(parents=True, exist_ok=True)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, ping: bool = True) -> None:
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.directory),
             "--save", "", "--logfile", "redis.log", *self.args],
            cwd=self.directory,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        if ping:
            wait_ping(self.port)

    def stop(self, kill: bool = False) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.kill() if kill else self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None


@pytest.fixture(scope="session")
def redis_binaries() -> None:
    if not shutil.which("redis-server") or not shutil.which("redis-cli"):
        _unavailable("redis-server and redis-cli are not on PATH; install Redis >= 6.2 to run these tests")


@pytest.fixture(scope="session")
def redis_url() -> str:
    url = os.environ.get("ANARCHON_REDIS_URL", DEFAULT_URL)
    client = redis.Redis.from_url(url, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.RedisError as exc:
        _unavailable(f"no Redis at {url} ({exc}); start one or set ANARCHON_REDIS_URL")
    finally:
        client.close()
    return url


@pytest.fixture
def private_server(tmp_path: Path, redis_binaries: None, request: pytest.FixtureRequest) -> RedisServer:
    """A persistent (AOF, fsync always) server of this test's own, killed afterwards."""
    server = RedisServer(tmp_path / "redis", "--appendonly", "yes", "--appendfsync", "always")
    request.addfinalizer(lambda: server.stop(kill=True))  # noqa: PT021 - registered before start, so a half-started server is killed too
    server.start()
    return server


@pytest.fixture
def unstarted_server(tmp_path: Path, redis_binaries: None, request: pytest.FixtureRequest) -> RedisServer:
    """A server of this test's own on a free port, not started yet (the test starts it); killed afterwards."""
    server = RedisServer(tmp_path / "redis")
    request.addfinalizer(lambda: server.stop(kill=True))  # noqa: PT021 - before start, like private_server
    return server


@pytest.fixture
def replicated(tmp_path: Path, redis_binaries: None) -> Iterator[tuple[RedisServer, RedisServer]]:
    """A private primary and its replica (no persistence), replication caught up; both killed afterwards.

    A test may pause the replica with ``SIGSTOP``: it is sent ``SIGCONT`` before the kill.
    """
    primary = RedisServer(tmp_path / "primary", "--appendonly", "no")
    replica = RedisServer(tmp_path / "replica", "--appendonly", "no")
    try:
        primary.start()
        replica.args = ("--appendonly", "no", "--replicaof", "127.0.0.1", str(primary.port))
        replica.start()
        client = redis.Redis(host="127.0.0.1", port=primary.port)
        try:
            assert client.wait(1, 10_000) == 1, "the replica never caught up"
        finally:
            client.close()
        yield primary, replica
    finally:
        for server in (replica, primary):
            if server.proc is not None and server.proc.poll() is None:
                server.proc.send_signal(signal.SIGCONT)
            server.stop(kill=True)


def start_cluster(root: Path, primaries: int, replicas: int, request: pytest.FixtureRequest) -> list[RedisServer]:
    """``primaries`` primaries with ``replicas`` replicas each, on free ports, every link up; killed at teardown."""
    ports: list[int] = []
    while len(ports) < primaries * (1 + replicas):
        port = free_cluster_port()
        if all(abs(port - p) > 1 for p in ports):
            ports.append(port)
    nodes = [
        RedisServer(root / f"node{i}", "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                    "--cluster-node-timeout", "5000", "--appendonly", "no", port=port)
        for i, port in enumerate(ports)
    ]  # fmt: skip

    def stop_all() -> None:
        for node in nodes:
            node.stop(kill=True)

    request.addfinalizer(stop_all)
    for node in nodes:
        node.start()
    created = subprocess.run(
        ["redis-cli", "--cluster", "create", *(f"127.0.0.1:{n.port}" for n in nodes),
         "--cluster-replicas", str(replicas), "--cluster-yes"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert created.returncode == 0, created.stdout + created.stderr
    deadline = time.monotonic() + 30
    for node in nodes:
        client = redis.Redis(host="127.0.0.1", port=node.port)
        try:
            while not _joined(client, replicas):
                assert time.monotonic() < deadline, f"cluster node on port {node.port} never joined"
                time.sleep(0.1)
        finally:
            client.close()
    return nodes


def _joined(client: redis.Redis, replicas: int) -> bool:
    """The cluster is ok from this node, and its replication link (replica) or its replicas (primary) are up."""
    if client.cluster("INFO").get("cluster_state") != "ok":
        return False
    info = client.info("replication")
    if info["role"] == "slave":
        return info.get("master_link_status") == "up"
    return int(info.get("connected_slaves", 0)) >= replicas


@pytest.fixture(scope="session")
def cluster_url(tmp_path_factory: pytest.TempPathFactory, redis_binaries: None, request: pytest.FixtureRequest) -> str:
    """Three masters, no replicas, on free ports; every server is killed at session end."""
    nodes = start_cluster(tmp_path_factory.mktemp("cluster"), 3, 0, request)
    return f"redis://127.0.0.1:{nodes[0].port}/0?cluster=true"


@pytest.fixture
def replicated_cluster(
    tmp_path: Path, redis_binaries: None, request: pytest.FixtureRequest
) -> tuple[str, dict[int, RedisServer]]:
    """Three primaries with a replica each; the URL, and each replica by its primary's port."""
    nodes = start_cluster(tmp_path, 3, 1, request)
    replicas: dict[int, RedisServer] = {}
    for node in nodes:
        client = redis.Redis(host="127.0.0.1", port=node.port)
        try:
            info = client.info("replication")
        finally:
            client.close()
        if info["role"] == "slave":
            replicas[int(info["master_port"])] = node
    return f"redis://127.0.0.1:{nodes[0].port}/0?cluster=true", replicas


def make_job(name: str = "sync", cron: str = "* * * * * *", **options: Any) -> Job:
    return testing.make_job(RedisBackend(), name, cron, **options)


def claim(
    job: Job, slot_ms: int, instance: str = "a", token: str | None = None, *, now_ms: int | None = None, **kw: Any
) -> Claim:
    return testing.make_claim(job, slot_ms, instance, token=token, now_ms=now_ms, **kw)


class Store:
    """Makes backends that act as separate instances of one namespace (one prefix)."""

    def __init__(self, url: str, kind: str) -> None:
        self.url = url
        self.kind = kind
        self.prefix = f"t:{uuid.uuid4().hex[:10]}:"
        self.backends: list[RedisBackend] = []

    async def backend(self, **kwargs: Any) -> RedisBackend:
        backend = RedisBackend(url=self.url, prefix=self.prefix, **kwargs)
        await backend.start()
        self.backends.append(backend)
        return backend

    def raw(self) -> Redis | RedisCluster:
        if self.kind == "cluster":
            return RedisCluster.from_url(self.url.replace("?cluster=true", ""), decode_responses=True)
        return Redis.from_url(self.url, decode_responses=True)

    async def cleanup(self) -> None:
        for backend in self.backends:
            await backend.close()
        client = self.raw()
        try:
            keys = [k async for k in client.scan_iter(match=f"{self.prefix}*", count=1000)]
            for key in keys:
                await client.delete(key)
        finally:
            await client.aclose()


@pytest.fixture(params=["single", "cluster"])
async def store(request: pytest.FixtureRequest, redis_url: str) -> AsyncIterator[Store]:
    """The single server or a private cluster; ``redis_url`` is named so that ``make test-docker`` keeps these tests."""
    url = redis_url if request.param == "single" else request.getfixturevalue("cluster_url")
    s = Store(url, request.param)
    try:
        yield s
    finally:
        await s.cleanup()


@pytest.fixture
async def single(redis_url: str) -> AsyncIterator[Store]:
    s = Store(redis_url, "single")
    try:
        yield s
    finally:
        await s.cleanup()


@pytest.fixture(name="make_job")
def make_job_fixture() -> Callable[..., Job]:
    return make_job


@pytest.fixture(name="claim")
def claim_fixture() -> Callable[..., Claim]:
    return claim


@pytest.fixture(name="wait_until")
def wait_until_fixture() -> Callable[..., Any]:
    return eventually
