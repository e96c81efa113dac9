"""A third party's backend, run through the suite exactly as the README shows.

``DictBackend`` is the smallest honest claim backend: a dict under a lock
decides who is first, and a second dict keeps the history. Everything a
third party writes to get the whole suite is the last class in this file.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import ClassVar

import pytest

from anarchon.backend import Backend, Capabilities, Claim, ClaimResult, Grant, Outcome
from anarchon.run import Run, RunStatus, ms_to_datetime
from anarchon_conformance import BackendFactory, BackendSuite, ClaimTests


class DictStore:
    """What several instances share: who won each slot, and each job's runs."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.winners: dict[tuple[str, int, bool], str] = {}
        self.runs: dict[str, dict[tuple[int, bool], Run]] = {}


class DictBackend(Backend):
    name: ClassVar[str] = "dict"
    capabilities: ClassVar[Capabilities] = Capabilities(lease=False, multi_process=False)

    def __init__(self, store: DictStore) -> None:
        self.store = store

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass

    async def claim(self, claims: Sequence[Claim]) -> list[ClaimResult]:
        return [self._claim(c) for c in claims]

    def _claim(self, c: Claim) -> ClaimResult:
        with self.store.lock:
            if self.store.winners.setdefault((c.job, c.slot_ms, c.manual), c.token) != c.token:
                return ClaimResult(Outcome.LOST)
            runs = self.store.runs.setdefault(c.job, {})
            started = ms_to_datetime(c.now_ms)
            runs.setdefault(
                (c.slot_ms, c.manual),
                Run(c.job, c.slot_ms, RunStatus.RUNNING, c.instance, manual=c.manual, started_at=started),
            )
            for old in sorted(runs)[: -c.options.history_size]:
                del runs[old]
        return ClaimResult(
            Outcome.WON, Grant(c.job, c.slot_ms, c.instance, c.token, manual=c.manual, started_at_ms=c.now_ms)
        )

    async def finish(self, grant: Grant, run: Run) -> bool:
        with self.store.lock:
            self.store.runs.setdefault(grant.job, {})[(grant.slot_ms, grant.manual)] = run
        return True

    async def history(self, job: str, limit: int = 100) -> list[Run]:
        with self.store.lock:
            runs = self.store.runs.get(job, {})
            return [runs[key] for key in sorted(runs, reverse=True)[:limit]]


# -- what the README tells a third party to write ---------------------------------


class TestDictBackend(BackendSuite):
    @pytest.fixture
    def backend_factory(self) -> Iterator[BackendFactory]:
        store = DictStore()  # one store per test: an isolated namespace
        yield lambda: DictBackend(store)  # each call: a fresh, unstarted backend object = one instance
        store.winners.clear()  # cleanup after the test, as a server backend would drop its keys


# -- a second backend, to show picking parts of the suite -------------------------


class OneShotDictBackend(DictBackend):
    """Cannot tell a client's retry from a rival's claim (as a gate queue cannot): every repeat loses."""

    capabilities: ClassVar[Capabilities] = Capabilities(lease=False, idempotent_claim=False, multi_process=False)

    def _claim(self, c: Claim) -> ClaimResult:
        with self.store.lock:
            if (c.job, c.slot_ms, c.manual) in self.store.winners:
                return ClaimResult(Outcome.LOST)
        return super()._claim(c)


class TestOneShotDictBackend(ClaimTests):
    @pytest.fixture
    def backend_factory(self) -> BackendFactory:
        store = DictStore()
        return lambda: OneShotDictBackend(store)
