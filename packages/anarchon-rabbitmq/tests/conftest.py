"""Fixtures for the RabbitMQ backend tests: a real broker, one prefix per test.

Every test gets its own queue prefix, and its queues are found afterwards
through the broker's own view (``rabbitmqctl list_queues``) and deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
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
from anarchon_rabbitmq import RabbitMQBackend

RABBIT_URL = os.environ.get("ANARCHON_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672/")


def _reachable(url: str) -> bool:
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "localhost", parts.port or 5672), timeout=2):
            return True
    except OSError:
        return False


@pytest.fixture(scope="session")
def rabbit_url() -> str:
    if not _reachable(RABBIT_URL):
        message = f"RabbitMQ is not reachable at {RABBIT_URL} (set ANARCHON_RABBITMQ_URL): RabbitMQ tests NOT RUN"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return RABBIT_URL


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


def _own_ports_to(port: int) -> set[int]:
    """Local ports of this process's TCP connections to ``port``, from /proc (Linux)."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            link = os.readlink(f"/proc/self/fd/{fd}")
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    ports = set()
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as rows:
            for row in list(rows)[1:]:
                fields = row.split()
                if fields[9] in inodes and int(fields[2].rsplit(":", 1)[1], 16) == port:
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def own_broker_connections() -> list[str]:
    """Names of the broker's connections that this test process holds, as the broker lists them."""
    ports = _own_ports_to(urlsplit(RABBIT_URL).port or 5672)
    rows = rabbitmqctl("list_connections", "peer_port", "client_properties")
    return sorted(
        next((value for key, _type, value in row["client_properties"] if key == "connection_name"), "<unnamed>")
        for row in rows
        if row["peer_port"] in ports
    )


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


class Proxy:
    """A loopback TCP proxy in front of the broker, able to stop one direction.

    Once a client publishes to ``hold_after_publish_to`` (seen on the wire as a
    ``basic.publish`` frame to the default exchange), every frame from the
    broker on a channel is dropped: the broker has the publish, the client
    never gets the confirm, but still hears a ``connection.close``. With ``ssl`` it also terminates TLS, so a client
    can speak ``amqps`` to a broker that only listens in plain AMQP. With ``edit_server_properties`` the broker's
    ``connection.start`` reaches the client changed by it, so the broker can claim to be another version.
    """

    def __init__(self, target: str, ssl: Any = None) -> None:
        parts = urlsplit(target)
        self.target = (parts.hostname or "127.0.0.1", parts.port or 5672)
        self.ssl = ssl
        self.hold_after_publish_to: str | None = None
        self.edit_server_properties: Callable[[dict[str, Any]], None] | None = None
        self.publish_seen = asyncio.Event()
        self.upstream_ports: list[int] = []
        #: Local ports of the broker connections whose confirms are held.
        self.held_ports: list[int] = []
        self.tls_clients = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: list[asyncio.StreamWriter] = []

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.ssl)
        return int(self._server.sockets[0].getsockname()[1])

    def url(self, port: int, scheme: str = "amqp", host: str = "127.0.0.1", query: str = "") -> str:
        parts = urlsplit(RABBIT_URL)
        auth = f"{parts.username}:{parts.password}@" if parts.username else ""
        return f"{scheme}://{auth}{host}:{port}/" + (f"?{query}" if query else "")

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if writer.get_extra_info("ssl_object") is not None:
            self.tls_clients += 1
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        self.upstream_ports.append(up_writer.get_extra_info("sockname")[1])
        self._writers += [writer, up_writer]
        held = {"on": False}

        async def upstream() -> None:
            window = b""
            while data := await reader.read(65536):
                if self.hold_after_publish_to and not held["on"]:
                    key = self.hold_after_publish_to.encode()
                    window = (window + data)[-4096:]
                    if b"\x00\x3c\x00\x28\x00\x00\x00" + bytes([len(key)]) + key in window:
                        held["on"] = True
                        self.held_ports.append(up_writer.get_extra_info("sockname")[1])
                        self.publish_seen.set()
                up_writer.write(data)
                await up_writer.drain()
            up_writer.close()

        async def downstream() -> None:
            # Whole AMQP frames (type, channel, size, payload, 0xCE); while held, only
            # channel 0 (connection.close, heartbeats) passes: confirms never arrive.
            buffer = b""
            while data := await up_reader.read(65536):
                buffer += data
                while len(buffer) >= 7:
                    end = 7 + int.from_bytes(buffer[3:7], "big") + 1
                    if len(buffer) < end:
                        break
                    frame, buffer = buffer[:end], buffer[end:]
                    frame = self._edited(frame)
                    if not held["on"] or frame[1:3] == b"\x00\x00":
                        writer.write(frame)
                await writer.drain()
            writer.close()

        for coro in (upstream(), downstream()):
            task = asyncio.get_running_loop().create_task(self._quietly(coro))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _edited(self, frame: bytes) -> bytes:
        if self.edit_server_properties is None or frame[:3] != b"\x01\x00\x00" or frame[7:11] != b"\x00\x0a\x00\x0a":
            return frame  # only connection.start (channel 0, class 10, method 10) is changed
        _, _, start = amqp_frame.unmarshal(frame)
        assert isinstance(start, spec.Connection.Start)
        properties = dict(start.server_properties or {})
        self.edit_server_properties(properties)
        start.server_properties = properties
        return amqp_frame.marshal(start, 0)

    @staticmethod
    async def _quietly(coro: Awaitable[None]) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            await coro

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for w in self._writers:
            w.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


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
def own_connections() -> Callable[[], list[str]]:
    return own_broker_connections
