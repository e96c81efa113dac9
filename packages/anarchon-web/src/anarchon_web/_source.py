"""Where the dashboard reads: a scheduler's registered jobs and its backend's history.

Every read goes through the public history API (``Scheduler.history`` or
``Backend.history``), and only for a job name found in the registered job
list, so no request text ever reaches a backend as a key, subject or SQL
value.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Mapping, Sequence
from urllib.parse import urlsplit

from anarchon import Job, JobOptions, PauseState, Run, Scheduler
from anarchon.audit import AuditEntry, read_audit
from anarchon.errortext import error_text
from anarchon.fleet import Fleet, FleetJob, FleetReader
from anarchon.groups import GroupState
from anarchon.urls import redact_url

__all__ = ["FleetSource", "Source", "masked"]

log = logging.getLogger("anarchon.web")
_OPTIONS = {f.name for f in dataclasses.fields(JobOptions)}


def masked(url: str) -> str:
    """The URL as the CLI masks it; one with neither host part nor query holds no secret and is kept
    as is (``redact_url`` would turn ``sqlite:////abs/path`` into ``sqlite://abs/path``)."""
    parts = urlsplit(url)
    return url if not parts.netloc and not parts.query else redact_url(url)


class Source:
    """The jobs and the history one dashboard shows.

    ``open_backend`` is for a scheduler this process does not run (the
    ``anarchon-web`` command): the dashboard then opens the scheduler's
    backend once, in its lifespan, and reads it directly. Otherwise reads go
    through :meth:`Scheduler.history`, which uses the running scheduler's
    connection (the dashboard mounted in the application that runs it).
    """

    def __init__(self, scheduler: Scheduler, *, open_backend: bool = False, backend_url: str | None = None) -> None:
        self.scheduler = scheduler
        self.open_backend = open_backend
        self.backend_label = scheduler.backend.name + (f" {masked(backend_url)}" if backend_url else "")
        self.kind = scheduler.backend.capabilities.kind
        #: The live fleet as last read (backends with the fleet registry), for drift badges and /fleet.
        self.fleet: Fleet | None = None
        self.registry = scheduler.backend.capabilities.registry
        self._reader = FleetReader()
        #: The pauses in force, by job, as last read (backends that pause).
        self.pauses: dict[str, PauseState] = {}

    async def refresh(self) -> None:
        """Read the pauses and the fleet registry once per page; a failed read leaves those facts out."""
        await self._read_pauses()
        if not self.registry:
            return
        try:
            backend = self.scheduler.backend
            self.fleet = await (
                self._reader.read(backend, stored=True) if self.open_backend else self.scheduler.fleet()
            )
        except Exception as exc:  # the page still shows the jobs and their history
            log.warning("dashboard: could not read the fleet registry: %s", error_text(exc))
            self.fleet = None

    async def _read_pauses(self) -> None:
        if not self.scheduler.backend.capabilities.pause:
            return
        try:
            found = await (self.scheduler.backend.pauses() if self.open_backend else self.scheduler.pauses())
        except Exception as exc:  # the page still shows the jobs, without their pauses
            log.warning("dashboard: could not read the pauses: %s", error_text(exc))
            found = []
        self.pauses = {p.job: p for p in found if p.paused}

    async def groups(self) -> list[GroupState]:
        """The concurrency groups (backends with groups), for /fleet only; a failed read shows none."""
        if not self.scheduler.backend.capabilities.groups:
            return []
        try:
            return await (self.scheduler.backend.groups() if self.open_backend else self.scheduler.groups())
        except Exception as exc:  # the fleet page still shows the instances, without the groups
            log.warning("dashboard: could not read the concurrency groups: %s", error_text(exc))
            return []

    def fleet_job(self, name: str) -> FleetJob | None:
        return self.fleet.job(name) if self.fleet is not None else None

    @property
    def jobs(self) -> Mapping[str, Job]:
        return self.scheduler.jobs

    def names(self) -> list[str]:
        """Job names in order (jobs may be added and removed while the dashboard runs)."""
        return sorted(self.scheduler.jobs)

    def job(self, name: str) -> Job | None:
        """The registered job of that name, or ``None``: the check before any backend call."""
        return self.scheduler.jobs.get(name)

    async def start(self) -> None:
        if self.open_backend:
            await self.scheduler.open_backend()  # the scheduler knows it is open: run_now leaves it so

    async def close(self) -> None:
        if self.open_backend:
            await self.scheduler.close_backend()

    async def history(self, job: Job, limit: int) -> list[Run]:
        if self.open_backend:
            return await self.scheduler.backend.history(job.name, limit)
        return await self.scheduler.history(job.name, limit)

    async def audit(self, *, limit: int, before_id: int | None, job: str | None) -> list[AuditEntry]:
        """The audit trail's newest entries (:mod:`anarchon.audit`), through the backend this dashboard reads."""
        if self.open_backend:
            return await read_audit(self.scheduler.backend, limit=limit, before_id=before_id, job=job)
        return await self.scheduler.audit(limit=limit, before_id=before_id, job=job)

    async def histories(self, jobs: Sequence[Job], limit: int) -> list[list[Run]]:
        """One history call per job (a page's rows, never the whole fleet).

        On the dashboard's own open backend they are all in flight at once.
        Through ``Scheduler.history`` they go one after another, as a
        precaution: a scheduler that is not started opens and closes its
        backend around each call, with no guard against concurrent callers.
        """
        if self.open_backend:
            return list(await asyncio.gather(*(self.history(job, limit) for job in jobs)))
        return [await self.history(job, limit) for job in jobs]


def _never(*_: object) -> None:
    raise RuntimeError("this job comes from the fleet registry; its function lives in the fleet")


class FleetSource(Source):
    """The jobs the live fleet defines, from the fleet registry: a dashboard from the backend URL alone.

    Each page reads the registry again, so jobs appear and disappear with the
    instances that define them. A job whose definitions differ is shown by
    the one that runs (:meth:`anarchon.fleet.Fleet.running`).
    """

    def __init__(self, scheduler: Scheduler, *, backend_url: str | None = None) -> None:
        super().__init__(scheduler, open_backend=True, backend_url=backend_url)
        self._jobs: dict[str, Job] = {}

    @property
    def jobs(self) -> Mapping[str, Job]:
        return self._jobs

    def names(self) -> list[str]:
        return sorted(self._jobs)

    def job(self, name: str) -> Job | None:
        return self._jobs.get(name)

    async def refresh(self) -> None:
        await super().refresh()
        fleet = self.fleet or Fleet()
        jobs: dict[str, Job] = {}
        for fleet_job in fleet.jobs():
            d = fleet.running(fleet_job)
            try:
                options = JobOptions(**{k: v for k, v in d.options.items() if k in _OPTIONS})
                jobs[fleet_job.name] = Job(fleet_job.name, d.cron, _never, options)
            except (ValueError, TypeError) as exc:  # a definition of another version: left out, said once
                log.debug("dashboard: job %r from the registry left out: %s", fleet_job.name, exc)
        self._jobs = jobs

    async def history(self, job: Job, limit: int) -> list[Run]:
        return await self.scheduler.backend.history(job.name, limit)
