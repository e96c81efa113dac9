"""Whether the stream that decides every claim lives on one server of a cluster, read once at ``start()``.

With ``replicas=1`` (the default for a new stream) the stream and its memory
of claimed runs live on one server: while it is down every claim fails (the
claim is retried until the slot is too late, then skipped), and if its disk
is lost a claimed run can be claimed again. In a cluster of more than one
server that is rarely what was meant. The server count is the client's
server pool (the URLs given plus those the cluster announced); the stream's
cluster name says JetStream runs clustered.
"""

from __future__ import annotations

from nats.aio.client import Client
from nats.js import JetStreamContext

__all__ = ["single_copy_warning"]


async def single_copy_warning(nc: Client, js: JetStreamContext, stream: str) -> str | None:
    """A warning when ``stream`` has one replica on a JetStream cluster of several servers, else ``None``."""
    servers = len({(u.hostname, u.port) for u in nc.servers})
    if servers < 2:
        return None
    info = await js.stream_info(stream)
    if info.config.num_replicas not in (None, 1) or info.cluster is None or not info.cluster.name:
        return None
    return (
        f"stream {stream} has 1 replica on JetStream cluster {info.cluster.name!r} ({servers} servers known): "
        f"while server {info.cluster.leader} is down no claim can be decided, and its memory of claimed runs "
        "has no second copy. Pass replicas=3 (NatsBackend(..., replicas=3)) to keep it on three servers; see "
        "'When the server fails over' in the anarchon-nats README"
    )
