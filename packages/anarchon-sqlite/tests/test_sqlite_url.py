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


def test_a_look_at_a_path_with_no_file_names_it_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A typo'd path used to get an empty 48 KB database created there and the answer "no runs"."""
    typo = tmp_path / "jbos.sqlite3"
    url = f"sqlite:///{typo}"
    assert main(["history", "--backend", url, "report"]) == 1
    err = capsys.readouterr().err
    assert f"SQLite database {typo} does not exist" in err and "check the path" in err
    assert main(["pauses", "--backend", url]) == 1
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "app.py").write_text(
        f"from anarchon import Scheduler\nscheduler = Scheduler({url!r})\nscheduler.add('report', '0 2 * * *', print)\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["jobs", "app:scheduler", "--json"]) == 0
    out = capsys.readouterr()
    assert [(r["last_status"], r["paused"]) for r in json.loads(out.out)] == [(None, False)]
    assert "does not exist" in out.err
    assert main(["check", "--backend", url]) == 0  # a new deploy: the folder is writable, the fleet creates the file
    assert not typo.exists() and not list(tmp_path.glob("*.sqlite3*")), "a look created a database file"
    assert main(["check", "--backend", f"sqlite:///{tmp_path / 'no-such-folder' / 'x.sqlite3'}"]) == 1
    assert "does not exist; create it" in capsys.readouterr().out


def test_unknown_keys_and_bad_values_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="unknown option 'journal'") as info:
        SQLiteBackend.from_url("sqlite:///x.db?journal=wal")
    assert "accepted: anarchon's busy_timeout_ms, synchronous" in str(info.value)
    with pytest.raises(ValueError, match="busy_timeout_ms=-1") as from_url:
        SQLiteBackend.from_url("sqlite:///x.db?busy_timeout_ms=-1")
    with pytest.raises(ValueError, match="busy_timeout_ms=-1") as from_argument:
        SQLiteBackend("x.db", busy_timeout_ms=-1)
    assert str(from_url.value) == str(from_argument.value)
