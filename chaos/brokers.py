"""A private broker per scenario: started on free ports, restarted on demand, always stopped.

Never the shared servers: a scenario kills its broker with ``SIGKILL`` (or
PostgreSQL's ``immediate`` stop, its equivalent) and starts it again on the
same data, which is what a crash looks like to the instances.

Ports come from below the kernel's ephemeral range: a port picked there can be
taken by any outgoing connection of a busy test machine before a slow broker
(RabbitMQ boots in 5-10 s) binds it.
"""

from __future__ import annotations

import contextlib
import glob
import os
import random
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from anarchon_conformance import free_port

__all__ = ["BROKERS", "Broker", "BrokerError", "free_port"]


class BrokerError(RuntimeError):
    """A private broker did not start; the message says which log to read."""


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _wait(predicate: Callable[[], bool], timeout: float, what: str, proc: subprocess.Popen[bytes] | None) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if proc is not None and proc.poll() is not None:
            raise BrokerError(f"{what}: the process exited with code {proc.returncode}")
        if time.monotonic() > deadline:
            raise BrokerError(f"{what}: not ready after {timeout:.0f} s")
        time.sleep(0.1)


def _chown(path: Path, user: str) -> None:
    shutil.chown(path, user, user)
    for p in path.rglob("*"):
        shutil.chown(p, user, user)


class Broker:
    """One broker process of the scenario's own.

    Subclasses say how to start it, what an instance passes to its backend
    (pointed at a proxy port), and whether a restart keeps every claim.
    """

    name: ClassVar[str]
    backend_class: ClassVar[str]
    #: Binaries that must exist for this backend's scenario to run.
    binaries: ClassVar[tuple[str, ...]] = ()
    #: A restart keeps every decided claim (fsync per write, or the equivalent).
    persistent: ClassVar[bool] = True
    #: What the scenario can do to this broker.
    restartable: ClassVar[bool] = True
    networked: ClassVar[bool] = True
    persistence_note: ClassVar[str] = ""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir / self.name
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @classmethod
    def available(cls) -> str | None:
        """``None`` when this backend can run here, else why not."""
        for binary in cls.binaries:
            if not (shutil.which(binary) or glob.glob(binary)):
                return f"{binary} not found"
        module = cls.backend_class.partition(":")[0]
        try:
            __import__(module)
        except ImportError as exc:
            return f"{module} is not importable ({exc})"
        return None

    def start(self) -> None:
        raise NotImplementedError

    def kill(self) -> None:
        """Crash the broker: ``SIGKILL``, no shutdown."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)
        self.proc = None

    def restart(self, down_s: float) -> float:
        """Kill, stay down ``down_s``, start again; returns seconds the broker was away."""
        began = time.monotonic()
        self.kill()
        time.sleep(down_s)
        self.start()
        return time.monotonic() - began

    def stop(self) -> None:
        self.kill()

    def backend_kwargs(self, port: int, namespace: str) -> dict[str, Any]:
        raise NotImplementedError

    def describe(self) -> str:
        return self.name

    def _popen(self, argv: list[str], log: str, **kwargs: Any) -> subprocess.Popen[bytes]:
        with open(self.workdir / log, "ab") as out:
            return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, **kwargs)


class SQLiteBroker(Broker):
    """No server: the "broker" is the database file; its faults are write-lock stalls."""

    name = "sqlite"
    backend_class = "anarchon_sqlite:SQLiteBackend"
    restartable = False
    networked = False
    persistence_note = "WAL file; a held write lock stands in for a cut (no network)"

    @property
    def path(self) -> Path:
        return self.workdir / "anarchon.sqlite3"

    def start(self) -> None:
        pass

    def backend_kwargs(self, port: int, namespace: str) -> dict[str, Any]:
        return {"path": str(self.path)}


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


def _pg_bin(tool: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{tool}"))
    return found[-1] if found else (shutil.which(tool) or tool)


class PostgresBroker(Broker):
    name = "postgres"
    backend_class = "anarchon_postgres:PostgresBackend"
    binaries = ("/usr/lib/postgresql/*/bin/initdb",)
    persistence_note = "fsync on, synchronous_commit on; restart = pg_ctl stop -m immediate (a crash)"

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        self.data = self.workdir / "data"
        self._user = "postgres" if os.geteuid() == 0 else None

    def _as_user(self, argv: list[str]) -> list[str]:
        return ["runuser", "-u", self._user, "--", *argv] if self._user else argv

    def start(self) -> None:
        if self._user:
            shutil.chown(self.workdir, self._user, self._user)
        if not self.data.exists():
            subprocess.run(
                self._as_user([_pg_bin("initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync"]),
                check=True, capture_output=True,
            )  # fmt: skip
        self.port = self.port or free_port()
        opts = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.workdir} -c fsync=on "
            "-c synchronous_commit=on -c max_connections=200"
        )
        subprocess.run(
            self._as_user([_pg_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.workdir / "pg.log"), "-o", opts,
                           "-w", "-t", "60", "start"]),
            check=True, capture_output=True,
        )  # fmt: skip

    def kill(self) -> None:
        if self.data.exists() and (self.data / "postmaster.pid").exists():
            subprocess.run(
                self._as_user([_pg_bin("pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop"]),
                capture_output=True,
            )

    def backend_kwargs(self, port: int, namespace: str) -> dict[str, Any]:
        return {"dsn": f"postgresql://postgres@127.0.0.1:{port}/postgres", "schema": namespace.replace("-", "_")}


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


BROKERS: dict[str, type[Broker]] = {
    b.name: b for b in (SQLiteBroker, RedisBroker, PostgresBroker, RabbitMQBroker, NatsBroker)
}
