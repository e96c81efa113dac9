"""The anarchon command against a small application module."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from anarchon.cli import main

APP = """
from anarchon import Scheduler, MemoryBackend

scheduler = Scheduler(MemoryBackend(), instance_id="cli")

@scheduler.job("*/5 * * * *", timezone="Europe/Athens")
def sync():
    pass

@scheduler.job("0 2 * * *", name="report")
def report(ctx):
    raise RuntimeError("disk full")
"""


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "cliapp.py").write_text(textwrap.dedent(APP))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("cliapp", None)
    return "cliapp:scheduler"


def test_jobs_lists_name_cron_zone_and_next_slot(app: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["jobs", app, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in rows] == ["sync", "report"]
    assert rows[0]["timezone"] == "Europe/Athens" and rows[0]["last_status"] is None
    assert main(["jobs", app]) == 0
    table = capsys.readouterr().out
    assert "next slot" in table and "*/5 * * * *" in table


def test_run_now_prints_the_run_and_exits_non_zero_on_failure(app: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run-now", app, "sync", "--json"]) == 0
    (run,) = json.loads(capsys.readouterr().out)
    assert run["status"] == "succeeded" and run["manual"] is True and run["instance"] == "cli"
    assert main(["run-now", app, "report"]) == 1
    assert "RuntimeError: disk full" in capsys.readouterr().out


def test_history_of_a_job(app: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["history", app, "sync"]) == 0
    assert "no runs recorded" in capsys.readouterr().out


def test_check_reports_bad_options_with_the_fix(app: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", app]) == 0
    assert "2 job(s) checked" in capsys.readouterr().out
    (tmp_path / "badapp.py").write_text(
        "from anarchon import Scheduler, MemoryBackend\n"
        "scheduler = Scheduler(MemoryBackend())\n"
        "scheduler.add('x', '* * * * *', print, jitter_ms=90_000)\n"
    )
    assert main(["check", "badapp:scheduler"]) == 2
    err = capsys.readouterr().err
    assert "jitter_ms=90000" in err and "max_late_ms" in err


def test_bad_target_says_how_to_write_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["jobs", "no-colon"]) == 2
    assert "module:attr" in capsys.readouterr().err


def test_backend_override_rechecks_every_job(app: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", app, "--backend", "memory://"]) == 0
    assert main(["check", app, "--backend", "kafka://x"]) == 2
    assert "installed schemes" in capsys.readouterr().err


def test_backends_lists_installed_backends(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["backends", "--json"]) == 0
    entries = {e["name"]: e for e in json.loads(capsys.readouterr().out)}
    assert entries["memory"]["kind"] == "lease" and "memory" in entries["memory"]["schemes"]


def test_console_script_is_installed(app: str) -> None:
    exe = Path(sys.executable).with_name("anarchon")
    out = subprocess.run(
        [str(exe), "jobs", app], capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": "."}
    ).stdout
    assert "sync" in out and "report" in out


LEDGER_APP = """
from anarchon import Scheduler, MemoryBackend, RunStatus
from anarchon.memory import MemoryStore
from anarchon_conformance.testing import make_claim

T0 = 1_800_000_000_000
now = [T0]
store = MemoryStore(clock=lambda: now[0])
scheduler = Scheduler(MemoryBackend(store), instance_id="cli")
tick = scheduler.add("tick", "* * * * * *", print, lease_ms=1000, max_late_ms=5000)


def ran(second, instance="i-1"):
    now[0] = T0 + second * 1000
    grant = store.claim(make_claim(tick, now[0], instance, now_ms=now[0])).grant
    return grant


def finish(grant, status=RunStatus.SUCCEEDED):
    store.finish(grant, grant.finished(status, started_ms=now[0], finished_ms=now[0]))


finish(ran(0))
dying = ran(2, "i-dead")  # its runner dies mid-run: i-2 takes the slot over after the lease
now[0] = T0 + 3500
(taken,) = store.take_over(tick, "i-2")
finish(taken.grant)
now[0] = T0 + 12_000  # slots 3 to 6 are older than max_late_ms (5 s): nobody may claim them any more
"""


def test_history_shows_missed_slots_and_the_attempt_that_died(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "ledgerapp.py").write_text(textwrap.dedent(LEDGER_APP))
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("ledgerapp", None)
    assert main(["history", "ledgerapp:scheduler", "tick", "--json", "--ledger"]) == 0
    entries = json.loads(capsys.readouterr().out)
    seen = [((e["slot_ms"] - 1_800_000_000_000) // 1000, e["outcome"], e["attempt"], e["instance"]) for e in entries]
    assert seen == [
        (6, "missed", None, None),
        (5, "missed", None, None),
        (4, "missed", None, None),
        (3, "missed", None, None),
        (2, "ran", 2, "i-2"),
        (2, "died", 1, "i-dead"),
        (1, "missed", None, None),
        (0, "ran", 1, "i-1"),
    ]
    assert main(["history", "ledgerapp:scheduler", "tick", "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)
    assert [(r["attempt"], [a["instance"] for a in r["earlier"]]) for r in runs] == [(2, ["i-dead"]), (1, [])]
    assert main(["history", "ledgerapp:scheduler", "tick", "--limit", "3"]) == 0
    table = capsys.readouterr().out
    assert table.count("missed") == 3 and "nobody claimed it" in table and "ran" not in table
