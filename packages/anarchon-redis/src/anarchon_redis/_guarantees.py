"""What a Redis server promises (``capabilities.guarantees``, see :mod:`anarchon.guarantees`).

A claim is a key written by a script; it is as safe as that key:

* a **replica** (``role:slave``) refuses every write: the URL must name the primary;
* a server that **keeps nothing on disk** (no AOF, no snapshots: how Debian's
  and many containers' Redis runs) forgets every claim when it restarts: the
  runs in flight lose their records, and the instances that claimed before
  refuse about one slot per job rather than risk running it twice
  (``_known.py``; fencing tokens go on from the clock); snapshots alone lose
  what came after the last one, alike; an AOF keeps all but the last second
  (``appendfsync everysec``);
* an **eviction policy** other than ``noeviction`` drops keys when memory is
  full, a claim record among them;
* **replicas** that claims do not wait for (``min_replicas=0``) can lack the
  last claims when one of them is promoted: those slots run twice.

``INFO`` on each primary (on a cluster, every primary) and ``CONFIG GET`` for
``save`` and ``appendfsync``; a managed Redis that refuses ``CONFIG`` gets a
finding saying what could not be read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from redis.asyncio.cluster import RedisCluster
from redis.exceptions import RedisError

from anarchon.backend import Finding

__all__ = ["GuaranteesMixin", "node_findings"]

_REPLICAS_FIX = "set min_replicas=1 (?min_replicas=1 in the URL): each claim then waits for a replica with WAIT"


def _replicas(info: dict[str, Any], min_replicas: int | None) -> Finding:
    n = int(info.get("connected_slaves", 0))
    if min_replicas is None and n:
        return Finding(
            "replicas",
            True,
            f"each claim waits until one of {n} replica(s) has it (min_replicas auto): a promoted replica that "
            "acknowledged holds every claim",
        )
    min_replicas = min_replicas or 0
    if min_replicas and n < min_replicas:
        return Finding(
            "replicas",
            False,
            f"claims wait for {min_replicas} replica(s) but {n} are connected: every claim is unknown and no slot runs",
            "connect the replicas, or lower min_replicas",
        )
    if min_replicas:
        return Finding(
            "replicas",
            True,
            f"each claim waits until {min_replicas} of {n} replica(s) have it: a promoted replica that "
            "acknowledged holds every claim",
        )
    if n:
        return Finding(
            "replicas",
            False,
            f"{n} replica(s), and claims do not wait for them: a replica promoted after a crash can lack the "
            "last claims, and those slots then run twice",
            _REPLICAS_FIX,
        )
    return Finding("replicas", True, "no replica: nothing to fail over to, so nothing runs twice on a failover")


def _persistence(info: dict[str, Any], config: dict[str, str] | str) -> Finding:
    if int(info.get("aof_enabled", 0)):
        fsync = config.get("appendfsync") if isinstance(config, dict) else None
        if fsync == "no":
            return Finding(
                "persistence",
                False,
                "appendonly with appendfsync no: the OS writes the log when it likes (about every 30 s), and a "
                "crash of the host loses the claims since",
                "set appendfsync everysec",
            )
        return Finding(
            "persistence",
            True,
            f"appendonly (appendfsync {fsync or 'as configured'}): a restart keeps every claim but at most "
            "the last second's",
        )
    if isinstance(config, str):
        return Finding(
            "persistence",
            False,
            f"no append-only file, and whether snapshots are taken could not be read ({config}): a restart "
            "loses at least the claims since the last snapshot and the records of the runs in flight, and "
            "about one slot per job is not run",
            "set appendonly yes (appendfsync everysec)",
        )
    if config.get("save"):
        return Finding(
            "persistence",
            False,
            f"snapshots only (save {config['save']}): a restart goes back to the last snapshot, the records "
            "of the runs in flight are lost, and about one slot per job is not run (refused rather than "
            "risk running it twice)",
            "set appendonly yes (appendfsync everysec)",
        )
    return Finding(
        "persistence",
        False,
        "keeps nothing on disk (no append-only file, no snapshots): a restart empties it, the records of "
        "the runs in flight are lost, and about one slot per job is not run (refused rather than risk "
        "running it twice)",
        "set appendonly yes (appendfsync everysec)",
    )


def _eviction(info: dict[str, Any]) -> Finding:
    policy = str(info.get("maxmemory_policy", "noeviction"))
    if policy == "noeviction" or not int(info.get("maxmemory", 0)):
        return Finding("eviction", True, "no key is evicted: a full server refuses writes (claims fail) instead")
    return Finding(
        "eviction",
        False,
        f"maxmemory-policy {policy}: when memory is full Redis drops keys, a claim's among them, and that slot "
        "can run again",
        "set maxmemory-policy noeviction (a full server then refuses claims instead of forgetting them)",
    )


def node_findings(info: dict[str, Any], config: dict[str, str] | str, min_replicas: int | None) -> list[Finding]:
    """The findings for one server's ``INFO`` and ``CONFIG GET`` answers (the error text if refused)."""
    if info.get("role") == "slave":
        return [
            Finding(
                "role",
                False,
                "this server is a replica (read-only): every claim fails",
                "point the URL at the primary, or at an address that follows it across a failover",
            )
        ]
    return [_replicas(info, min_replicas), _persistence(info, config), _eviction(info)]


async def _config(client: Any, **target: Any) -> dict[str, str] | str:
    try:
        save = await client.config_get("save", **target)
        fsync = await client.config_get("appendfsync", **target)
    except RedisError as exc:
        return f"CONFIG GET: {exc}"
    return {**save, **fsync}


class GuaranteesMixin:
    """``guarantees()`` for :class:`~anarchon_redis.RedisBackend`."""

    min_replicas: int | None

    if TYPE_CHECKING:  # the backend's own, used here

        def _redis(self) -> Any: ...

    async def guarantees(self) -> list[Finding]:
        client = self._redis()
        if not isinstance(client, RedisCluster):
            return node_findings(await client.info(), await _config(client), self.min_replicas)
        out = []
        for node in client.get_primaries():  # "auto" waits per primary, as on one server (_replicas.py)
            info = await client.info(target_nodes=node)
            for f in node_findings(info, await _config(client, target_nodes=node), self.min_replicas):
                out.append(Finding(f.topic, f.ok, f"node {node.name}: {f.detail}", f.fix))
        return out
