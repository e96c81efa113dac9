"""NATS JetStream: the primitive is a publish with ``Nats-Msg-Id``, reading ``PubAck.duplicate``.

It publishes into the backend's own stream (under the same prefix), so both
see one stream configuration: file storage, the same duplicate window.
"""

from __future__ import annotations

import asyncio
import os
from urllib.parse import urlsplit

import nats
from nats.errors import Error as NatsError

from .._proc import pids_named
from .._target import BackendSpec, RawClient, Target

URL = os.environ.get("ANARCHON_NATS_URL", "nats://127.0.0.1:4222")


def _stream(ns: str) -> str:
    return f"BENCH_{ns}"


class _Raw(RawClient):
    description = "JetStream publish with `Nats-Msg-Id`, `PubAck.duplicate` (nats-py)"

    def __init__(self, target: NatsTarget, ns: str) -> None:
        self.target, self.ns = target, ns

    async def open(self) -> None:
        backend = self.target.spec(self.ns).build()
        await backend.start()  # creates the stream as the backend configures it
        await backend.close()
        self.nc = await nats.connect(self.target.url)
        self.js = self.nc.jetstream()
        self.subject = f"{self.ns}.raw.claims"

    async def once(self, key: str) -> bool:
        ack = await self.js.publish(self.subject, b"{}", stream=_stream(self.ns), headers={"Nats-Msg-Id": key})
        return not ack.duplicate

    async def close(self) -> None:
        await self.nc.close()


class NatsTarget(Target):
    name = "nats"

    def __init__(self, url: str = URL) -> None:
        self.url = url

    async def unreachable(self) -> str | None:
        try:
            nc = await asyncio.wait_for(nats.connect(self.url, connect_timeout=3, max_reconnect_attempts=0), 5)
        except (OSError, asyncio.TimeoutError, NatsError) as exc:
            return f"{type(exc).__name__}: {exc}"
        await nc.close()
        return None

    server_note = "the whole shared nats-server process (other clients included)"

    async def server_pids(self, ns: str) -> list[int]:
        return pids_named("nats-server", f"-p {urlsplit(self.url).port or 4222}")

    async def footprint(self, ns: str) -> dict[str, float]:
        nc = await nats.connect(self.url)
        try:
            info = await nc.jetstream().stream_info(_stream(ns))
        finally:
            await nc.close()
        return {"messages": float(info.state.messages), "MB": info.state.bytes / 1e6}

    def spec(self, ns: str) -> BackendSpec:
        kwargs = {"servers": self.url, "stream": _stream(ns), "prefix": f"{ns}."}
        return BackendSpec("anarchon_nats:NatsBackend", kwargs)

    def soak_spec(self, ns: str, history_size: int) -> BackendSpec:
        spec = self.spec(ns)
        # Its own option, 1,000 messages per subject by default: the stream would pass the
        # soak's 10 minutes still growing to 2,000,000 messages (two subjects per job).
        return BackendSpec(spec.class_path, {**spec.kwargs, "history_size": history_size})

    def raw(self, ns: str) -> RawClient:
        return _Raw(self, ns)

    async def cleanup(self, ns: str) -> None:
        nc = await nats.connect(self.url)
        try:
            await nc.jetstream().delete_stream(_stream(ns))
        except NatsError:
            pass
        finally:
            await nc.close()

    async def versions(self) -> dict[str, str]:
        nc = await nats.connect(self.url)
        try:
            server = nc.connected_server_version
        finally:
            await nc.close()
        return {"nats-py": nats.aio.client.__version__, "NATS": f"{server.major}.{server.minor}.{server.patch}"}


TARGET = NatsTarget()
