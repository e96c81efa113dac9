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
        #: Jobs of stored schedules (anarchon.schedules): the backend holds their definition, so the
        #: fleet registry leaves them out of this instance's entry.
        self._stored: set[str] = set()
        #: :meth:`snapshot` and :meth:`lowest`, kept until the next change.
        self._snapshot: tuple[Job, ...] | None = None
        self._code: tuple[Job, ...] | None = None
        self._lowest: dict[str, int | None] = {}
        #: Grows with every add, remove or rebuild: the fleet registry rewrites this instance's entry.
        self.changes = 0

    def _changed(self) -> None:
        self.changes += 1
        self._snapshot = self._code = None
        self._lowest.clear()

    @property
    def view(self) -> MappingProxyType[str, Job]:
        return MappingProxyType(self._jobs)

    def __contains__(self, name: str) -> bool:
        return name in self._jobs

    def __len__(self) -> int:
        return len(self._jobs)

    def all(self) -> list[Job]:
        return list(self._jobs.values())

    def snapshot(self) -> tuple[Job, ...]:
        """Every job, one tuple shared until a job is added or removed.

        The polls (take-over every second, the clock check) read all jobs: a
        fresh list of 100,000 each time was most of an idle scheduler's CPU.
        """
        if self._snapshot is None:
            self._snapshot = tuple(self._jobs.values())
        return self._snapshot

    def code_snapshot(self) -> tuple[Job, ...]:
        """The jobs added in code (not from stored schedules), shared like :meth:`snapshot`."""
        if self._code is None:
            self._code = tuple(j for j in self._jobs.values() if j.name not in self._stored)
        return self._code

    def is_stored(self, name: str) -> bool:
        return name in self._stored

    def touch(self) -> None:
        """Something this instance registers besides jobs (a task) changed: its registry entry is written again."""
        self.changes += 1

    def lowest(self, option: str) -> int | None:
        """The smallest value of a numeric job option (``lease_ms``, ``max_late_ms``), ``None`` with no job."""
        if option not in self._lowest:
            self._lowest[option] = min((getattr(j.options, option) for j in self._jobs.values()), default=None)
        return self._lowest[option]

    def add(self, job: Job, options: dict[str, Any], *, stored: bool = False) -> None:
        if job.name in self._jobs:
            raise ValueError(f"a job named {job.name!r} is already added; remove() it first or pick another name")
        self._jobs[job.name] = job
        if stored:
            self._stored.add(job.name)
        self._explicit[job.name] = options
        self._generation[job.name] = self._generation.get(job.name, 0) + 1
        self._changed()

    def remove(self, name: str) -> Job:
        job = self.get(name)
        del self._jobs[name]
        self._stored.discard(name)
        self._explicit.pop(name, None)
        self._generation[name] += 1
        self._changed()
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
        self._changed()
