"""Where the dashboard reads: a scheduler's registered jobs and its backend's history.

Every read goes through the public history API (``Scheduler.history`` or
``Backend.history``), and only for a job name found in the registered job
list, so no request text ever reaches a backend as a key, subject or SQL
value.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from urllib.parse import urlsplit

from anarchon import Job, Run, Scheduler
from anarchon.urls import redact_url

__all__ = ["Source", "masked"]


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
            await self.scheduler.backend.start()

    async def close(self) -> None:
        if self.open_backend:
            await self.scheduler.backend.close()

    async def history(self, job: Job, limit: int) -> list[Run]:
        if self.open_backend:
            return await self.scheduler.backend.history(job.name, limit)
        return await self.scheduler.history(job.name, limit)

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
