"""A private broker per scenario: started on free ports, restarted on demand, always stopped.

This module is the base every backend's broker subclasses; each backend's
brokers live in its own folder (``packages/<backend>/chaos/<name>.py``) and
:mod:`chaos.backends` finds them through its manifest.

Never the shared servers: a scenario kills its broker with ``SIGKILL`` (or
PostgreSQL's ``immediate`` stop, its equivalent) and starts it again on the
same data, which is what a crash looks like to the instances.

Ports come from below the kernel's ephemeral range: a port picked there can be
taken by any outgoing connection of a busy test machine before a slow broker
(RabbitMQ boots in 5-10 s) binds it.
"""

from __future__ import annotations

import glob
import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from anarchon_conformance import free_port

__all__ = ["Broker", "BrokerError", "free_port"]


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
