"""The fault suite's NATS: a private nats-server with JetStream, and a three-node cluster.

Found by :mod:`chaos.backends` through this backend's manifest (``[chaos]``);
the bases are :mod:`chaos.brokers` and :mod:`chaos.replicated`.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

from chaos.brokers import Broker, BrokerError, _port_open, _wait, free_port
from chaos.replicated import Replicated, Retarget, _kill, _now_ms


class NatsBroker(Broker):
    name = "nats"
    backend_class = "anarchon_nats:NatsBackend"
    binaries = ("nats-server",)
    persistence_note = "JetStream file store (no fsync per message; a process kill keeps the page cache)"
    #: The server binary (a subclass may name another release's).
    server = "nats-server"

    def start(self) -> None:
        self.port = self.port or free_port()
        self.proc = self._popen(
            [self.server, "-a", "127.0.0.1", "-p", str(self.port), "-js", "-sd", str(self.workdir / "store")],
            "nats.log",
        )
        _wait(lambda: _port_open(self.port), 15, "nats-server", self.proc)

    def backend_kwargs(self, port: int, namespace: str) -> dict[str, Any]:
        return {
            "servers": f"nats://127.0.0.1:{port}",
            "stream": namespace.upper().replace("-", "_"),
            "prefix": f"{namespace}.",
            "duplicate_window_ms": 60_000,
        }


class NatsCluster(Replicated):
    """Three ``nats-server`` nodes with JetStream in one cluster; the stream leader is killed and restarted.

    The default stream has one replica (the seed's default for a new stream):
    killing its server takes the stream away until the server is back. The
    durable run sets ``replicas=3``: a new leader is elected from the others.
    """

    name = "nats"
    backend_class = "anarchon_nats:NatsBackend"
    binaries = ("nats-server",)
    proxied = False
    kinds = ("leader-kill",)
    persistence_note = "3 nodes, JetStream file store (no fsync per message); stream leader SIGKILLed, back in 2 s"
    durable_note = "replicas=3"
    DOWN_S = 2.0

    def __init__(self, workdir: Path, durable: bool) -> None:
        super().__init__(workdir, durable)
        self.ports: list[int] = []
        self.procs: list[subprocess.Popen[bytes] | None] = [None, None, None]

    def _conf(self, i: int, routes: list[int]) -> Path:
        others = ", ".join(f"nats-route://127.0.0.1:{p}" for j, p in enumerate(routes) if j != i)
        path = self.workdir / f"n{i}.conf"
        path.write_text(
            f'server_name: n{i}\nlisten: "127.0.0.1:{self.ports[i]}"\n'
            f'jetstream {{ store_dir: "{self.workdir / f"store{i}"}", max_memory_store: 64MB, '
            "max_file_store: 256MB }\n"
            f'cluster {{ name: failover, listen: "127.0.0.1:{routes[i]}", routes: [{others}] }}\n'
        )
        return path

    def _start_node(self, i: int) -> None:
        self.procs[i] = self._popen(["nats-server", "-c", str(self.workdir / f"n{i}.conf")], f"nats{i}.log")
        _wait(lambda: _port_open(self.ports[i]), 15, f"nats-server n{i}", self.procs[i])

    def start(self) -> None:
        taken: set[int] = set()
        for _ in range(6):
            taken.add(free_port(taken))
        ports = sorted(taken)
        self.ports, routes = ports[:3], ports[3:]
        for i in range(3):
            self._conf(i, routes)
        for i in range(3):
            self._start_node(i)
        self.port = self.ports[0]
        import asyncio

        asyncio.run(self._ready())

    def _urls(self) -> list[str]:
        return [f"nats://127.0.0.1:{p}" for p in self.ports]

    async def _ready(self) -> None:
        """Until a 3-replica stream can be placed: every server is a JetStream peer."""
        import asyncio

        import nats

        deadline = time.monotonic() + 60
        while True:
            try:
                nc = await nats.connect(self._urls(), connect_timeout=2, max_reconnect_attempts=2)
                try:
                    js = nc.jetstream(timeout=3)
                    await js.add_stream(name="FAILOVER_PROBE", subjects=["failover.probe"], num_replicas=3)
                    await js.delete_stream("FAILOVER_PROBE")
                    return
                finally:
                    await nc.close()
            except Exception as exc:
                if time.monotonic() > deadline:
                    raise BrokerError(f"the NATS cluster never placed a 3-replica stream: {exc}") from exc
                await asyncio.sleep(0.5)

    async def _leader(self, stream: str, timeout: float = 30) -> str:
        import asyncio

        import nats

        deadline = time.monotonic() + timeout
        while True:
            try:
                nc = await nats.connect(self._urls(), connect_timeout=2, max_reconnect_attempts=1)
                try:
                    info = await nc.jetstream(timeout=2).stream_info(stream)
                    if info.cluster is not None and info.cluster.leader:
                        return str(info.cluster.leader)
                finally:
                    await nc.close()
            except Exception:
                if time.monotonic() > deadline:
                    raise
            await asyncio.sleep(0.1)

    def failover(self, kind: str, retarget: Retarget, seats: int) -> tuple[int, int]:
        import asyncio

        stream = self.backend_kwargs(0, self.namespace)["stream"]
        leader = asyncio.run(self._leader(stream))
        i = int(leader.removeprefix("n"))
        start = _now_ms()
        _kill(self.procs[i])
        if self.durable:
            asyncio.run(self._leader(stream))
            end = _now_ms()
            time.sleep(self.DOWN_S)
            self._start_node(i)
        else:
            time.sleep(self.DOWN_S)
            self._start_node(i)
            asyncio.run(self._leader(stream))
            end = _now_ms()
        return start, end

    def kill(self) -> None:
        for proc in self.procs:
            _kill(proc)

    def backend_kwargs(self, port: int, namespace: str) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "servers": self._urls(),
            "stream": namespace.upper().replace("-", "_"),
            "prefix": f"{namespace}.",
            "duplicate_window_ms": 60_000,
        }
        if self.durable:
            kwargs["replicas"] = 3
        return kwargs

    def describe(self) -> str:
        return f"nats cluster of 3 on {','.join(map(str, self.ports))}"


#: The scenario's brokers, and the failover scenario's replicated referees.
BROKERS: tuple[type[Broker], ...] = (NatsBroker,)
FAILOVER: tuple[type[Replicated], ...] = (NatsCluster,)
