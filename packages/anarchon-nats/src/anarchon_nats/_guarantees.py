"""What a JetStream stream promises (``capabilities.guarantees``, see :mod:`anarchon.guarantees`).

Every claim is a message on one stream, deduplicated by its id within the
duplicate window; the stream is the referee's whole memory. So what it
promises is the stream's: on **memory storage** a server restart forgets every
claim; with **one replica** on a cluster of several servers it has no second
copy and stops deciding while its server is down (``replicas=3`` keeps it on
three); on one server, file storage keeps every claim across a restart of
the server, and a crash of its host can lose what the server had not yet
synced to disk (``sync_interval``, two minutes by default; a client cannot
read it, so it is stated, not judged). Read with one ``stream_info``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nats.js.api import StorageType

from anarchon.backend import Finding

if TYPE_CHECKING:
    from nats.aio.client import Client
    from nats.js import JetStreamContext

__all__ = ["GuaranteesMixin", "stream_findings"]


async def stream_findings(nc: Client, js: JetStreamContext, stream: str) -> list[Finding]:
    """The findings for ``stream`` as the server holds it now."""
    info = await js.stream_info(stream)
    replicas = info.config.num_replicas or 1
    servers = len({(u.hostname, u.port) for u in nc.servers})
    clustered = info.cluster is not None and bool(info.cluster.name)
    out: list[Finding] = []
    if info.config.storage == StorageType.MEMORY:
        out.append(
            Finding(
                "storage",
                False,
                f"stream {stream} is kept in memory: a server restart forgets every claim, and slots within the "
                "duplicate window can then run again",
                f"recreate stream {stream} with file storage (delete it; the backend creates it on file)",
            )
        )
    else:
        out.append(Finding("storage", True, f"stream {stream} is on file storage: a server restart keeps every claim"))
    if replicas >= 3:
        out.append(
            Finding(
                "replicas",
                True,
                f"stream {stream} has {replicas} replicas: a claim counts once a majority has it, so the loss of "
                "one server neither forgets a claim nor stops deciding",
            )
        )
    elif clustered and servers > 1:
        assert info.cluster is not None
        out.append(
            Finding(
                "replicas",
                False,
                f"stream {stream} has {replicas} replica(s) on JetStream cluster {info.cluster.name!r} ({servers} "
                "servers known): while its server is down no claim is decided, and a lost disk forgets claims",
                "pass replicas=3 (?replicas=3 in the URL); see 'When the server fails over' in the "
                "anarchon-nats README",
            )
        )
    else:
        out.append(
            Finding(
                "replicas",
                True,
                f"one server holds stream {stream}: a restart keeps every claim; a crash of its host can lose the "
                "claims it had not synced (sync_interval, 2 min by default; 'sync_interval: always' keeps them)",
            )
        )
    return out


class GuaranteesMixin:
    """``guarantees()`` for :class:`~anarchon_nats.NatsBackend`."""

    stream: str

    if TYPE_CHECKING:  # the backend's own, used here

        def _jetstream(self) -> JetStreamContext: ...

        _nc: Client | None
        _absent: bool
        replicas: int | None

    async def guarantees(self) -> list[Finding]:
        if self._absent:  # a look (anarchon check) before the fleet's first start
            return [
                Finding(
                    "storage",
                    True,
                    f"stream {self.stream} does not exist yet: the first instance creates it on file storage with "
                    f"{self.replicas or 1} replica(s); check again once it runs",
                )
            ]
        js = self._jetstream()
        assert self._nc is not None
        return await stream_findings(self._nc, js, self.stream)
