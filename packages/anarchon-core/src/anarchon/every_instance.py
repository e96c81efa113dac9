"""Jobs for every instance: one run per live instance per slot, each claimed and recorded for its instance.

Per-pod housekeeping (rotate local files, refresh a local cache) wants one
run on each live instance per slot, and a record of it, so that a pod that
missed one shows. ``every_instance=True`` gives that without a second
scheduler: each instance runs the job under a name of its own,
``<name>--<instance tag>`` (:func:`instance_job_name`), which the backend
keys, claims, leases and records like any job. So:

* each instance claims each slot of its own copy, and a process restarted
  with the same ``instance_id`` finds the slots it already ran decided: it
  never runs one twice;
* no other instance ever claims that copy (none defines it): a dead
  instance's runs are not taken over by another, and its missed slots are
  missed for it alone;
* history keeps each instance's runs apart, and :func:`instance_runs` (``anarchon
  every-instance NAME``) lays the live instances' recent slots side by side.

The job's function sees ``ctx.job.name`` as the instance's copy's name.
Pause, resume and trigger address a copy by that name too.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .errors import InvalidJobError

if TYPE_CHECKING:
    from .backend import Backend
    from .job import Job
    from .run import Run

__all__ = ["InstanceSlot", "fit", "instance_job_name", "instance_runs", "per_instance"]

#: Between a job's name and its instance's tag in the copy's name.
SEPARATOR = "--"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def instance_job_name(name: str, instance: str) -> str:
    """The name of ``name``'s copy on ``instance``: the id made safe for keys, and a hash so two ids never meet."""
    digest = hashlib.blake2b(instance.encode(), digest_size=3).hexdigest()
    return f"{name}{SEPARATOR}{_UNSAFE.sub('_', instance)[:40]}-{digest}"


def per_instance(job: Job, instance: str) -> Job:
    """The job as this instance runs it: its own copy when ``every_instance``, else the job itself."""
    if not job.options.every_instance:
        return job
    if job.options.group is not None:
        raise InvalidJobError(
            f"job {job.name!r}: group={job.options.group!r} and every_instance=True together are not supported: "
            "a run on every instance is not one of the group's runs to queue; remove one of them",
            option="every_instance",
            value=True,
        )
    return dataclasses.replace(job, name=instance_job_name(job.name, instance))


def fit(job: Job, liveness: bool, instance: str) -> Job:
    """The job as a scheduler adds it: checked for its heartbeat (groups), and its own copy when every_instance."""
    from .groups import with_heartbeat

    return per_instance(with_heartbeat(job, liveness), instance)


@dataclass(frozen=True)
class InstanceSlot:
    """One live instance's record of one slot of an every-instance job; ``run`` is ``None`` when it has none."""

    instance: str
    slot_ms: int
    run: Run | None

    @property
    def missed(self) -> bool:
        return self.run is None


async def instance_runs(backend: Backend, name: str, *, slots: int = 10) -> list[InstanceSlot]:
    """The last ``slots`` slots of ``name`` on each live instance that runs it, from the fleet registry.

    A slot due between the oldest and the newest slot read from its history,
    without a record, is missed (``run`` is ``None``): the instance was down,
    or stuck, then (a restart with the same id shows its gap). Needs
    ``capabilities.registry``.
    """
    from .cron import Schedule
    from .fleet import read_fleet

    fleet = await read_fleet(backend)
    out: list[InstanceSlot] = []
    for info in fleet.instances:
        copy = instance_job_name(name, info.instance)
        definition = fleet.definitions.get(info.instance, {}).get(copy)
        if definition is None:
            continue
        runs = {r.slot_ms: r for r in await backend.history(copy, limit=slots * 4) if not r.manual}
        if not runs:
            continue
        schedule = Schedule(definition.cron, definition.timezone, dst=definition.options.get("dst", "cron"), name=copy)
        due = [s for s in schedule.slots(min(runs) - 1, slots * 8) if s <= max(runs)]
        out += [InstanceSlot(info.instance, s, runs.get(s)) for s in due[-slots:]]
    return out
