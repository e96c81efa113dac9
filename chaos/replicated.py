"""Replicated referees that fail over: a primary and its replica, or a cluster, of the scenario's own.

Each one is started on free ports in a temp dir, failed over on demand, and
stopped in ``finally``. Where clients reach one address (Redis primary with a
replica, PostgreSQL with a streaming standby) the seats' proxies stand in for
what a production client follows (Sentinel, a virtual IP, DNS): a failover
points them at the promoted server and cuts their links. Where clients know
every node (Redis Cluster, NATS) no proxy sits in between.

Two kinds of failover, alternated:

``crash``
    the primary is killed (``SIGKILL``; PostgreSQL ``immediate`` stop), the
    replica promoted a second later (the detection delay), the clients moved.
``switch``
    the replica is promoted while the old primary still runs and still serves
    the clients not moved yet (half the seats, for one more second): what a
    client that follows Sentinel late, or a partition, does. Then the old
    primary is made a replica of the new one, which drops what it took alone.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from .brokers import Broker, BrokerError, _pg_bin, _port_open, _wait, free_port

__all__ = ["FAILOVER_BROKERS", "Replicated"]

#: Seconds between the primary's death and the promotion: a fast detector.
DETECT_S = 1.0
#: Seconds the old primary keeps serving the seats not moved yet, in a ``switch``.
LAG_S = 2.0

Retarget = Callable[[int, list[int] | None], None]


class Replicated(Broker):
    """A referee with a standby; ``failover()`` promotes it and returns the unavailability window (ms)."""

    #: Clients reach one address: the seats' proxies follow the primary.
    proxied: ClassVar[bool] = True
    #: What ``durable=True`` adds to the backend's kwargs, and what it adds to the server side, in words.
    durable_note: ClassVar[str] = ""
    kinds: ClassVar[tuple[str, ...]] = ("crash", "switch")
    #: Whether a durable option exists to run as the second variant.
    has_durable: ClassVar[bool] = True

    def __init__(self, workdir: Path, durable: bool) -> None:
        super().__init__(workdir)
        self.durable = durable
        #: The scenario's namespace (stream, prefix), set before ``start()``.
        self.namespace = ""

    def failover(self, kind: str, retarget: Retarget, seats: int) -> tuple[int, int]:
        raise NotImplementedError

    def history_kwargs(self, namespace: str) -> dict[str, Any]:
        """Where to read history after the run: the current primary, directly."""
        return self.backend_kwargs(self.port, namespace)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class RedisPair(Replicated):
    """``redis-server`` primary and replica (no persistence: replication alone is measured)."""

    name = "redis"
    backend_class = "anarchon_redis:RedisBackend"
    binaries = ("redis-server",)
    persistence_note = "primary + 1 replica, asynchronous replication, no AOF/RDB; promotion by REPLICAOF NO ONE"
    durable_note = "min_replicas=1, replica_timeout_ms=250"

    def __init__(self, workdir: Path, durable: bool) -> None:
        super().__init__(workdir, durable)
        self.ports: list[int] = []
        self.procs: list[subprocess.Popen[bytes] | None] = [None, None]
        self.primary = 0

    def _start_node(self, i: int, replica_of: int | None) -> None:
        d = self.workdir / f"node{i}"
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        extra = ["--replicaof", "127.0.0.1", str(replica_of)] if replica_of else []
        self.procs[i] = self._popen(
            ["redis-server", "--port", str(self.ports[i]), "--bind", "127.0.0.1", "--dir", str(d), "--save", "",
             "--appendonly", "no", "--protected-mode", "no", *extra],
            f"redis{i}.log",
        )  # fmt: skip
        _wait(lambda: _port_open(self.ports[i]), 15, f"redis-server {i}", self.procs[i])

    def _client(self, i: int) -> Any:
        import redis

        return redis.Redis(host="127.0.0.1", port=self.ports[i], socket_timeout=5)

    def _synced(self, i: int) -> None:
        client = self._client(i)
        try:
            deadline = time.monotonic() + 20
            while client.wait(1, 1000) < 1:
                if time.monotonic() > deadline:
                    raise BrokerError(f"redis replica of port {self.ports[i]} never caught up")
        finally:
            client.close()

    def start(self) -> None:
        self.ports = [free_port(), 0]
        self.ports[1] = free_port(set(self.ports))
        self._start_node(0, None)
        self._start_node(1, self.ports[0])
        self._synced(0)
        self.port = self.ports[0]

    def failover(self, kind: str, retarget: Retarget, seats: int) -> tuple[int, int]:
        old, new = self.primary, 1 - self.primary
        start = _now_ms()
        if kind == "crash":
            proc = self.procs[old]
            assert proc is not None
            proc.kill()
            proc.wait(10)
            time.sleep(DETECT_S)
        client = self._client(new)
        try:
            client.execute_command("REPLICAOF", "NO", "ONE")
        finally:
            client.close()
        self.primary, self.port = new, self.ports[new]
        half = list(range(seats // 2))
        if kind == "switch":
            retarget(self.port, half)
            time.sleep(LAG_S)
            retarget(self.port, [s for s in range(seats) if s not in half])
            end = _now_ms()
            demote = self._client(old)
            try:
                demote.execute_command("REPLICAOF", "127.0.0.1", str(self.port))
            finally:
                demote.close()
        else:
            retarget(self.port, None)
            end = _now_ms()
            self._start_node(old, self.port)
        self._synced(new)
        return start, end

    def kill(self) -> None:
        for proc in self.procs:
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(10)
        self.procs = [None, None]

    def backend_kwargs(self, port: int, namespace: str) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"url": f"redis://127.0.0.1:{port}/0", "prefix": f"{namespace}:"}
        if self.durable:
            kwargs.update(min_replicas=1, replica_timeout_ms=250)
        return kwargs

    def describe(self) -> str:
        return f"redis primary :{self.ports[0]} + replica :{self.ports[1]}"


class PostgresPair(Replicated):
    """A primary and a streaming standby (``pg_basebackup -R``), promoted by ``pg_ctl promote``."""

    name = "postgres"
    backend_class = "anarchon_postgres:PostgresBackend"
    binaries = ("/usr/lib/postgresql/*/bin/initdb",)
    persistence_note = "primary + 1 streaming standby; fsync on, synchronous_commit on"
    durable_note = "synchronous_standby_names='*'"

    def __init__(self, workdir: Path, durable: bool) -> None:
        super().__init__(workdir, durable)
        import os

        self._user = "postgres" if os.geteuid() == 0 else None
        self.ports: list[int] = []
        self.primary = 0

    def _data(self, i: int) -> Path:
        return self.workdir / f"data{i}"

    def _run(self, argv: list[str], check: bool = True) -> subprocess.CompletedProcess[bytes]:
        full = ["runuser", "-u", self._user, "--", *argv] if self._user else argv
        done = subprocess.run(full, capture_output=True, timeout=120)
        if check and done.returncode != 0:
            raise BrokerError(f"{' '.join(argv[:2])} failed: {done.stderr.decode(errors='replace')[-500:]}")
        return done

    def _opts(self, i: int) -> str:
        sync = "-c synchronous_standby_names=* " if self.durable else ""
        return (
            f"-p {self.ports[i]} -c listen_addresses=127.0.0.1 -k {self.workdir} -c fsync=on "
            f"-c synchronous_commit=on -c max_connections=200 -c wal_level=replica {sync}"
            "-c hot_standby=on -c wal_keep_size=256MB"
        )

    def _pg_start(self, i: int) -> None:
        log = self.workdir / f"pg{i}.log"
        self._run([_pg_bin("pg_ctl"), "-D", str(self._data(i)), "-l", str(log), "-o", self._opts(i), "-w", "-t", "60",
                   "start"])  # fmt: skip

    def _standby_of(self, i: int, primary: int) -> None:
        shutil.rmtree(self._data(i), ignore_errors=True)
        self._run([_pg_bin("pg_basebackup"), "-h", "127.0.0.1", "-p", str(self.ports[primary]), "-U", "postgres",
                   "-D", str(self._data(i)), "-R", "-X", "stream", "-c", "fast"])  # fmt: skip
        self._pg_start(i)

    def start(self) -> None:
        if self._user:
            shutil.chown(self.workdir, self._user, self._user)
        self.ports = [free_port(), 0]
        self.ports[1] = free_port(set(self.ports))
        self._run([_pg_bin("initdb"), "-D", str(self._data(0)), "-A", "trust", "-U", "postgres", "--no-sync"])
        with open(self._data(0) / "pg_hba.conf", "a") as hba:
            hba.write("host replication all 127.0.0.1/32 trust\n")
        self._pg_start(0)
        self._standby_of(1, 0)
        self.port = self.ports[0]

    def _stop(self, i: int, mode: str = "immediate") -> None:
        if (self._data(i) / "postmaster.pid").exists():
            self._run([_pg_bin("pg_ctl"), "-D", str(self._data(i)), "-m", mode, "-w", "stop"], check=False)

    def failover(self, kind: str, retarget: Retarget, seats: int) -> tuple[int, int]:
        old, new = self.primary, 1 - self.primary
        start = _now_ms()
        if kind == "crash":
            self._stop(old)
            time.sleep(DETECT_S)
        self._run([_pg_bin("pg_ctl"), "-D", str(self._data(new)), "-w", "-t", "60", "promote"])
        self.primary, self.port = new, self.ports[new]
        half = list(range(seats // 2))
        if kind == "switch":
            retarget(self.port, half)
            time.sleep(LAG_S)
            retarget(self.port, [s for s in range(seats) if s not in half])
            end = _now_ms()
            self._stop(old)
        else:
            retarget(self.port, None)
            end = _now_ms()
        self._standby_of(old, new)  # the old primary's own timeline is thrown away, as pg_rewind would
        return start, end

    def kill(self) -> None:
        for i in range(len(self.ports)):
            self._stop(i)

    def backend_kwargs(self, port: int, namespace: str) -> dict[str, Any]:
        return {"dsn": f"postgresql://postgres@127.0.0.1:{port}/postgres", "schema": namespace.replace("-", "_")}

    def describe(self) -> str:
        return f"postgres primary :{self.ports[0]} + standby :{self.ports[1]}"


def _kill(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is not None and proc.poll() is None:
        with contextlib.suppress(OSError):
            proc.kill()
        proc.wait(10)


def _cluster_port(taken: set[int]) -> int:
    """A free port whose cluster bus port (+10000, in the ephemeral range) binds too."""
    while True:
        port = free_port(taken)
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port + 10_000))
        except OSError:
            taken = taken | {port}
            continue
        if all(abs(port - t) > 1 for t in taken):
            return port
        taken = taken | {port}


class RedisClusterSix(Replicated):
    """Redis Cluster, 3 primaries + 3 replicas; a replica takes over by ``CLUSTER FAILOVER FORCE``.

    ``FORCE`` promotes without the handshake that waits for the replica to
    catch up, while the old primary still runs: it answers writes until it
    hears of the newer epoch, then becomes a replica and drops what it took
    alone. The instances use the cluster client, which follows ``MOVED``.
    """

    name = "redis-cluster"
    backend_class = "anarchon_redis:RedisBackend"
    binaries = ("redis-server", "redis-cli")
    proxied = False
    kinds = ("force",)
    persistence_note = "3 primaries + 3 replicas, no AOF/RDB; CLUSTER FAILOVER FORCE on a replica"
    durable_note = RedisPair.durable_note

    def __init__(self, workdir: Path, durable: bool) -> None:
        super().__init__(workdir, durable)
        self.ports: list[int] = []
        self.procs: list[subprocess.Popen[bytes]] = []

    def _client(self, port: int) -> Any:
        import redis

        return redis.Redis(host="127.0.0.1", port=port, socket_timeout=5, decode_responses=True)

    def _start_node(self, i: int) -> None:
        d = self.workdir / f"node{i}"
        d.mkdir(parents=True, exist_ok=True)
        proc = self._popen(
            ["redis-server", "--port", str(self.ports[i]), "--bind", "127.0.0.1", "--dir", str(d), "--save", "",
             "--appendonly", "no", "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
             "--cluster-node-timeout", "2000", "--protected-mode", "no"],
            f"redis{i}.log",
        )  # fmt: skip
        self.procs.append(proc)
        _wait(lambda: _port_open(self.ports[i]), 15, f"redis cluster node {i}", proc)

    def start(self) -> None:
        while len(self.ports) < 6:
            self.ports.append(_cluster_port(set(self.ports)))
        for i in range(len(self.ports)):
            for attempt in range(3):  # a bus port in the ephemeral range can be taken between check and bind
                try:
                    self._start_node(i)
                    break
                except BrokerError:
                    if attempt == 2:
                        raise
                    self.ports[i] = _cluster_port(set(self.ports))
        created = subprocess.run(
            ["redis-cli", "--cluster", "create", *(f"127.0.0.1:{p}" for p in self.ports),
             "--cluster-replicas", "1", "--cluster-yes"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        if created.returncode != 0:
            raise BrokerError(f"redis-cli --cluster create failed: {created.stdout[-500:]}{created.stderr[-500:]}")
        _wait(self._settled, 60, "redis cluster state ok, every replica synced", None)
        self.port = self.ports[0]

    def _roles(self) -> dict[int, str]:
        client = self._client(self.ports[0])
        try:
            nodes = client.execute_command("CLUSTER NODES")
        finally:
            client.close()
        if isinstance(nodes, dict):  # redis-py parses CLUSTER NODES into {"host:port": {...}}
            return {int(k.rsplit(":", 1)[1].split("@")[0]): v["flags"] for k, v in nodes.items()}
        roles = {}
        for line in str(nodes).splitlines():
            fields = line.split()
            roles[int(fields[1].split("@")[0].rsplit(":", 1)[1])] = fields[2]
        return roles

    def _settled(self) -> bool:
        for port in self.ports:
            client = self._client(port)
            try:
                if client.cluster("INFO").get("cluster_state") != "ok":
                    return False
                info = client.info("replication")
                if info["role"] == "slave" and info.get("master_link_status") != "up":
                    return False
            except Exception:
                return False
            finally:
                client.close()
        return True

    def failover(self, kind: str, retarget: Retarget, seats: int) -> tuple[int, int]:
        replicas = [p for p, flags in sorted(self._roles().items()) if "slave" in flags]
        port = replicas[0]
        start = _now_ms()
        client = self._client(port)
        try:
            client.execute_command("CLUSTER FAILOVER FORCE")
            _wait(lambda: client.info("replication")["role"] == "master", 30, "CLUSTER FAILOVER FORCE", None)
        finally:
            client.close()
        end = _now_ms()
        _wait(self._settled, 60, "redis cluster settled after the failover", None)
        return start, end

    def kill(self) -> None:
        for proc in self.procs:
            _kill(proc)
        self.procs = []

    def backend_kwargs(self, port: int, namespace: str) -> dict[str, Any]:
        kwargs = RedisPair.backend_kwargs(self, self.port, namespace)  # type: ignore[arg-type]
        kwargs["url"] += "?cluster=true"
        return kwargs

    def describe(self) -> str:
        return f"redis cluster, 3 primaries + 3 replicas on {','.join(map(str, self.ports))}"


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


class RabbitMQCluster(Replicated):
    """Three RabbitMQ nodes joined into one cluster; the node the clients use (home of every gate) is killed.

    Gates are classic durable queues, as the seed says, declared through the
    node a client is connected to, which becomes their home. The failover
    kills that node (``SIGKILL``), moves the clients to the next node a
    second later, and starts the killed node again on its data. There is no
    durable option: quorum gates are not a mutex (see the anarchon-rabbitmq
    README and ``benchmarks/rabbitmq_gate_types.py``).
    """

    name = "rabbitmq"
    backend_class = "anarchon_rabbitmq:RabbitMQBackend"
    binaries = ("/usr/lib/rabbitmq/bin/rabbitmq-server",)
    kinds = ("node-kill",)
    has_durable = False
    persistence_note = "3 nodes, classic durable gate queues homed on the clients' node; that node SIGKILLed"

    def __init__(self, workdir: Path, durable: bool) -> None:
        super().__init__(workdir, durable)
        from .brokers import RabbitMQBroker

        self.nodes = [RabbitMQBroker(self.workdir / f"n{i}") for i in range(3)]
        self.current = 0

    def _ctl(self, i: int, *args: str) -> None:
        node = self.nodes[i]
        done = subprocess.run(node._argv(node.CTL, "-n", node.node, *args), capture_output=True, timeout=120)
        if done.returncode != 0:
            raise BrokerError(f"rabbitmqctl {' '.join(args)} on {node.node}: {done.stderr.decode()[-400:]}")

    def start(self) -> None:
        for node in self.nodes:
            node.start()
        for i in (1, 2):
            self._ctl(i, "stop_app")
            self._ctl(i, "join_cluster", self.nodes[0].node)
            self._ctl(i, "start_app")
        self.port = self.nodes[0].port

    def failover(self, kind: str, retarget: Retarget, seats: int) -> tuple[int, int]:
        old = self.current
        start = _now_ms()
        self.nodes[old].kill()
        time.sleep(DETECT_S)
        self.current = (old + 1) % len(self.nodes)
        self.port = self.nodes[self.current].port
        retarget(self.port, None)
        end = _now_ms()
        self.nodes[old].start()  # back on its data: its gates come back with it
        return start, end

    def kill(self) -> None:
        for node in self.nodes:
            with contextlib.suppress(Exception):
                node.kill()

    def backend_kwargs(self, port: int, namespace: str) -> dict[str, Any]:
        return self.nodes[0].backend_kwargs(port, namespace)

    def describe(self) -> str:
        return "rabbitmq cluster of 3: " + ", ".join(f"{n.node} :{n.port}" for n in self.nodes)


FAILOVER_BROKERS: dict[str, type[Replicated]] = {
    b.name: b for b in (RedisPair, RedisClusterSix, PostgresPair, NatsCluster, RabbitMQCluster)
}
