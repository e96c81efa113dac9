"""Fixtures for the SQLite backend's tests: files in tmp_path, instances racing on them.

Helpers are handed out as fixtures because pytest imports test modules with
``--import-mode=importlib``, where a test cannot import its conftest.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from anarchon.backend import Claim
from anarchon.job import Job
from anarchon_conformance import eventually, testing
from anarchon_sqlite import SQLiteBackend

WORKER = Path(__file__).with_name("sqlite_worker.py")


def _make_job(name: str = "job", cron: str = "* * * * * *", **options: Any) -> Job:
    return testing.make_job(SQLiteBackend("unused.sqlite3"), name, cron, **options)


def _make_claim(
    job: Job,
    slot_ms: int,
    instance: str = "a",
    *,
    token: str | None = None,
    manual: bool = False,
    now_ms: int | None = None,
    catch_up: bool = False,
    missed: int = 0,
) -> Claim:
    return testing.make_claim(
        job, slot_ms, instance, token=token, now_ms=now_ms, manual=manual, catch_up=catch_up, missed=missed
    )


@pytest.fixture
def make_job() -> Callable[..., Job]:
    """``make_job(name, cron, **options)``: a job resolved for SQLite as ``Scheduler.add()`` would."""
    return _make_job


@pytest.fixture
def make_claim() -> Callable[..., Claim]:
    """``make_claim(job, slot_ms, instance, token=…, manual=…, now_ms=…)``."""
    return _make_claim


@pytest.fixture
def wait_until() -> Callable[..., Awaitable[Any]]:
    return eventually


@pytest.fixture
def worker() -> Path:
    """The script a test runs as a separate OS process (see sqlite_worker.py)."""
    return WORKER


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "anarchon.sqlite3"


@pytest.fixture
async def instances(db_path: Path) -> AsyncIterator[Callable[..., Awaitable[list[SQLiteBackend]]]]:
    """``await instances(n, **kwargs)``: n started backends (n instances) on one file, closed afterwards."""
    opened: list[SQLiteBackend] = []

    async def start(n: int = 1, path: Path | None = None, **kwargs: Any) -> list[SQLiteBackend]:
        made = [SQLiteBackend(path or db_path, **kwargs) for _ in range(n)]
        opened.extend(made)
        for backend in made:
            await backend.start()
        return made

    yield start
    for backend in opened:
        await backend.close()
