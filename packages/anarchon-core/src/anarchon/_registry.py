"""The jobs a scheduler knows, with the options each was added with.

A job's *generation* grows each time it is added or removed, so a timer entry
made for an earlier registration of the same name is recognised and dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from types import MappingProxyType
from typing import Any

from .errors import JobNotFoundError
from .job import Job

__all__ = ["JobRegistry"]


class JobRegistry:
    def __init__(self) -> None:
        self._jobs: dict[str, Job] = {}
        self._explicit: dict[str, dict[str, Any]] = {}
        self._generation: dict[str, int] = {}

    @property
    def view(self) -> MappingProxyType[str, Job]:
        return MappingProxyType(self._jobs)

    def __contains__(self, name: str) -> bool:
        return name in self._jobs

    def __len__(self) -> int:
        return len(self._jobs)

    def all(self) -> list[Job]:
        return list(self._jobs.values())

    def add(self, job: Job, options: dict[str, Any]) -> None:
        if job.name in self._jobs:
            raise ValueError(f"a job named {job.name!r} is already added; remove() it first or pick another name")
        self._jobs[job.name] = job
        self._explicit[job.name] = options
        self._generation[job.name] = self._generation.get(job.name, 0) + 1

    def remove(self, name: str) -> Job:
        job = self.get(name)
        del self._jobs[name]
        self._explicit.pop(name, None)
        self._generation[name] += 1
        return job

    def get(self, name: str) -> Job:
        try:
            return self._jobs[name]
        except KeyError:
            known = ", ".join(sorted(self._jobs)) or "none"
            raise JobNotFoundError(f"no job named {name!r} on this scheduler; jobs: {known}") from None

    def find(self, name: str) -> Job | None:
        return self._jobs.get(name)

    def generation(self, name: str) -> int:
        return self._generation[name]

    def current(self, name: str, generation: int) -> Job | None:
        """The job if it is still the registration that ``generation`` was read from."""
        job = self._jobs.get(name)
        if job is None or self._generation[name] != generation:
            return None
        return job

    def rebuild(self, build: Callable[..., Job]) -> None:
        """Build every job again (for another backend); nothing changes unless all succeed."""
        self._jobs = {name: build(name, job.cron, job.func, **self._explicit[name]) for name, job in self._jobs.items()}
