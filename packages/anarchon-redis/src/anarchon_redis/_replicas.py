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

``min_replicas="auto"``, the default, waits for one replica while the server
has one connected, or had one within :data:`STICKY_S` (``INFO replication``,
read at start, every :data:`WATCH_PERIOD_S` and after any ``WAIT`` that fell
short), and for none otherwise: with the old default of 0, a replica promoted after a crash lacked
the last claims and 61 slots ran twice in the failover scenario; a fixed 1 on
a server left without a replica made every claim unknown. On a cluster the
same holds per primary (``INFO replication`` of every primary): a claim's
``WAIT`` asks its own node for one replica while that node has or just had
one, and for none on a node that never had one. Not waiting on a cluster ran
4 slots twice across forced failovers (``CLUSTER FAILOVER FORCE``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from typing import Any, Union

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from ._sentinel import follow_primary

__all__ = [
    "ClusterReplicaWatch",
    "Command",
    "ReplicaWatch",
    "pipeline",
]

#: How often ``auto`` reads how many replicas the server has.
WATCH_PERIOD_S = 1.0
#: How long ``auto`` keeps waiting for a replica after the server's last one left (a switch-over's length).
STICKY_S = 60.0


class ReplicaWatch:  # one server; ClusterReplicaWatch below keeps one per primary
    """How many replicas ``min_replicas="auto"`` waits for: 1 while the server has or just had one, else 0.

    "Just had" matters: a replica promoted in a switch-over leaves the old
    primary without a replica while some clients still write to it, and not
    waiting then ran 35 slots twice in the failover scenario. So a replication
    history (``master_replid``) once seen with a replica keeps claims waiting
    for :data:`STICKY_S` after the last one left; a promoted replica starts a
    new history and waits only once a replica of its own connects.
    """

    def __init__(self) -> None:
        self.connected = 0
        self._replid = ""
        #: Each replication history seen with a replica, and when one was last seen connected to it.
        self._seen: dict[str, float] = {}
        self._checked: float | None = None
        self._task: asyncio.Task[None] | None = None

    def wait_for(self, client: Client) -> int:
        """The replicas to wait for now; reads the server again (in the background) when due."""
        now = time.monotonic()
        due = self._checked is None or now - self._checked > WATCH_PERIOD_S
        if due and (self._task is None or self._task.done()):
            self._task = asyncio.get_running_loop().create_task(self.refresh(client))
        return self.needed(now)

    def needed(self, now: float) -> int:
        """1 while the server has a replica or had one within ``STICKY_S`` in its current history, else 0."""
        last = self._seen.get(self._replid)
        return 1 if self.connected or (last is not None and now - last < STICKY_S) else 0

    def stale(self) -> None:
        """A ``WAIT`` fell short: the replica may be gone (promoted, stopped); read the server at the next call."""
        self._checked = None

    def excused(self, info: Any) -> bool:
        """Whether a ``WAIT`` that fell short asked too much: ``info`` is the same connection's ``INFO
        replication``, read right after it, and shows a primary that ``auto`` waits for no replica on.

        That is a replica promoted after its primary died (Sentinel): a new history that never had a
        replica. The watch still asked for one, learnt from the old primary; without this the first claims
        there were unknown, and each held its job's lease (``lease_ms``) with nothing run. The old
        primary of a switch-over is never excused: its history was seen with a replica (:data:`STICKY_S`).
        """
        if not isinstance(info, dict) or str(info.get("role", "")) != "master":
            return False
        self.learn(info)
        return self.needed(time.monotonic()) == 0

    async def refresh(self, client: Client) -> None:
        self._checked = time.monotonic()
        await follow_primary(client)  # through Sentinel: the primary it names now, not the one connected first
        try:
            info = await client.info("replication")
        except Exception:  # the claims themselves say what is wrong with the server
            return
        self.learn(info)

    def learn(self, info: dict[str, Any]) -> None:
        """Take one ``INFO replication`` answer; a replica's (a demoted primary's) teaches nothing.

        A connection left on a primary that Sentinel demoted reads the replica it became: no replicas
        and the new primary's history, which would stop the waits. Its writes fail (``READONLY``) and
        move it to the new primary; until the next read the claims wait as before.
        """
        if str(info.get("role", "master")) != "master":
            self._checked = None
            return
        self.connected = online(info)
        self._replid = str(info.get("master_replid", ""))
        if self.connected:
            self._seen[self._replid] = time.monotonic()


def online(info: dict[str, Any]) -> int:
    """The replicas that can acknowledge a ``WAIT``: ``state=online`` in ``INFO replication``.

    A replica still syncing counts in ``connected_slaves`` but cannot acknowledge anything until the
    primary sent its snapshot (5 s after it asked, by default: ``repl-diskless-sync-delay``); waiting for
    it made every claim unknown meanwhile, each holding its job's lease for ``lease_ms`` with nothing run.
    """
    replicas = [v for k, v in info.items() if k.startswith("slave") and k[5:].isdigit()]
    if not replicas or not all(isinstance(v, dict) for v in replicas):
        return int(info.get("connected_slaves", 0))
    return sum(1 for v in replicas if v.get("state") == "online")


class ClusterReplicaWatch:
    """``min_replicas="auto"`` on a cluster: a :class:`ReplicaWatch` per primary, by node name.

    A node not read yet (a primary met since the last read) waits for none until the next
    read, :data:`WATCH_PERIOD_S` at most: as a single server does before its first read.
    """

    def __init__(self) -> None:
        self.nodes: dict[str, ReplicaWatch] = {}
        self._checked: float | None = None
        self._task: asyncio.Task[None] | None = None

    def wait_for(self, client: Client) -> dict[str, int]:
        """The replicas each primary's ``WAIT`` asks for now, by node name (0: no ``WAIT``)."""
        now = time.monotonic()
        due = self._checked is None or now - self._checked > WATCH_PERIOD_S
        if due and (self._task is None or self._task.done()):
            self._task = asyncio.get_running_loop().create_task(self.refresh(client))
        return {name: watch.needed(now) for name, watch in self.nodes.items()}

    def stale(self) -> None:
        self._checked = None

    async def refresh(self, client: Client) -> None:
        self._checked = time.monotonic()
        try:
            assert isinstance(client, RedisCluster)
            infos = await client.info("replication", target_nodes=RedisCluster.PRIMARIES)
        except Exception:  # the claims themselves say what is wrong with the cluster
            return
        if not isinstance(infos, dict) or not all(isinstance(v, dict) for v in infos.values()):
            infos = {}
        for name, info in infos.items():
            self.nodes.setdefault(str(name), ReplicaWatch()).learn(info)


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
    client: Client,
    cluster: bool,
    commands: Sequence[Command],
    replicas: int | Mapping[str, int],
    timeout_ms: int,
    watch: ReplicaWatch | None = None,
) -> tuple[list[Any], list[bool]]:
    """Each command's reply, and whether its write reached ``replicas`` replicas (always true at 0).

    On a cluster ``replicas`` may be a count per node name (``auto``): a node that needs none sends no ``WAIT``.
    With ``watch`` (``auto`` on one server) ``INFO replication`` follows the ``WAIT`` on its connection, so a
    ``WAIT`` that fell short on a primary that needs no replica counts (:meth:`ReplicaWatch.excused`).
    """
    if not isinstance(client, RedisCluster):
        assert isinstance(replicas, int)
        pipe = client.pipeline(transaction=False)
        _queue(pipe, commands)
        if not replicas:
            return list(await pipe.execute(raise_on_error=False)), [True] * len(commands)
        pipe.execute_command("WAIT", replicas, timeout_ms)
        if watch is not None:
            pipe.execute_command("INFO", "replication")
        results = list(await pipe.execute(raise_on_error=False))
        info = results.pop() if watch is not None else None
        ok = _enough(results[-1], replicas) or (watch is not None and watch.excused(info))
        return results[:-1], [ok] * len(commands)
    cpipe = client.pipeline(transaction=False)
    _queue(cpipe, commands)
    homes = [_home(client, keys) for _, keys, _, _ in commands]
    per_node = replicas if isinstance(replicas, Mapping) else {name: replicas for name in homes if name is not None}
    if not any(per_node.get(name, 0) for name in homes if name is not None):
        return list(await cpipe.execute(raise_on_error=False)), [True] * len(commands)
    nodes = {name: client.get_node(node_name=name) for name in homes if name is not None and per_node.get(name, 0)}
    waited = [(name, node) for name, node in nodes.items() if node is not None]
    for name, node in waited:
        cpipe.execute_command("WAIT", per_node[name], timeout_ms, target_nodes=node)
    # No redirection: a script redirected after a failover ran on another connection than its WAIT.
    results = list(await cpipe.execute(raise_on_error=False, allow_redirections=False))
    acked = {
        name: _enough(ack, per_node[name]) for (name, _), ack in zip(waited, results[len(commands) :], strict=True)
    }
    reached = [
        home is not None and (acked.get(home, False) if per_node.get(home, 0) else True) and _home(client, keys) == home
        for home, (_, keys, _, _) in zip(homes, commands, strict=True)
    ]
    return results[: len(commands)], reached
