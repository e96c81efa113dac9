"""What each backend module gives the benchmarks: its raw primitive, instances, cleanup.

One module per backend under :mod:`benchmarks.backends` subclasses
:class:`Target`. Everything a run creates lives under one namespace (a key
prefix, a schema, a stream, a temporary file) so it can be removed at the end
and never meets the data of a test running at the same time.
"""

from __future__ import annotations

import abc
import importlib
import uuid
from dataclasses import dataclass, field
from typing import Any

from anarchon.backend import Backend

__all__ = ["BackendSpec", "RawClient", "Target", "new_namespace"]


def new_namespace() -> str:
    return f"bench{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class BackendSpec:
    """How to build one instance: a class path and keyword arguments (what a Fleet process needs too)."""

    class_path: str
    kwargs: dict[str, Any] = field(default_factory=dict)

    def build(self) -> Backend:
        module, _, name = self.class_path.partition(":")
        backend: Backend = getattr(importlib.import_module(module), name)(**self.kwargs)
        return backend


class RawClient(abc.ABC):
    """The one atomic operation a backend's claim rests on, issued with the backend's own client library."""

    #: What is measured, for the results table.
    description: str = ""

    @abc.abstractmethod
    async def open(self) -> None: ...

    @abc.abstractmethod
    async def once(self, key: str) -> bool:
        """Try to take ``key``; ``True`` when this call was first."""

    @abc.abstractmethod
    async def close(self) -> None: ...


class Target(abc.ABC):
    """One backend as the benchmarks see it."""

    name: str
    #: Sequential calls timed per operation (a full run; ``--quick`` takes a fifth).
    sequential_calls: int = 2000
    #: Processes in the end-to-end run (1 where the store lives in one process).
    fleet_instances: int = 3
    #: Every-second jobs of each end-to-end run: 1,000, plus a lighter load where 1,000 is past what the server does.
    fleet_jobs: tuple[int, ...] = (1000,)
    #: Job options for the end-to-end run besides ``jitter_ms=0``.
    fleet_options: dict[str, Any] = {}
    #: Anything the report should say about how this backend was run.
    notes: list[str] = []
    #: What "server CPU" in the soak covers (the processes :meth:`server_pids` names).
    server_note: str = "no server process (the store lives in the instances)"

    async def setup(self) -> None:  # noqa: B027 - most targets use the shared server as it is
        """Prepare what every measurement needs (a private server, for instance)."""

    async def teardown(self) -> None:  # noqa: B027
        """Undo :meth:`setup`."""

    async def fresh(self) -> None:  # noqa: B027
        """Before a heavy phase: a server in its first state where the target owns one."""

    @abc.abstractmethod
    async def unreachable(self) -> str | None:
        """Why the server cannot be used (the report says so), or ``None``."""

    @abc.abstractmethod
    def spec(self, ns: str) -> BackendSpec:
        """One instance in namespace ``ns``; every instance built from it shares the store."""

    def soak_spec(self, ns: str, history_size: int) -> BackendSpec:
        """The soak's backend: :meth:`spec`, with the backend's own history bound where it has one.

        The jobs' ``history_size`` bounds the runs each job keeps; a backend
        with a bound of its own (a broker's messages per subject, say)
        is given the same figure, so the soak reaches the trimmed steady state.
        """
        return self.spec(ns)

    def instances(self, ns: str, count: int) -> list[Backend]:
        """``count`` independent backend objects on one store (several instances)."""
        spec = self.spec(ns)
        return [spec.build() for _ in range(count)]

    @abc.abstractmethod
    def raw(self, ns: str) -> RawClient: ...

    async def cleanup(self, ns: str) -> None:  # noqa: B027 - nothing to remove by default
        """Remove everything created in ``ns``."""

    async def server_pids(self, ns: str) -> list[int]:
        """Server processes whose CPU and memory the soak reports (none: the store is in-process)."""
        return []

    async def footprint(self, ns: str) -> dict[str, float]:
        """What ``ns`` holds on the backend now (rows, keys, bytes), for the soak's size columns."""
        return {}

    async def referee_counters(self, ns: str) -> dict[str, float]:
        """The server's own counts of the operations it served so far (commands, transactions), by name.

        The fleet-size benchmark takes the difference of two readings and
        divides it by the runs between them; none where the store has no
        server to ask (its cost is then the instances' own CPU).
        """
        return {}

    @abc.abstractmethod
    async def versions(self) -> dict[str, str]:
        """Client library and server versions."""
