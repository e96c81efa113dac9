"""The SQLite URL through the CLI: options in the query, unknown keys refused by name with the accepted ones."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from anarchon import Scheduler
from anarchon.cli import main
from anarchon_sqlite import SQLiteBackend


def test_history_through_the_cli_reads_the_file_in_the_url(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.sqlite3'}?busy_timeout_ms=250&synchronous=FULL"
    scheduler = Scheduler(backend=url, instance_id="sqlite-url")
    scheduler.add("report", "0 0 1 1 *", lambda: None)
    run = asyncio.run(scheduler.run_now("report"))
    backend = scheduler.backend
    assert isinstance(backend, SQLiteBackend) and (backend.busy_timeout_ms, backend.synchronous) == (250, "full")
    assert main(["history", "--backend", url, "report", "--json"]) == 0
    (shown,) = json.loads(capsys.readouterr().out)
    assert (shown["slot_ms"], shown["instance"]) == (run.slot_ms, "sqlite-url")


def test_unknown_keys_and_bad_values_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="unknown option 'journal'") as info:
        SQLiteBackend.from_url("sqlite:///x.db?journal=wal")
    assert "accepted: anarchon's busy_timeout_ms, synchronous" in str(info.value)
    with pytest.raises(ValueError, match="busy_timeout_ms=-1") as from_url:
        SQLiteBackend.from_url("sqlite:///x.db?busy_timeout_ms=-1")
    with pytest.raises(ValueError, match="busy_timeout_ms=-1") as from_argument:
        SQLiteBackend("x.db", busy_timeout_ms=-1)
    assert str(from_url.value) == str(from_argument.value)
