"""The stored-schedule watch alone, on a loop ``looptime`` fast-forwards: what it waits on between polls, and how long.

A backend that pushes changes (capability ``schedule_notify``; the memory
backend) wakes the watch at once, and its poll waits ``NOTIFIED_POLL_MS``; one
that only sleeps keeps the poll at ``POLL_MS``; a wait that was not on a live
subscription brings the short poll back; a wait that raises, a backend that
wakes without end and a failing poll never make the watch spin.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest

from anarchon import LoopClock, MemoryBackend, MemoryStore
from anarchon._health import BackendHealth
from anarchon._storedwatch import BURST_GAP_S, StoredWatch
from anarchon.backend import Backend
from anarchon.fleet import Fleet
from anarchon.observers import Observers
from anarchon.plugins import PluginManager
from anarchon.schedules import NOTIFIED_POLL_MS, POLL_MS

pytestmark = pytest.mark.looptime
START_MS = 1_790_000_000_000

SHORT = range(round(POLL_MS * 0.75), round(POLL_MS * 1.25) + 1)
LONG = range(round(NOTIFIED_POLL_MS * 0.75), round(NOTIFIED_POLL_MS * 1.25) + 1)


def _record(cron: str = "0 * * * *") -> str:
    return json.dumps({"format": 1, "task": "t", "cron": cron, "kwargs": {}, "options": {}})


class Spy(MemoryBackend):
    """The memory backend (it pushes), counting polls and recording each wait's timeout and answer."""

    def __init__(self, store: MemoryStore) -> None:
        super().__init__(store)
        self.waits: list[tuple[int, bool]] = []
        self.polls = 0

    async def wait_schedules(self, revision: int, timeout_ms: int) -> bool:
        answer = await self.waited(revision, timeout_ms)
        self.waits.append((timeout_ms, answer))
        return answer

    async def waited(self, revision: int, timeout_ms: int) -> bool:
        return await super().wait_schedules(revision, timeout_ms)

    async def schedules_revision(self) -> int:
        self.polls += 1
        return await super().schedules_revision()


class Watched:
    """One instance's watch over a spy backend, with the schedules it applied and when (loop time)."""

    def __init__(self, backend: Spy) -> None:
        self.backend = backend
        self.applied: list[tuple[str, int, float]] = []
        self.stopped = False
        observers = Observers(PluginManager(entry_points=False), scheduler=None)  # type: ignore[arg-type]
        self.watch = StoredWatch(
            backend, {"t": lambda: None}, LoopClock(START_MS), BackendHealth(backend, observers),
            install=self._install, uninstall=lambda name: None, is_code_job=lambda name: False,
            fleet=Fleet, stopping=lambda: self.stopped,
        )  # fmt: skip
        self.task: asyncio.Future[None] | None = None

    def _install(self, schedule: Any, func: Any) -> Any:
        self.applied.append((schedule.name, schedule.revision, asyncio.get_running_loop().time()))

    async def __aenter__(self) -> Watched:
        await self.watch.load()
        self.task = asyncio.ensure_future(self.watch.run_forever())
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stopped = True
        assert self.task is not None
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


async def _seen(watched: Watched, name: str, revision: int) -> float:
    while not any(n == name and r == revision for n, r, _ in watched.applied):
        await asyncio.sleep(0.01)
    return next(t for n, r, t in watched.applied if n == name and r == revision)


async def test_a_push_wakes_the_watch_at_once_and_its_poll_waits_ten_seconds() -> None:
    store = MemoryStore()
    writer = MemoryBackend(store)
    async with Watched(Spy(store)) as watched:
        await asyncio.sleep(60)
        timeouts = [t for t, _ in watched.backend.waits]
        assert timeouts[0] in SHORT, "the first wait is the short one: push is not known to be live yet"
        assert all(t in LONG for t in timeouts[1:]), timeouts
        assert 60 / 12.5 - 1 <= watched.backend.polls <= 60 / 7.5 + 2, watched.backend.polls
        loop = asyncio.get_running_loop()
        for i in range(3):
            began = loop.time()
            revision = await writer.put_schedule(f"s{i}", _record(), expect=0, change="{}")
            seen = await asyncio.wait_for(_seen(watched, f"s{i}", revision), 1)
            assert seen - began <= BURST_GAP_S + 0.01, f"change {i} was seen {seen - began:.3f} s after it"


