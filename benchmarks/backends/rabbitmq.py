"""RabbitMQ: the primitive is declaring a gate queue and a persistent publish with confirm.

The gate queue has the seed's arguments (``x-max-length 1``, ``reject-publish``,
``x-expires``): an ack means first, a nack means taken. Issued on aiormq, the
channel under aio-pika that the backend uses.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from importlib import metadata

import aio_pika
import aiormq
from aiormq.exceptions import DeliveryError, PublishError
from pamqp import commands as spec

from .._target import BackendSpec, RawClient, Target

URL = os.environ.get("ANARCHON_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672/")
#: Gates of the raw primitive expire like the backend's default slot_ttl_ms.
GATE_TTL_MS = 300_000


def _gate_arguments() -> dict[str, object]:
    return {"x-max-length": 1, "x-overflow": "reject-publish", "x-expires": GATE_TTL_MS}


class _Raw(RawClient):
    description = "declare gate queue (`x-max-length 1`, `reject-publish`) + persistent publish with confirm (aiormq)"

    def __init__(self, ns: str) -> None:
        self.prefix = f"{ns}.raw."

    async def open(self) -> None:
        self.connection = await aio_pika.connect(URL)
        channel = await self.connection.channel(publisher_confirms=True, on_return_raises=True)
        self.channel = await channel.get_underlay_channel()
        self.properties = spec.Basic.Properties(delivery_mode=2)

    async def once(self, key: str) -> bool:
        name = f"{self.prefix}{key}"
        await self.channel.queue_declare(name, durable=True, arguments=_gate_arguments())
        try:
            await self.channel.basic_publish(b"x", routing_key=name, properties=self.properties, mandatory=True)
        except PublishError:
            raise
        except DeliveryError:
            return False
        return True

    async def close(self) -> None:
        await self.connection.close()


async def _queues(prefix: str) -> list[str]:
    ctl = shutil.which("rabbitmqctl")
    if ctl is None:
        return []
    proc = await asyncio.create_subprocess_exec(
        ctl, "list_queues", "name", "-q", "--no-table-headers", stdout=asyncio.subprocess.PIPE
    )
    out, _ = await proc.communicate()
    return [name for name in out.decode().split() if name.startswith(prefix)]


class RabbitMQTarget(Target):
    name = "rabbitmq"
    sequential_calls = 300

    async def unreachable(self) -> str | None:
        try:
            connection = await asyncio.wait_for(aio_pika.connect(URL), 5)
        except (OSError, asyncio.TimeoutError, aiormq.exceptions.AMQPError) as exc:
            return f"{type(exc).__name__}: {exc}"
        await connection.close()
        return None

    def spec(self, ns: str) -> BackendSpec:
        return BackendSpec("anarchon_rabbitmq:RabbitMQBackend", {"url": URL, "prefix": f"{ns}."})

    def raw(self, ns: str) -> RawClient:
        return _Raw(ns)

    async def cleanup(self, ns: str) -> None:
        names = await _queues(f"{ns}.")
        if not names:
            return
        connection = await aio_pika.connect(URL)
        try:
            channel = await (await connection.channel()).get_underlay_channel()
            for name in names:
                await channel.queue_delete(name)
        finally:
            await connection.close()

    async def versions(self) -> dict[str, str]:
        connection = await aio_pika.connect(URL)
        try:
            props = connection.transport.connection.server_properties
        finally:
            await connection.close()
        server = props.get("version", b"?")
        return {
            "aio-pika": aio_pika.__version__,
            "aiormq": metadata.version("aiormq"),
            "RabbitMQ": server.decode() if isinstance(server, bytes) else str(server),
        }


TARGET = RabbitMQTarget()
