"""RabbitMQ: the primitive is declaring a gate queue and a persistent publish with confirm.

The gate queue has the seed's arguments (``x-max-length 1``, ``reject-publish``,
``x-expires``): an ack means first, a nack means taken. Issued on aiormq, the
channel under aio-pika that the backend uses.

Every job has a history stream, so 1,000 jobs are 1,000 streams and 10,000
jobs 10,000: more than a shared broker with the usual 1,024 open files should
be given. Unless ``ANARCHON_BENCH_RABBITMQ_URL`` names a broker to use, the
benchmarks start a private node (the fault suite's, ``chaos.brokers``) on free
ports with the open-file limit raised to the hard limit, and remove it after.
"""

from __future__ import annotations

import asyncio
import os
import resource
import shutil
from importlib import metadata
from pathlib import Path
from typing import Any

import aio_pika
import aiormq
from aiormq.exceptions import DeliveryError, PublishError
from pamqp import commands as spec

from .._target import BackendSpec, RawClient, Target
from ._private import PrivateServer

URL_ENV = "ANARCHON_BENCH_RABBITMQ_URL"
#: Gates of the raw primitive expire like the backend's default slot_ttl_ms.
GATE_TTL_MS = 300_000


def _gate_arguments() -> dict[str, object]:
    return {"x-max-length": 1, "x-overflow": "reject-publish", "x-expires": GATE_TTL_MS}


class _Raw(RawClient):
    description = "declare gate queue (`x-max-length 1`, `reject-publish`) + persistent publish with confirm (aiormq)"

    def __init__(self, url: str, ns: str) -> None:
        self.url = url
        self.prefix = f"{ns}.raw."

    async def open(self) -> None:
        self.connection = await aio_pika.connect(self.url)
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


def _private_node(workdir: Path) -> Any:
    from chaos.rabbitmq import RabbitMQBroker

    class Node(RabbitMQBroker):  # type: ignore[misc]
        """The fault suite's private node, allowed as many open files as the hard limit."""

        def _argv(self, *argv: str) -> list[str]:
            base: list[str] = super()._argv(*argv)
            hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
            limit = ["prlimit", f"--nofile={hard}:{hard}"]
            if base[0] == "runuser":
                at = base.index("--") + 1
                return base[:at] + limit + base[at:]
            return limit + base

    return Node(workdir)


class RabbitMQTarget(Target):
    name = "rabbitmq"
    sequential_calls = 300
    #: 1,000 every-second jobs are 1,000 gate queues a second, past what one broker here creates (BROKER-NOTES).
    fleet_jobs = (1000, 100)

    def __init__(self) -> None:
        self.url = os.environ.get(URL_ENV, "")
        self._private = PrivateServer("anarchon-bench-rabbitmq-")

    async def setup(self) -> None:
        if self.url:
            self.notes = [f"rabbitmq: the broker named by {URL_ENV}"]
            return
        node = await self._private.start(_private_node)
        self.url = f"amqp://guest:guest@127.0.0.1:{node.port}/"
        self.notes = [
            "rabbitmq: a private node started for the run (not the shared broker: 1,000 and 10,000 jobs mean as "
            "many history streams), open-file limit raised to the hard limit; default `slot_ttl_ms` (300 s)"
        ]

    async def fresh(self) -> None:
        """A new private node: 10,000 streams (two files each) use most of the open-file limit by themselves."""
        if self._private.broker is not None:
            await self.teardown()
            await self.setup()

    async def teardown(self) -> None:
        if await self._private.stop():
            self.url = ""

    async def unreachable(self) -> str | None:
        try:
            connection = await asyncio.wait_for(aio_pika.connect(self.url), 5)
        except (OSError, asyncio.TimeoutError, aiormq.exceptions.AMQPError) as exc:
            return f"{type(exc).__name__}: {exc}"
        await connection.close()
        return None

    def spec(self, ns: str) -> BackendSpec:
        return BackendSpec("anarchon_rabbitmq:RabbitMQBackend", {"url": self.url, "prefix": f"{ns}."})

    def raw(self, ns: str) -> RawClient:
        return _Raw(self.url, ns)

    async def cleanup(self, ns: str) -> None:
        if self._node is not None:
            return  # the whole node goes at teardown
        names = await _queues(f"{ns}.")
        if not names:
            return
        connection = await aio_pika.connect(self.url)
        try:
            channel = await (await connection.channel()).get_underlay_channel()
            for name in names:
                await channel.queue_delete(name)
        finally:
            await connection.close()

    async def versions(self) -> dict[str, str]:
        connection = await aio_pika.connect(self.url)
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
