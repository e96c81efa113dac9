"""``Groups``: set, remove and read the limits of concurrency groups, from code or the CLI.

A limit is checked before anything is written and stored in the backend,
where every instance reads it on its next ask for a place (within
:data:`~anarchon.groups.GROUP_POLL_MS`, at once where the backend tells of
changes). Each change is appended to the audit trail, with who and why.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

from ._identity import default_actor
from .audit import record_audit
from .backend import Backend
from .groups import GroupState, check_group_limit, check_group_name

__all__ = ["Groups", "SyncGroups"]

T = TypeVar("T")


class Groups:
    """The concurrency groups of one backend (and namespace); async. :class:`SyncGroups` is the blocking face.

    Pass a URL, or a backend object: one that is started already (a running
    scheduler's) is used as it is, and one that is not is started and closed
    around each call.
    """

    def __init__(self, backend: Backend | str | None = None, *, by: str | None = None, started: bool = False) -> None:
        if backend is None or isinstance(backend, str):
            from .plugins import PluginManager

            backend = PluginManager().resolve(backend)
        self.backend = backend
        self.by = by or default_actor()
        self._started = started

    @contextlib.asynccontextmanager
    async def _backend(self) -> AsyncIterator[Backend]:
        if self._started:
            yield self.backend
            return
        await self.backend.start()
        try:
            yield self.backend
        finally:
            await self.backend.close()

    async def set(self, name: str, max_running: int, *, reason: str | None = None) -> GroupState:
        """Limit the group to ``max_running`` runs at once across the fleet; the group as it is now."""
        check_group_name(name, option="name")
        check_group_limit(max_running)
        async with self._backend() as backend:
            await backend.set_group(name, max_running)
            await record_audit(
                backend, "group-set", name, by=self.by, reason=reason, detail={"max_running": max_running}
            )
            return _find(await backend.groups(), name)

    async def remove(self, name: str, *, reason: str | None = None) -> None:
        """Lift the group's limit: its runs then start as soon as they are due."""
        check_group_name(name, option="name")
        async with self._backend() as backend:
            await backend.set_group(name, None)
            await record_audit(backend, "group-remove", name, by=self.by, reason=reason)

    async def list(self) -> builtins.list[GroupState]:
        """Every group with a limit or a live run, by name."""
        async with self._backend() as backend:
            return await backend.groups()

    async def get(self, name: str) -> GroupState:
        """One group (with no limit and nothing running if the backend knows nothing of it)."""
        check_group_name(name, option="name")
        return _find(await self.list(), name)


def _find(states: builtins.list[GroupState], name: str) -> GroupState:
    for state in states:
        if state.name == name:
            return state
    return GroupState(name, None, 0, 0)


class SyncGroups:
    """The blocking face of :class:`Groups`: each call opens the backend, does its work and closes it.

    Do not call it from inside a running event loop (use :class:`Groups`).
    """

    def __init__(self, backend: Backend | str | None = None, *, by: str | None = None) -> None:
        self._groups = Groups(backend, by=by)

    def _run(self, call: Callable[[Groups], Awaitable[T]]) -> T:
        async def once() -> T:
            return await call(self._groups)

        return asyncio.run(once())

    def set(self, name: str, max_running: int, *, reason: str | None = None) -> GroupState:
        return self._run(lambda g: g.set(name, max_running, reason=reason))

    def remove(self, name: str, *, reason: str | None = None) -> None:
        return self._run(lambda g: g.remove(name, reason=reason))

    def list(self) -> builtins.list[GroupState]:
        return self._run(lambda g: g.list())

    def get(self, name: str) -> GroupState:
        return self._run(lambda g: g.get(name))