async def test_a_burst_of_changes_is_read_in_polls_at_least_a_gap_apart() -> None:
    store = MemoryStore()
    writer = MemoryBackend(store)
    async with Watched(Spy(store)) as watched:
        await asyncio.sleep(5)
        polls = watched.backend.polls
        for i in range(50):
            await writer.put_schedule(f"b{i}", _record(), expect=0, change="{}")
            await asyncio.sleep(0.01)
        await asyncio.wait_for(_seen(watched, "b49", await writer.schedules_revision()), 1)
        assert watched.backend.polls - polls <= 0.5 / BURST_GAP_S + 2, "50 changes in 0.5 s: a poll each"


class Sleeper(Spy):
    """A backend without a push: the default wait, which sleeps."""

    async def waited(self, revision: int, timeout_ms: int) -> bool:
        return await Backend.wait_schedules(self, revision, timeout_ms)


async def test_without_a_push_the_watch_polls_every_second() -> None:
    store = MemoryStore()
    async with Watched(Sleeper(store)) as watched:
        await asyncio.sleep(30)
        assert all(t in SHORT and not answer for t, answer in watched.backend.waits), watched.backend.waits
        assert 30 / 1.25 - 1 <= watched.backend.polls <= 30 / 0.75 + 2
        loop = asyncio.get_running_loop()
        began = loop.time()
        revision = await MemoryBackend(store).put_schedule("s", _record(), expect=0, change="{}")
        seen = await asyncio.wait_for(_seen(watched, "s", revision), 3)
        assert seen - began <= 1.25 + BURST_GAP_S


class Scripted(Spy):
    """A wait that sleeps its timeout and answers as scripted: False is a subscription found lost."""

    answers = [True, True, False, True, True]

    async def waited(self, revision: int, timeout_ms: int) -> bool:
        await asyncio.sleep(timeout_ms / 1000)
        return self.answers[len(self.waits)] if len(self.waits) < len(self.answers) else True


async def test_a_lost_subscription_brings_the_short_poll_back() -> None:
    async with Watched(Scripted(MemoryStore())) as watched:
        while len(watched.backend.waits) < 5:
            await asyncio.sleep(1)
        timeouts = [t for t, _ in watched.backend.waits[:5]]
        assert [t in SHORT for t in timeouts] == [True, False, False, True, False], timeouts
        assert [t in LONG for t in timeouts] == [False, True, True, False, True], timeouts


class Raising(Spy):
    async def waited(self, revision: int, timeout_ms: int) -> bool:
        raise RuntimeError("a broken wait")


async def test_a_wait_that_raises_is_slept_out_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    backend = Raising(MemoryStore())
    calls = 0
    original = backend.waited

    async def counted(revision: int, timeout_ms: int) -> bool:
        nonlocal calls
        calls += 1
        return await original(revision, timeout_ms)

    backend.waited = counted  # type: ignore[method-assign]
    with caplog.at_level(logging.WARNING, logger="anarchon.schedules"):
        async with Watched(backend):
            await asyncio.sleep(20)
    assert 20 / 1.25 - 1 <= calls <= 20 / 0.75 + 2, f"{calls} waits in 20 s"
    assert 20 / 1.25 - 1 <= backend.polls <= 20 / 0.75 + 2, "the polls go on at the short interval"
    assert len([r for r in caplog.records if "wait_schedules() raised" in r.getMessage()]) == 1


class Chatty(Spy):
    """A push that never stops: every wait ends at once, saying it listened."""

    async def waited(self, revision: int, timeout_ms: int) -> bool:
        return True


async def test_a_wait_that_always_ends_at_once_polls_at_most_every_gap() -> None:
    async with Watched(Chatty(MemoryStore())) as watched:
        await asyncio.sleep(2)
    assert watched.backend.polls <= 2 / BURST_GAP_S + 2, watched.backend.polls


class Failing(Chatty):
    away = False

    async def schedules_revision(self) -> int:
        if self.away:
            self.polls += 1
            raise ConnectionError("the backend is away")
        return await super().schedules_revision()


async def test_a_failing_poll_is_retried_a_short_poll_later_whatever_the_push_says() -> None:
    backend = Failing(MemoryStore())
    async with Watched(backend):
        backend.polls, backend.away = 0, True
        await asyncio.sleep(20)
    assert 20 / 1.25 - 1 <= backend.polls <= 20 / 0.75 + 2, f"{backend.polls} polls of a failing backend in 20 s"
