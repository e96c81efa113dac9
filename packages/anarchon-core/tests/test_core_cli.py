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
