"""The fault suite's Redis: a private redis-server, a primary with its replica (behind proxies, or
followed through three Sentinels), and a six-node cluster.

Found by :mod:`chaos.backends` through this backend's manifest (``[chaos]``);
the bases are :mod:`chaos.brokers` and :mod:`chaos.replicated`.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

from chaos.brokers import Broker, BrokerError, _port_open, _wait, free_port
from chaos.replicated import DETECT_S, LAG_S, Replicated, Retarget, _kill, _now_ms


class RedisBroker(Broker):
    name = "redis"
    backend_class = "anarchon_redis:RedisBackend"
    binaries = ("redis-server",)
    persistence_note = "AOF, appendfsync always (without persistence a restart forgets every claim and lease)"

    def start(self) -> None:
        self.port = self.port or free_port()
        self.proc = self._popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.workdir),
             "--appendonly", "yes", "--appendfsync", "always", "--save", "", "--protected-mode", "no"],
            "redis.log",
        )  # fmt: skip
        _wait(lambda: _port_open(self.port), 15, "redis-server", self.proc)
        _wait(self._loaded, 15, "redis-server AOF load", self.proc)

    def _loaded(self) -> bool:
        import redis

        client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=1)
        try:
            return bool(client.ping())
        except redis.RedisError:
            return False
        finally:
            client.close()

    def backend_kwargs(self, port: int, namespace: str) -> dict[str, Any]:
        return {"url": f"redis://127.0.0.1:{port}/0", "prefix": f"{namespace}:"}


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
        """Return once node ``i``, a primary, has a replica that acknowledged its writes."""
        import redis

        client = self._client(i)
        try:
            deadline = time.monotonic() + 20
            while True:
                try:
                    if client.wait(1, 1000) >= 1:
                        return
                except redis.ResponseError as exc:
                    # Sentinel names the new primary before the node has left its replica role:
                    # WAIT is refused on a replica, so wait for the promotion to land.
                    if "replica" not in str(exc):
                        raise
                    time.sleep(0.1)
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


SERVICE = "anarchon"


class RedisSentinel(RedisPair):
    """A primary, its replica and three Sentinels; the instances use ``redis+sentinel://`` (no proxy).

    ``crash`` kills the primary (``SIGKILL``) and Sentinel promotes the replica once it is down for
    ``down-after-milliseconds`` (1 s) and elected; the old one comes back as the new one's replica.
    ``switch`` is ``SENTINEL FAILOVER``: the old primary keeps serving its connected clients until
    Sentinel demotes it. The window ends when every Sentinel names the new primary: the clients find
    it themselves.
    """

    name = "redis-sentinel"
    proxied = False
    persistence_note = (
        "primary + 1 replica + 3 Sentinels (down-after 1 s, failover-timeout 3 s), asynchronous replication, "
        "no AOF/RDB; clients follow redis+sentinel://"
    )

    def __init__(self, workdir: Path, durable: bool) -> None:
        super().__init__(workdir, durable)
        self.sentinel_ports: list[int] = []
        self.sentinels: list[subprocess.Popen[bytes]] = []

    def _sentinel(self, port: int) -> Any:
        import redis

        return redis.Redis(host="127.0.0.1", port=port, socket_timeout=2, decode_responses=True)

    def start(self) -> None:
        super().start()
        taken = set(self.ports)
        for i in range(3):
            port = free_port(taken)
            taken.add(port)
            d = self.workdir / f"sentinel{i}"
            shutil.rmtree(d, ignore_errors=True)
            d.mkdir(parents=True)
            (d / "sentinel.conf").write_text(
                f"port {port}\nbind 127.0.0.1\ndir {d}\n"
                f"sentinel monitor {SERVICE} 127.0.0.1 {self.ports[0]} 2\n"
                f"sentinel down-after-milliseconds {SERVICE} 1000\n"
                f"sentinel failover-timeout {SERVICE} 3000\n"
            )
            self.sentinel_ports.append(port)
            proc = self._popen(["redis-server", str(d / "sentinel.conf"), "--sentinel"], f"sentinel{i}.log")
            self.sentinels.append(proc)
            _wait(lambda port=port: _port_open(port), 15, f"sentinel {i}", proc)
        _wait(self._settled, 60, "every Sentinel sees the other two and a healthy replica", None)

    def _primary_port(self) -> int | None:
        """The primary's port when every Sentinel names the same one."""
        import redis

        ports = set()
        for port in self.sentinel_ports:
            client = self._sentinel(port)
            try:
                address = client.sentinel_get_master_addr_by_name(SERVICE)
                ports.add(int(address[1]) if address else None)
            except redis.RedisError:
                return None
            finally:
                client.close()
        return ports.pop() if len(ports) == 1 else None

    def _settled(self) -> bool:
        import redis

        if self._primary_port() is None:
            return False
        for port in self.sentinel_ports:
            client = self._sentinel(port)
            try:
                master = client.sentinel_master(SERVICE)
                replicas = client.sentinel_slaves(SERVICE)
            except redis.RedisError:
                return False
            finally:
                client.close()
            healthy = [r for r in replicas if not r["is_sdown"] and r.get("master-link-status") == "ok"]
            if master["num-other-sentinels"] < 2 or master["is_sdown"] or master["is_odown"] or len(healthy) != 1:
                return False
        return True

    def failover(self, kind: str, retarget: Retarget, seats: int) -> tuple[int, int]:
        old, new = self.primary, 1 - self.primary
        start = _now_ms()
        if kind == "crash":
            _kill(self.procs[old])
            self.procs[old] = None
        else:
            client = self._sentinel(self.sentinel_ports[0])
            try:
                client.execute_command("SENTINEL", "FAILOVER", SERVICE)
            finally:
                client.close()
        _wait(lambda: self._primary_port() == self.ports[new], 60, "Sentinel promotes the replica", None)
        end = _now_ms()
        self.primary, self.port = new, self.ports[new]
        if kind == "crash":
            self._start_node(old, self.port)
        self._synced(new)
        _wait(self._settled, 60, "the old primary a healthy replica in every Sentinel's view", None)
        return start, end

    def kill(self) -> None:
        for proc in self.sentinels:
            _kill(proc)
        self.sentinels = []
        super().kill()

    def backend_kwargs(self, port: int, namespace: str) -> dict[str, Any]:
        hosts = ",".join(f"127.0.0.1:{p}" for p in self.sentinel_ports)
        kwargs: dict[str, Any] = {"url": f"redis+sentinel://{hosts}/{SERVICE}/0", "prefix": f"{namespace}:"}
        if self.durable:
            kwargs.update(min_replicas=1, replica_timeout_ms=250)
        return kwargs

    def describe(self) -> str:
        primary, replica = self.ports[self.primary], self.ports[1 - self.primary]
        return f"redis primary :{primary} + replica :{replica}, Sentinels :{','.join(map(str, self.sentinel_ports))}"


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


#: The scenario's brokers, and the failover scenario's replicated referees.
BROKERS: tuple[type[Broker], ...] = (RedisBroker,)
FAILOVER: tuple[type[Replicated], ...] = (RedisPair, RedisSentinel, RedisClusterSix)
