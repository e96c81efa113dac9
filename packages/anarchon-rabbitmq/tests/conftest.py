"""Fixtures for the RabbitMQ backend tests: a real broker, one prefix per test.

Every test gets its own queue prefix, and its queues are found afterwards
through the broker's own view (``rabbitmqctl list_queues``) and deleted.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

import aio_pika
import pytest
from aiormq.exceptions import ChannelNotFoundEntity
from pamqp import commands as spec
from pamqp import frame as amqp_frame

from anarchon.backend import Claim
from anarchon.job import Job
from anarchon_conformance import testing
from anarchon_conformance.testing import FaultProxy, Link
from anarchon_rabbitmq import RabbitMQBackend

DEFAULT_URL = "amqp://guest:guest@127.0.0.1:5672/"


def broker_url() -> str:
    """The broker the tests use, read when asked: a plugin (make test-docker) may set it after import."""
    return os.environ.get("ANARCHON_RABBITMQ_URL", DEFAULT_URL)


def _reachable(url: str) -> bool:
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "localhost", parts.port or 5672), timeout=2):
            return True
    except OSError:
        return False


@pytest.fixture(scope="session")
def rabbit_url() -> str:
    url = broker_url()
    if not _reachable(url):
        message = f"RabbitMQ is not reachable at {url} (set ANARCHON_RABBITMQ_URL): RabbitMQ tests NOT RUN"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return url


def rabbitmqctl(*args: str) -> Any:
    """The broker's own view, as JSON (needs root on this machine)."""
    out = subprocess.run(
        ["rabbitmqctl", *args, "--formatter", "json", "-q"], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    return json.loads(out) if out.strip() else []


def broker_queues(prefix: str) -> dict[str, dict[str, Any]]:
    """Queues under ``prefix`` as the broker lists them, arguments as a plain dict."""
    rows = rabbitmqctl("list_queues", "name", "arguments", "messages", "consumers")
    queues = {}
    for row in rows:
        if row["name"].startswith(prefix):
            row["args"] = {name: value for name, _type, value in row["arguments"]}
            row["types"] = {name: type_ for name, type_, _value in row["arguments"]}
            queues[row["name"]] = row
    return queues


def own_broker_connections(prefix: str) -> list[str]:
    """Names of the broker's connections named with this test's ``prefix`` (the backend names its own
    ``anarchon-rabbitmq <purpose> (<prefix>)``), as the broker lists them. By name, not by peer port:
    behind Docker's port publishing the broker sees the proxy's ports, not this process's."""
    rows = rabbitmqctl("list_connections", "client_properties")
    names = [next((v for k, _type, v in row["client_properties"] if k == "connection_name"), "") for row in rows]
    return sorted(name for name in names if prefix in name)


@pytest.fixture
def broker() -> Callable[[str], dict[str, dict[str, Any]]]:
    return broker_queues


@pytest.fixture
async def prefix(rabbit_url: str) -> AsyncIterator[str]:
    name = f"t{uuid.uuid4().hex[:10]}."
    yield name
    leftovers = broker_queues(name)
    if leftovers:
        connection = await aio_pika.connect(rabbit_url)
        try:
            channel = await connection.channel()
            for queue in leftovers:
                try:
                    await channel.queue_delete(queue)
                except ChannelNotFoundEntity:  # a gate that expired meanwhile; the channel is closed
                    channel = await connection.channel()
        finally:
            await connection.close()


Make = Callable[..., Awaitable[RabbitMQBackend]]


@pytest.fixture
async def make_backend(rabbit_url: str, prefix: str) -> AsyncIterator[Make]:
    made: list[RabbitMQBackend] = []

    async def make(**kwargs: Any) -> RabbitMQBackend:
        kwargs.setdefault("url", rabbit_url)
        kwargs.setdefault("prefix", prefix)
        backend = RabbitMQBackend(**kwargs)
        await backend.start()
        made.append(backend)
        return backend

    yield make
    await asyncio.gather(*(b.close() for b in made), return_exceptions=True)


def make_job(name: str = "sync", cron: str = "* * * * * *", **options: Any) -> Job:
    return testing.make_job(RabbitMQBackend(), name, cron, **options)


@pytest.fixture
def job() -> Callable[..., Job]:
    return make_job


def claim_of(job: Job, slot_ms: int, instance: str = "i1", *, token: str | None = None, manual: bool = False) -> Claim:
    return testing.make_claim(job, slot_ms, instance, token=token, now_ms=slot_ms, manual=manual)


@pytest.fixture
def claim() -> Callable[..., Claim]:
    return claim_of


@pytest.fixture
def slot() -> int:
    """A slot in the future that no other test uses (each test has its own prefix anyway)."""
    import time

    return (time.time_ns() // 1_000_000 // 1000 + 3600) * 1000


class Proxy(FaultProxy):
    """The shared fault proxy (:class:`anarchon_conformance.testing.FaultProxy`) reading AMQP frames.

    Once a client publishes to ``hold_after_publish_to`` (seen on the wire as a
    ``basic.publish`` frame to the default exchange), every frame from the
    broker on a channel is dropped: the broker has the publish, the client
    never gets the confirm, but still hears a ``connection.close``. With ``ssl`` it also terminates TLS, so a client
    can speak ``amqps`` to a broker that only listens in plain AMQP. With ``edit_server_properties`` the broker's
    ``connection.start`` reaches the client changed by it, so the broker can claim to be another version.
    """

    def __init__(self, target: str, ssl: Any = None) -> None:
        parts = urlsplit(target)
        super().__init__(parts.hostname or "127.0.0.1", parts.port or 5672, ssl=ssl)
        self.hold_after_publish_to: str | None = None
        self.edit_server_properties: Callable[[dict[str, Any]], None] | None = None
        self.publish_seen = asyncio.Event()
        self.tls_clients = 0

    def url(self, port: int, scheme: str = "amqp", host: str = "127.0.0.1", query: str = "") -> str:
        parts = urlsplit(broker_url())
        auth = f"{parts.username}:{parts.password}@" if parts.username else ""
        return f"{scheme}://{auth}{host}:{port}/" + (f"?{query}" if query else "")

    def accepted_client(self, writer: asyncio.StreamWriter) -> None:
        if writer.get_extra_info("ssl_object") is not None:
            self.tls_clients += 1

    def upstream_chunk(self, link: Link, data: bytes) -> bytes:
        if self.hold_after_publish_to and not link.state.get("held"):
            key = self.hold_after_publish_to.encode()
            window = link.state["window"] = (link.state.get("window", b"") + data)[-4096:]
            if b"\x00\x3c\x00\x28\x00\x00\x00" + bytes([len(key)]) + key in window:  # basic.publish to key
                link.state["held"] = True
                self.publish_seen.set()
        return data

    def downstream_chunk(self, link: Link, data: bytes) -> bytes:
        # Whole AMQP frames (type, channel, size, payload, 0xCE); while held, only
        # channel 0 (connection.close, heartbeats) passes: confirms never arrive.
        buffer, out = link.state.get("frames", b"") + data, []
        while len(buffer) >= 7:
            end = 7 + int.from_bytes(buffer[3:7], "big") + 1
            if len(buffer) < end:
                break
            frame, buffer = self._edited(buffer[:end]), buffer[end:]
            if not link.state.get("held") or frame[1:3] == b"\x00\x00":
                out.append(frame)
        link.state["frames"] = buffer
        return b"".join(out)

    def _edited(self, frame: bytes) -> bytes:
        if self.edit_server_properties is None or frame[:3] != b"\x01\x00\x00" or frame[7:11] != b"\x00\x0a\x00\x0a":
            return frame  # only connection.start (channel 0, class 10, method 10) is changed
        _, _, start = amqp_frame.unmarshal(frame)
        assert isinstance(start, spec.Connection.Start)
        properties = dict(start.server_properties or {})
        self.edit_server_properties(properties)
        start.server_properties = properties
        return amqp_frame.marshal(start, 0)


@pytest.fixture
async def proxy(rabbit_url: str) -> AsyncIterator[Proxy]:
    p = Proxy(rabbit_url)
    yield p
    await p.close()


@pytest.fixture
def proxy_class() -> type[Proxy]:
    return Proxy


@pytest.fixture
def ctl() -> Callable[..., Any]:
    return rabbitmqctl


@pytest.fixture
def own_connections() -> Callable[[str], list[str]]:
    return own_broker_connections
