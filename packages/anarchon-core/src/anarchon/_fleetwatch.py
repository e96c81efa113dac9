"""This instance in the fleet registry, and the drift of job definitions between live instances.

At start (after the first heartbeat, before the first claim) the instance
writes its entry (:mod:`anarchon.fleet`) and reads the fleet once, so a pod of
a new release that changes a job never claims by a definition that another
one supersedes. Then, every :data:`~anarchon.fleet.REGISTRY_POLL_MS`, it
rewrites its entry if its jobs changed (or the entry is gone), reads the
heads of the live instances, and the job lists of those whose fingerprint of
all definitions it has not seen. While this instance's heartbeat holds, its
entry counts as live by the heartbeat, so it is refreshed only every
:data:`~anarchon.fleet.REGISTRY_KEEP_BEATING_MS` (3 s: so instances of the
release before, which need the entry unexpired, still see it), not every
poll: two writes in three fewer per instance.

Drift: a job that live instances define differently. One WARNING per change
of the situation (the set of definitions, or the one that runs), the
``anarchon_job_drift`` hook, and the policy: with ``"newest"`` (the default)
or ``"oldest"``, an instance whose definition is not the one chosen claims
none of the job's slots (:meth:`FleetWatch.runs`); with ``"each"`` every
instance claims by its own definition. A job only some instances define is
not drift.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import socket
from collections.abc import Callable, Mapping

from ._health import BackendHealth, error_text
from ._registry import JobRegistry
from .backend import Backend
from .clock import Clock
from .errors import InstanceIdInUseError
from .fleet import (
    REGISTRY_KEEP_BEATING_MS,
    REGISTRY_POLL_MS,
    DriftPolicy,
    Fleet,
    FleetJob,
    FleetReader,
    InstanceInfo,
    JobDefinition,
    describe,
    encode_jobs,
    jobs_fingerprint,
    read_heads,
    winner,
)
from .observers import Observers

__all__ = ["FleetWatch"]

log = logging.getLogger("anarchon.fleet")


class FleetWatch:
    def __init__(
        self,
        backend: Backend,
        registry: JobRegistry,
        instance_id: str,
        version: str,
        policy: DriftPolicy,
        clock: Clock,
        health: BackendHealth,
        observers: Observers,
        *,
        stopping: Callable[[], bool],
        tasks: Mapping[str, object] | None = None,
        beating: Callable[[], bool] = lambda: False,
    ) -> None:
        self._backend = backend
        #: Whether this instance's heartbeat holds: then its entry is live by it, and kept only now and then.
        self._beating = beating
        self._kept = float("-inf")  # when the entry was last written or kept (monotonic s)
        #: The scheduler's tasks (shared, not copied): the head says which stored schedules this instance runs.
        self._task_names = tasks if tasks is not None else {}
        self._registry = registry
        self._instance = instance_id
        self._version = version
        self._policy = policy
        self._clock = clock
        self._health = health
        self._observers = observers
        self._stopping = stopping
        self._enabled = backend.capabilities.registry
        self._started_ms = 0
        self._written: tuple[str, tuple[str, ...]] | None = None  # the jobs fingerprint and tasks last written
        self._computed: tuple[int, dict[str, JobDefinition], str] | None = None
        #: Other instances' definitions, read again only when their fingerprint changes.
        self._reader = FleetReader()
        self._fleet_key: object = None
        self._situations: dict[str, tuple[frozenset[str], str | None]] = {}
        #: Jobs whose slots this instance does not claim: another definition runs.
        self._yielded: frozenset[str] = frozenset()
        self.fleet = Fleet()

    @property
    def superseded(self) -> frozenset[str]:
        return self._yielded

    def runs(self, name: str) -> bool:
        """Whether this instance claims the job's scheduled slots (not when another definition won)."""
        return name not in self._yielded

    # -- this instance's entry --------------------------------------------------------

    def _definitions(self) -> tuple[dict[str, JobDefinition], str]:
        """This instance's definitions and their fingerprint, computed again only after a job was added or removed."""
        changes = self._registry.changes
        if self._computed is None or self._computed[0] != changes:
            mine = {job.name: JobDefinition.of(job) for job in self._registry.code_snapshot()}
            self._computed = (changes, mine, jobs_fingerprint(mine.values()))
        return self._computed[1], self._computed[2]

    def _head(self, fingerprint: str, jobs: int) -> InstanceInfo:
        return InstanceInfo(
            self._instance, socket.gethostname(), os.getpid(), self._version, self._started_ms, jobs, fingerprint,
            self._policy, tuple(sorted(self._task_names)),
        )  # fmt: skip

    async def _write(self) -> None:
        mine, fingerprint = self._definitions()
        await self._backend.register(
            self._instance, self._head(fingerprint, len(mine)).head(), encode_jobs(mine.values())
        )
        self._written = (fingerprint, tuple(sorted(self._task_names)))
        self._kept = self._clock.monotonic()

    async def check_id(self) -> None:
        """Refuse an id that a live instance on another host (or another live process here) holds.

        Called before this instance's first heartbeat: beating under a live
        instance's id would keep that one's record alive for it, and leaving
        would end it. A registry that cannot be read does not stop the start.
        """
        if not self._enabled:
            return
        try:
            await self._refuse_taken_id()
        except InstanceIdInUseError:
            raise
        except Exception as exc:
            self._health.failed("registered", exc)

    async def join(self) -> None:
        """Register and read the fleet once, before the first claim.

        A registry that cannot be written does not stop the start (the poll
        tries again every second).
        """
        if not self._enabled:
            return
        self._started_ms = self._clock.now_ms()
        try:
            await self._write()
            await self.poll()
        except Exception as exc:
            log.warning("fleet registry: could not register this instance yet: %s; trying again every second",
                        error_text(exc))  # fmt: skip
            self._health.failed("register", exc)

    async def _refuse_taken_id(self) -> None:
        for instance, raw, _ in await self._backend.registered():
            if instance != self._instance:
                continue
            other = InstanceInfo.parse(instance, raw, None)
            here = (socket.gethostname(), os.getpid())
            if other is not None and (other.host, other.pid) != here and (other.host != here[0] or _running(other.pid)):
                raise InstanceIdInUseError(
                    f"instance_id={self._instance!r} is held by a live instance on host {other.host!r} "
                    f"(pid {other.pid}, version {other.version or '?'}); give each instance its own "
                    "instance_id, or leave it out for <hostname>-<pid>-<hex>"
                )

    async def leave(self) -> None:
        if not self._enabled or self._written is None:
            return
        try:
            await self._backend.unregister(self._instance)
        except Exception as exc:  # its entry then leaves with its liveness
            self._health.failed("unregister", exc)
        self._written = None

    # -- the poll ----------------------------------------------------------------------

    async def run_forever(self) -> None:
        if not self._enabled:
            return
        while not self._stopping():
            await asyncio.sleep(REGISTRY_POLL_MS / 1000 * random.uniform(0.75, 1.25))
            if self._stopping():
                return
            try:
                await self.poll()
            except Exception as exc:  # the drift state stays as last known
                self._health.failed("registered", exc)

    async def poll(self) -> None:
        mine, fingerprint = self._definitions()
        if self._written != (fingerprint, tuple(sorted(self._task_names))):
            await self._write()
        elif not self._beating() or self._clock.monotonic() - self._kept >= REGISTRY_KEEP_BEATING_MS / 1000:
            await self._backend.keep_registered(self._instance)
            self._kept = self._clock.monotonic()
        heads = await read_heads(self._backend)
        if not any(h.instance == self._instance for h in heads):
            await self._write()  # expired while this instance was cut off: back in the views
            heads.append(self._head(fingerprint, len(mine)))
        fleet = await self._reader.read(self._backend, heads, but=self._instance)
        self.fleet = Fleet(fleet.instances, {**fleet.definitions, self._instance: mine})
        key = tuple((h.instance, h.started_ms, h.jobs_fingerprint) for h in self.fleet.instances)
        if key != self._fleet_key:
            self._fleet_key = key
            self._settle()

    # -- drift -------------------------------------------------------------------------

    def _settle(self) -> None:
        """Decide which jobs this instance yields, then tell of each change (so observers read it decided)."""
        started = self.fleet.started
        mine, _ = self._definitions()
        yielded: set[str] = set()
        changed: list[tuple[FleetJob, str | None]] = []
        drifting: set[str] = set()
        for job in self.fleet.jobs():
            if job.name not in mine or not job.drift:
                continue
            win = winner(job, started, self._policy)
            drifting.add(job.name)
            if win is not None and win != mine[job.name].fingerprint:
                yielded.add(job.name)
            situation = (frozenset(job.definitions), win)
            if self._situations.get(job.name) != situation:
                self._situations[job.name] = situation
                changed.append((job, win))
        for name in sorted(yielded - self._yielded):
            log.info(
                "job %r: another definition runs; this instance claims none of its slots",
                name,
                extra={"job": name, "instance": self._instance},
            )
        self._yielded = frozenset(yielded)
        for job, win in changed:
            self._warn(job, win)
            self._observers.job_drift(job, win)
        for name in sorted(set(self._situations) - drifting):
            del self._situations[name]
            log.info("job %r: live instances hold one definition again", name, extra={"job": name})
            settled = self.fleet.job(name)
            if settled is not None:
                self._observers.job_drift(settled, None)

    def _warn(self, job: FleetJob, win: str | None) -> None:
        heads = {h.instance: h for h in self.fleet.instances}
        fields = job.differing_fields()
        listed = [(d, [heads[i] for i in holders if i in heads]) for d, holders in job.definitions.values()]
        outcome = {"newest": "the newest runs", "oldest": "the oldest runs"}.get(
            self._policy, "each runs by its own (drift='each')"
        )
        log.warning(
            "job %r has %d definitions among live instances: %s; %s",
            job.name,
            len(job.definitions),
            describe(listed, fields),
            outcome,
            extra={"job": job.name, "fields": fields, "winner": win, "instance": self._instance},
        )


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
