"""The fault suite's RabbitMQ: a private node, and a three-node cluster.

Found by :mod:`chaos.backends` through this backend's manifest (``[chaos]``);
the bases are :mod:`chaos.brokers` and :mod:`chaos.replicated`.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from chaos.brokers import Broker, BrokerError, _chown, _port_open, _wait, free_port
from chaos.replicated import DETECT_S, Replicated, Retarget, _now_ms


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie is dead for our purpose
    with contextlib.suppress(OSError):
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    return False


class RabbitMQBroker(Broker):
    """A second RabbitMQ node of its own (own node name, ports, Mnesia and log dirs)."""

    name = "rabbitmq"
    backend_class = "anarchon_rabbitmq:RabbitMQBackend"
    binaries = ("/usr/lib/rabbitmq/bin/rabbitmq-server",)
    persistence_note = "durable gate queues, persistent messages; restart = SIGKILL of the node"
    SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"
    CTL = "/usr/lib/rabbitmq/bin/rabbitmqctl"

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        self.node = f"chaos-{os.getpid()}-{random.randint(1000, 9999)}@localhost"
        self.dist_port = 0
        self._user = "rabbitmq" if os.geteuid() == 0 else None
        self._home = "/var/lib/rabbitmq" if self._user else os.environ.get("HOME", str(Path.home()))

    def _env(self) -> list[str]:
        return [
            f"HOME={self._home}",
            f"RABBITMQ_NODENAME={self.node}",
            f"RABBITMQ_DIST_PORT={self.dist_port}",
            f"RABBITMQ_MNESIA_BASE={self.workdir / 'mnesia'}",
            f"RABBITMQ_LOG_BASE={self.workdir / 'log'}",
            f"RABBITMQ_CONFIG_FILE={self.workdir / 'rabbitmq.conf'}",
            f"RABBITMQ_ENABLED_PLUGINS_FILE={self.workdir / 'enabled_plugins'}",
            f"RABBITMQ_PID_FILE={self.workdir / 'node.pid'}",
            "ERL_EPMD_ADDRESS=127.0.0.1",
        ]

    def _argv(self, *argv: str) -> list[str]:
        base = ["env", *self._env(), *argv]
        return ["runuser", "-u", self._user, "--", *base] if self._user else base

    def start(self) -> None:
        if not self.port:
            self.port = free_port()
            self.dist_port = free_port({self.port})
            (self.workdir / "rabbitmq.conf").write_text(
                f"listeners.tcp.1 = 127.0.0.1:{self.port}\nloopback_users = none\n"
            )
            (self.workdir / "enabled_plugins").write_text("[].\n")
            if self._user:
                _chown(self.workdir, self._user)
        self.proc = self._popen(self._argv(self.SERVER), "server.out")
        deadline = time.monotonic() + 90
        while True:
            if self.proc.poll() is not None:
                raise BrokerError(f"rabbitmq-server exited; see {self.workdir / 'server.out'}")
            done = subprocess.run(
                self._argv(self.CTL, "-n", self.node, "await_startup", "--timeout", "60"), capture_output=True
            )
            if done.returncode == 0 and _port_open(self.port):
                return
            if time.monotonic() > deadline:
                raise BrokerError(f"rabbitmq node {self.node} not up after 90 s; see {self.workdir}")
            time.sleep(0.5)

    def _beam_pid(self) -> int | None:
        with contextlib.suppress(OSError, ValueError):
            return int((self.workdir / "node.pid").read_text().strip())
        return None

    def kill(self) -> None:
        pid = self._beam_pid()
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            _wait(lambda: not _pid_alive(pid), 30, "rabbitmq node exit", None)
        if self.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(30)
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self.proc = None
        with contextlib.suppress(OSError):
            (self.workdir / "node.pid").unlink()
        _wait(lambda: not _port_open(self.port), 30, "rabbitmq port release", None)

    def backend_kwargs(self, port: int, namespace: str) -> dict[str, Any]:
        return {"url": f"amqp://guest:guest@127.0.0.1:{port}/", "prefix": f"{namespace}.", "slot_ttl_ms": 60_000}

    def describe(self) -> str:
        return f"rabbitmq node {self.node}"


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


#: The scenario's brokers, and the failover scenario's replicated referees.
BROKERS: tuple[type[Broker], ...] = (RabbitMQBroker,)
FAILOVER: tuple[type[Replicated], ...] = (RabbitMQCluster,)
