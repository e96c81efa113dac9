"""Pause, resume and trigger through the scheduler, the sync face and the command line, on one MemoryStore."""

from __future__ import annotations

import json
import sys
import textwrap
import types
from pathlib import Path

import pytest

from anarchon import Groups, MemoryBackend, RunContext, RunStatus, Scheduler, start_in_background
from anarchon._identity import default_actor
from anarchon.cli import main

APP = """
from anarchon import MemoryBackend, MemoryStore, Scheduler

store = MemoryStore()
scheduler = Scheduler(MemoryBackend(store), instance_id="cli")

@scheduler.job("0 0 1 1 *")
def report():
    pass
"""


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    (tmp_path / "ctlapp.py").write_text(textwrap.dedent(APP))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("ctlapp", None)
    import ctlapp  # type: ignore[import-not-found]

    return ctlapp


def test_pause_resume_and_pauses_from_the_command_line(
    app: types.ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["pause", "ctlapp:scheduler", "report", "--reason", "db migration", "--json"]) == 0
    (state,) = json.loads(capsys.readouterr().out)
    # ``by`` is who paused (user@host from the CLI), not the instance id: the audit trail answers "who".
    assert (state["job"], state["paused"], state["reason"], state["by"]) == (
        "report", True, "db migration", default_actor()
    )  # fmt: skip
    (stored,) = app.store.control.pauses()
    assert stored.paused and stored.reason == "db migration"
    assert main(["pauses", "ctlapp:scheduler"]) == 0
    assert "db migration" in capsys.readouterr().out
    assert main(["resume", "ctlapp:scheduler", "report", "--reason", "migrated", "--json"]) == 0
    (state,) = json.loads(capsys.readouterr().out)
    assert state["paused"] is False and state["until_ms"] >= state["since_ms"]
    assert main(["resume", "ctlapp:scheduler", "report"]) == 0
    assert "was not paused" in capsys.readouterr().out
    assert main(["audit", "ctlapp:scheduler", "--json"]) == 0
    trail = [(e["action"], e["by"], e["reason"]) for e in json.loads(capsys.readouterr().out)]
    who = default_actor()
    assert trail == [("resume", who, None), ("resume", who, "migrated"), ("pause", who, "db migration")]


def test_jobs_shows_which_jobs_are_paused(app: types.ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["jobs", "ctlapp:scheduler", "--json"]) == 0
    assert [(r["name"], r["paused"]) for r in json.loads(capsys.readouterr().out)] == [("report", False)]
    assert main(["pause", "ctlapp:scheduler", "report"]) == 0
    capsys.readouterr()
    assert main(["jobs", "ctlapp:scheduler", "--json"]) == 0
    assert [(r["name"], r["paused"]) for r in json.loads(capsys.readouterr().out)] == [("report", True)]
    assert main(["jobs", "ctlapp:scheduler"]) == 0
    header, _, row = capsys.readouterr().out.splitlines()[:3]
    assert header.split()[-1] == "paused" and row.split()[-1] == "paused"


def test_a_job_the_scheduler_lacks_is_refused_with_its_jobs(
    app: types.ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["pause", "ctlapp:scheduler", "nope"]) == 2
    assert "its jobs: report" in capsys.readouterr().err
    assert main(["trigger", "ctlapp:scheduler", "bad name"]) == 2


def test_trigger_wait_prints_the_run_an_instance_of_the_fleet_made(
    app: types.ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    ran: list[RunContext] = []
    fleet = Scheduler(MemoryBackend(app.store), instance_id="fleet-1")
    fleet.add("report", "0 0 1 1 *", ran.append)
    with start_in_background(fleet):
        assert main(["trigger", "ctlapp:scheduler", "report", "--wait", "--json"]) == 0
    (run,) = json.loads(capsys.readouterr().out)
    assert (run["status"], run["manual"], run["instance"]) == ("succeeded", True, "fleet-1")
    assert [c.manual for c in ran] == [True]


def test_a_trigger_nobody_takes_times_out_and_is_withdrawn(
    app: types.ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["trigger", "ctlapp:scheduler", "report", "--wait", "--timeout", "0.5"]) == 1
    assert "no instance took it" in capsys.readouterr().err
    assert app.store.control.run_requests() == []
    assert main(["trigger", "ctlapp:scheduler", "report", "--wait", "--timeout", "0"]) == 2


def test_the_sync_face_pauses_and_triggers() -> None:
    backend = MemoryBackend()
    ran: list[bool] = []
    scheduler = Scheduler(backend, instance_id="sync")
    scheduler.add("tick", "0 0 1 1 *", lambda ctx: ran.append(ctx.manual))
    with start_in_background(scheduler) as thread:
        assert thread.pause("tick", reason="r").paused
        ended = thread.resume("tick")
        assert ended is not None and not ended.paused
        request = thread.trigger("tick")
        run = thread.trigger_result(request, timeout_s=10)
    assert run.status is RunStatus.SUCCEEDED and ran == [True]


def test_run_now_and_trigger_say_how_they_differ(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["run-now", "--help"])
    assert "anarchon trigger" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["trigger", "--help"])
    assert "Unlike run-now" in capsys.readouterr().out


async def test_the_scheduler_reads_the_groups_of_its_backend_started_or_not() -> None:
    backend = MemoryBackend()
    scheduler = Scheduler(backend, instance_id="groups")
    await Groups(backend, by="ops").set("reports", 3)
    states = await scheduler.groups()  # not started: the backend is opened for the call
    assert [(g.name, g.max_running, g.running, g.waiting) for g in states] == [("reports", 3, 0, 0)]
    await scheduler.start()
    try:
        await Groups(backend, by="ops", started=True).set("mail", 1)
        assert [g.name for g in await scheduler.groups()] == ["mail", "reports"]
    finally:
        await scheduler.stop()
