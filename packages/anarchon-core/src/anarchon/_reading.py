"""The scheduler's read calls: a job's history and last run, and the live fleet from the registry.

Each opens the backend for the call when the scheduler is not started, so a
script or a view can read without starting an instance.
"""

from __future__ import annotations

import asyncio
import contextlib

from .backend import Backend
from .fleet import Fleet, read_fleet
from .options import check_job_name
from .run import Run

__all__ = ["Reading"]


class Reading:
    """Mixed into :class:`~anarchon.Scheduler`."""

    def _connected(self) -> contextlib.AbstractAsyncContextManager[Backend]:
        raise NotImplementedError

    async def _open_backend(self) -> None:
        raise NotImplementedError

    async def _close_backend(self) -> None:
        raise NotImplementedError

    async def open_backend(self) -> None:
        """Hold the backend open without starting the scheduler, for a reader that lives long (a dashboard).

        ``history``, ``last_run``, ``fleet`` and ``run_now`` then use that
        connection and leave it open; before, each opened and closed the
        backend around itself, and a ``run_now`` closed the connection the
        dashboard had opened under it (every later page answered 500).
        :meth:`close_backend` ends it; ``start()`` and ``stop()`` of a
        scheduler share the same notion of who opened it.
        """
        await self._open_backend()

    async def close_backend(self) -> None:
        """Close what :meth:`open_backend` opened."""
        await self._close_backend()

    async def history(self, name: str, limit: int = 100) -> list[Run]:
        """The job's runs, newest first (works before start() too)."""
        check_job_name(name)
        async with self._connected() as backend:
            return await backend.history(name, limit)

    async def last_run(self, name: str) -> Run | None:
        check_job_name(name)
        async with self._connected() as backend:
            return await backend.last_run(name)

    async def fleet(self) -> Fleet:
        """The live instances and their job definitions, from the backend (works before start() too).

        Needs ``capabilities.registry``. ``Fleet.instances`` are the live
        instances; ``Fleet.jobs()`` lists each job with its definitions and the
        instances holding each (``FleetJob.drift`` where they differ).
        """
        async with self._connected() as backend:
            return await read_fleet(backend)

    def fleet_sync(self) -> Fleet:
        """:meth:`fleet` for code without an event loop (a script, a Django view); not inside a running loop."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.fleet())
        raise RuntimeError("fleet_sync() was called inside a running event loop; await scheduler.fleet() there")
