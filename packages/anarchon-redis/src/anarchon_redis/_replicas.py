"""``min_replicas``: a pipeline of scripts followed by ``WAIT`` on the same connection.

Redis replicates asynchronously: a claim the primary answered can be missing
on the replica promoted after it, and then a second instance wins the same
slot there. ``WAIT n timeout`` blocks until the writes *of the connection it
is sent on* reached ``n`` replicas, so it must follow the scripts on that
connection: the end of the same pipeline (one connection on one server; on a
cluster one ``WAIT`` per node, pinned to that node). A ``WAIT`` that answers
fewer than ``n``, an error, or a script redirected to another node (its write
was not the one waited for) means the write is not known to be replicated:
the caller counts that claim as unknown, which never runs. ``WAIT`` narrows
the window; it does not make Redis strongly consistent (a failover can still
pick a replica that had not acknowledged yet, when fewer than ``n`` were asked
for than exist).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Union

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

__all__ = ["Command", "pipeline"]

Client = Union["Redis", "RedisCluster"]
#: (script body or SHA, keys, args, whether ``body`` is the source)
Command = tuple[str, list[str], list[Any], bool]


def _enough(ack: Any, replicas: int) -> bool:
    return isinstance(ack, int) and not isinstance(ack, bool) and ack >= replicas


def _queue(pipe: Any, commands: Sequence[Command]) -> None:
    for body, keys, args, full in commands:
        # The cluster pipeline blocks its evalsha() method but routes the raw command by its keys.
        pipe.execute_command("EVAL" if full else "EVALSHA", body, len(keys), *keys, *args)


def _home(client: RedisCluster, keys: list[str]) -> str | None:
    node = client.get_node_from_key(keys[0])
    return node.name if node is not None else None


async def pipeline(
    client: Client, cluster: bool, commands: Sequence[Command], replicas: int, timeout_ms: int
) -> tuple[list[Any], list[bool]]:
    """Each command's reply, and whether its write reached ``replicas`` replicas (always true at 0)."""
    if not isinstance(client, RedisCluster):
        pipe = client.pipeline(transaction=False)
        _queue(pipe, commands)
        if not replicas:
            return list(await pipe.execute(raise_on_error=False)), [True] * len(commands)
        pipe.execute_command("WAIT", replicas, timeout_ms)
        results = list(await pipe.execute(raise_on_error=False))
        return results[:-1], [_enough(results[-1], replicas)] * len(commands)
    cpipe = client.pipeline(transaction=False)
    _queue(cpipe, commands)
    if not replicas:
        return list(await cpipe.execute(raise_on_error=False)), [True] * len(commands)
    homes = [_home(client, keys) for _, keys, _, _ in commands]
    nodes = {name: client.get_node(node_name=name) for name in homes if name is not None}
    waited = [(name, node) for name, node in nodes.items() if node is not None]
    for _, node in waited:
        cpipe.execute_command("WAIT", replicas, timeout_ms, target_nodes=node)
    # No redirection: a script redirected after a failover ran on another connection than its WAIT.
    results = list(await cpipe.execute(raise_on_error=False, allow_redirections=False))
    acked = {name: _enough(ack, replicas) for (name, _), ack in zip(waited, results[len(commands) :], strict=True)}
    reached = [
        home is not None and acked.get(home, False) and _home(client, keys) == home
        for home, (_, keys, _, _) in zip(homes, commands, strict=True)
    ]
    return results[: len(commands)], reached
