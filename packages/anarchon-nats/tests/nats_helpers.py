"""Helpers the NATS tests share: jobs, tokens, private nats-server processes.

Imported by name (the test folder is put on ``sys.path`` by conftest.py), so
the module name is unique in the monorepo.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats
from nats.js import JetStreamContext

from anarchon.job import Job
from anarchon_conformance import free_port, testing
from anarchon_nats import NatsBackend

NATS_SERVER = shutil.which("nats-server") or "/usr/sbin/nats-server"


def make_job(name: str = "sync", backend: type[NatsBackend] | NatsBackend = NatsBackend, **options: Any) -> Job:
    """A job whose options went through the backend's own resolution, as Scheduler.add does."""
    b = backend if isinstance(backend, NatsBackend) else NatsBackend()
    return testing.make_job(b, name, testing.EVERY_SECOND, **options)


def token() -> str:
    return uuid.uuid4().hex


def now_ms() -> int:
    return time.time_ns() // 1_000_000


async def stored_on(js: JetStreamContext, stream: str, subject: str) -> int:
    """How many messages the stream holds on one subject (``state.messages`` counts the whole stream)."""
    info = await js.stream_info(stream, subjects_filter=subject)
    return (info.state.subjects or {}).get(subject, 0)


# -- private servers ---------------------------------------------------------------


def wait_port(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"nats-server did not open port {port} within {timeout} s")


@dataclass
class Server:
    """One nats-server process started by a test, with its config file."""

    name: str
    port: int
    config: Path
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            return
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen([NATS_SERVER, "-c", str(self.config)], stdout=out, stderr=out)
        wait_port(self.port)

    def kill(self) -> None:
        """SIGKILL: the server gets no chance to hand anything over."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@dataclass
class Servers:
    """Every server a test session started, so a finalizer can kill them all."""

    root: Path
    started: list[Server] = field(default_factory=list)

    def new(self, name: str, body: str, port: int | None = None) -> Server:
        port = port or free_port()
        store = self.root / name
        store.mkdir(parents=True, exist_ok=True)
        config = self.root / f"{name}.conf"
        config.write_text(f'server_name: {name}\nlisten: "127.0.0.1:{port}"\n{body}\n'.replace("@STORE@", str(store)))
        server = Server(name=name, port=port, config=config, log=self.root / f"{name}.log")
        self.started.append(server)
        return server

    def kill_all(self) -> None:
        for s in self.started:
            with contextlib.suppress(Exception):
                s.kill()


@dataclass
class Cluster:
    nodes: list[Server]

    @property
    def urls(self) -> list[str]:
        return [n.url for n in self.nodes]

    def live_urls(self) -> list[str]:
        return [n.url for n in self.nodes if n.running]


async def wait_jetstream(urls: list[str], timeout: float = 30.0) -> None:
    """Until a stream with one replica per server can be placed, and so every server is a JetStream peer.

    A meta leader answers account info before the other servers have joined it:
    a stream with replicas 3 created then is refused with "no suitable peers
    for placement" (10005), which is what a new or just restarted cluster
    answers for a few seconds. So the probe is such a stream, made and deleted.
    """
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    probe = f"READY_{uuid.uuid4().hex[:8]}"
    while time.monotonic() < deadline:
        try:
            nc = await nats.connect(urls, connect_timeout=1, max_reconnect_attempts=1)
            try:
                js = nc.jetstream(timeout=2)
                await js.add_stream(name=probe, subjects=[f"{probe.lower()}.>"], num_replicas=len(urls))
                await js.delete_stream(probe)
                return
            finally:
                await nc.close()
        except Exception as exc:
            last = exc
            await asyncio.sleep(0.25)
    raise TimeoutError(f"JetStream did not place a stream on all of {urls} within {timeout} s: {last!r}")
