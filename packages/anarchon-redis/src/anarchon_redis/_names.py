"""Key names: one hash tag per job, so a job's keys live on one cluster node.

Every key of job ``sync`` under prefix ``cron:`` carries the hash tag
``{sync}`` (``cron:{sync}:state``, ``cron:{sync}:runs`` …), so the scripts
that touch them run unchanged on Redis Cluster. Job names are checked by the
core (``^[A-Za-z0-9_-]{1,100}$``); the prefix is checked here, since braces
in it would move the hash tag and glob characters would break cleanup scans.

The keys of concurrency groups carry the heartbeat key's whole name as their
tag (``cron:{cron:instances}:groups``): Redis Cluster hashes a tag as it
hashes a key without one, so they share the heartbeats' slot, and the
``places`` script reads each holder's record in the step that hands out places.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from anarchon.groups import check_group_name

__all__ = ["PREFIX_PATTERN", "GroupKeys", "JobKeys", "Keyspace", "check_prefix", "run_id"]

PREFIX_PATTERN = re.compile(r"[A-Za-z0-9_.:/-]{1,64}")


def check_prefix(prefix: object) -> str:
    if not isinstance(prefix, str) or not PREFIX_PATTERN.fullmatch(prefix):
        raise ValueError(
            f"prefix={prefix!r} is not allowed: use 1 to 64 letters, digits or '_', '.', ':', '/', '-' "
            "(no braces, which would break the per-job hash tag on Redis Cluster, and no spaces or glob "
            "characters), for example prefix='cron:' or prefix='myapp:cron:'"
        )
    return prefix


@dataclass(frozen=True)
class JobKeys:
    """The four keys of one job.

    ``state`` is a hash (``mark``, ``won``, ``fencing``); ``runs`` a hash of run id to
    JSON record; ``order`` a sorted set of run ids by slot (history order);
    ``live`` a sorted set of the ids of running runs by lease expiry.
    """

    state: str
    runs: str
    order: str
    live: str


@functools.lru_cache(maxsize=65_536)
def _job_keys(prefix: str, name: str) -> JobKeys:
    tag = f"{prefix}{{{name}}}:"
    return JobKeys(state=tag + "state", runs=tag + "runs", order=tag + "order", live=tag + "live")


@dataclass(frozen=True)
class GroupKeys:
    """The four keys of one concurrency group (see ``lua/places.lua``).

    ``places`` is a hash of entry id (``<job> <slot_ms> <0|1 manual>``) to
    ``<instance> <token>``; ``running`` the set of the ids that hold a place;
    ``waiting`` a sorted set of the others by slot, in the order places go;
    ``holders`` a sorted set of ``<instance> <id>`` (score 0), each holder's
    entries one range of it, so a dead holder's are found without a scan.
    """

    places: str
    waiting: str
    running: str
    holders: str


@functools.lru_cache(maxsize=4096)
def _group_keys(prefix: str, name: str) -> GroupKeys:
    tag = f"{prefix}{{{prefix}instances}}:group:{check_group_name(name)}:"  # a brace in it would move the tag
    return GroupKeys(tag + "places", tag + "waiting", tag + "running", tag + "holders")


@dataclass(frozen=True)
class Keyspace:
    prefix: str

    def job(self, name: str) -> JobKeys:
        """The job's keys, built once per job: every claim, renewal and finish asks for them."""
        return _job_keys(self.prefix, name)

    @property
    def hint(self) -> str:
        """Sorted set of job name to its earliest lease expiry: where take-over looks first."""
        return f"{self.prefix}leases"

    @property
    def instances(self) -> str:
        """Sorted set of instance id to alive-until (liveness): one key, its own slot on a cluster."""
        return f"{self.prefix}instances"

    @property
    def registry(self) -> tuple[str, str, str]:
        """The fleet registry's keys (heads, jobs, seen), under one hash tag: one slot on a cluster."""
        tag = f"{self.prefix}{{registry}}:"
        return tag + "heads", tag + "jobs", tag + "seen"

    @property
    def schedules(self) -> tuple[str, str, str, str, str]:
        """Stored schedules' keys (revision, records, changes, removed, logs), under one hash tag."""
        tag = f"{self.prefix}{{schedules}}:"
        return tag + "revision", tag + "records", tag + "changes", tag + "removed", tag + "logs"

    @property
    def schedules_channel(self) -> str:
        """The channel each stored-schedule change is published on (its revision); the same hash tag as the keys."""
        return f"{self.prefix}{{schedules}}:changed"

    @property
    def decided_channel(self) -> str:
        """Where claim.lua tells of each scheduled slot it decided: the prefix, then ``decided`` (no hash tag)."""
        return f"{self.prefix}decided"

    @property
    def control_channel(self) -> str:
        """Where each pause, resume and run request is published (the job's name): the prefix, then ``control``."""
        return f"{self.prefix}control"

    @property
    def audit(self) -> tuple[str, str]:
        """The audit trail's keys (the stream, its id counter), under one hash tag: one slot on a cluster."""
        tag = f"{self.prefix}{{audit}}:"
        return tag + "trail", tag + "counter"

    @property
    def groups(self) -> tuple[str, str]:
        """The groups' limits (hash of group to max_running) and the set of groups with entries.

        Tagged with the heartbeat key's name, as every group key (:meth:`group`): one slot with it.
        """
        tag = f"{self.prefix}{{{self.instances}}}:"
        return tag + "groups:limits", tag + "groups:named"

    def group(self, name: str) -> GroupKeys:
        """One concurrency group's keys, in the heartbeat key's slot; the name is checked (it becomes a key)."""
        return _group_keys(self.prefix, name)

    @property
    def groups_channel(self) -> str:
        """Where a freed place or a set limit is told (the groups' names): the prefix, then ``groups``."""
        return f"{self.prefix}groups"

    @property
    def pattern(self) -> str:
        """Glob matching every key of this prefix (the prefix has no glob characters)."""
        return f"{self.prefix}*"


def run_id(slot_ms: int, manual: bool) -> str:
    """Scheduled and manual runs of one slot are kept apart, as the contract says."""
    return f"{slot_ms}m" if manual else str(slot_ms)
