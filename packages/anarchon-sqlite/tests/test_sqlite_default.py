"""SQLite is what Scheduler() uses when nothing says otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest

from anarchon import MemoryBackend, RunStatus, Scheduler
from anarchon_sqlite import SQLiteBackend


async def test_no_backend_and_no_environment_means_anarchon_sqlite3_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ANARCHON_BACKEND", raising=False)
    scheduler = Scheduler()
    assert isinstance(scheduler.backend, SQLiteBackend)
    scheduler.add("hello", "@daily", lambda: None)
    run = await scheduler.run_now("hello")
    assert run.status is RunStatus.SUCCEEDED
    assert (tmp_path / "anarchon.sqlite3").is_file()
    assert await Scheduler().last_run("hello") == run, "a second scheduler reads the same default file"


def test_the_environment_variable_wins_over_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANARCHON_BACKEND", "memory://")
    assert isinstance(Scheduler().backend, MemoryBackend)
