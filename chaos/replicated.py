"""Replicated referees that fail over: a primary and its replica, or a cluster, of the scenario's own.

Each one is started on free ports in a temp dir, failed over on demand, and
stopped in ``finally``. Where clients reach one address (Redis primary with a
replica, PostgreSQL with a streaming standby) the seats' proxies stand in for
what a production client follows (Sentinel, a virtual IP, DNS): a failover
points them at the promoted server and cuts their links. Where clients know
every node (Redis Cluster, a broker cluster) no proxy sits in between.

The base is here; each backend's replicated referees live in its own folder
(``packages/<backend>/chaos/<name>.py``), found by :mod:`chaos.backends`.

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
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from .brokers import Broker

__all__ = ["DETECT_S", "LAG_S", "Replicated"]

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


def _kill(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is not None and proc.poll() is None:
        with contextlib.suppress(OSError):
            proc.kill()
        proc.wait(10)
