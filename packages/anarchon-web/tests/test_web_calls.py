"""How many backend calls each page makes, counted through a wrapper of a real backend.

The figures the README gives: the jobs page one ``history`` call per row
shown, the job page one, the run page one, and each page one ``pauses`` read;
none depends on the number of jobs or on the length of their history. A name
that is not registered makes no call naming it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from starlette.testclient import TestClient

import anarchon_web
from anarchon import Backend, Job, PauseState, Run, Scheduler
from anarchon.backend import Claim, ClaimResult, Grant
from anarchon.options import JobOptions


class Counting(Backend):
    """A real backend, with every call the dashboard makes counted by method name."""

    name = "counting"

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.capabilities = inner.capabilities  # type: ignore[misc]
        self.calls: Counter[str] = Counter()

    def job_options(self, job: str, explicit: dict[str, Any]) -> JobOptions:
        return self.inner.job_options(job, explicit)

    async def start(self) -> None:
        self.calls["start"] += 1
        await self.inner.start()

    async def close(self) -> None:
        self.calls["close"] += 1
        await self.inner.close()

    async def claim(self, claims: Sequence[Claim]) -> list[ClaimResult]:
        self.calls["claim"] += 1
        return await self.inner.claim(claims)

    async def finish(self, grant: Grant, run: Run) -> bool:
        self.calls["finish"] += 1
        return await self.inner.finish(grant, run)

    async def history(self, job: str, limit: int = 100) -> list[Run]:
        self.calls["history"] += 1
        return await self.inner.history(job, limit)

    async def pauses(self) -> list[PauseState]:
        self.calls["pauses"] += 1
        return await self.inner.pauses()

    async def last_run(self, job: str) -> Run | None:
        self.calls["last_run"] += 1
        return await self.inner.last_run(job)

    async def marks(self, jobs: Sequence[Job]) -> dict[str, int | None]:
        self.calls["marks"] += 1
        return await self.inner.marks(jobs)


async def test_calls_per_page_do_not_grow_with_the_fleet(store: Any, seed: Any, fixed_clock: Any) -> None:
    seeded = await seed(store)
    counting = Counting(store.backend())
    scheduler = Scheduler(counting, clock=fixed_clock(seeded.now_ms))
    scheduler.add("ledger", seeded.job.cron, lambda: None)
    for i in range(119):
        scheduler.add(f"other-{i:03d}", "*/5 * * * *", lambda: None)
    with TestClient(anarchon_web.app(scheduler, open_backend=True, per_page=50)) as client:
        assert counting.calls == {"start": 1}

        def cost(path: str, **params: str) -> Counter[str]:
            before = counting.calls.copy()
            assert client.get(path, params=params).status_code == 200, path
            return counting.calls - before

        read = {"pauses": 1} if counting.capabilities.pause else {}  # the pause in force, once a page
        assert cost("/") == {"history": 50, **read}
        assert cost("/", page="3") == {"history": 20, **read}
        assert cost("/", format="json", per_page="7") == {"history": 7, **read}
        assert cost("/", q="ledger") == {"history": 1, **read}
        assert cost("/jobs/ledger") == {"history": 1, **read}
        assert cost("/jobs/ledger", status="failed", instance="i1", manual="no", page="1") == {"history": 1, **read}
        assert cost(f"/jobs/ledger/runs/{seeded.slot(10)}") == {"history": 1, **read}
        before = counting.calls.copy()
        assert client.get("/jobs/not-registered").status_code == 404
        assert client.get("/jobs/..%2F..%2Fetc").status_code == 404
        assert set(counting.calls - before) <= {"pauses"}, "an unregistered name reached the backend"
    assert counting.calls["close"] == 1
