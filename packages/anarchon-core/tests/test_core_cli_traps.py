"""The CLI traps of issue 22, each one a test: exit codes, help, -v, --json, zones, python -m, Ctrl-C twice."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import textwrap
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

import anarchon
from anarchon.cli import _parser, main

APP = """
from anarchon import Scheduler, MemoryBackend

scheduler = Scheduler(MemoryBackend(), instance_id="cli")

@scheduler.job("*/5 * * * *", timezone="Europe/Athens")
def sync():
    pass
"""

#: A job due every second that announces itself, then sleeps far past any grace the test gives.
SLOW_APP = """
import sys, time
from anarchon import Scheduler, MemoryBackend

scheduler = Scheduler(MemoryBackend(), instance_id="slow")

@scheduler.job("* * * * * *", jitter_ms=0)
def stuck():
    print("job started", flush=True)
    time.sleep(3600)
"""

#: A job due every second that announces itself and returns.
QUICK_APP = """
from anarchon import Scheduler, MemoryBackend

scheduler = Scheduler(MemoryBackend(), instance_id="quick")

@scheduler.job("* * * * * *", jitter_ms=0)
def tick():
    print("job started", flush=True)
"""

READ_COMMANDS = ("jobs", "history", "run-now", "check", "backends")


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "trapapp.py").write_text(textwrap.dedent(APP))
    (tmp_path / "slowapp.py").write_text(textwrap.dedent(SLOW_APP))
    (tmp_path / "quickapp.py").write_text(textwrap.dedent(QUICK_APP))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("trapapp", None)
    return "trapapp:scheduler"


def _cli(*args: str, cwd: Path | None = None, **kwargs: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": "."}
    env.pop("ANARCHON_BACKEND", None)
    return subprocess.run(
        [sys.executable, "-m", "anarchon", *args], capture_output=True, text=True, env=env, cwd=cwd, **kwargs
    )  # type: ignore[call-overload,no-any-return]


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    (group,) = [a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(group.choices)


def test_history_of_an_unknown_job_exits_2_like_run_now(app: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["history", app, "nosuch"]) == 2
    err = capsys.readouterr().err
    assert "no job named 'nosuch'" in err and "sync" in err
    assert main(["run-now", app, "nosuch"]) == 2
    assert "no job named 'nosuch'" in capsys.readouterr().err


def test_history_without_an_app_reads_any_job_of_the_backend(
    app: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # No runs and no live instance defines it: a typo, refused with the jobs the fleet has; --force reads it.
    assert main(["history", "gone", "--backend", "memory://"]) == 2
    assert "no live instance defines a job named 'gone'" in capsys.readouterr().err
    assert main(["history", "gone", "--backend", "memory://", "--force"]) == 0
    assert "no runs recorded for 'gone' in MemoryBackend" in capsys.readouterr().out
    monkeypatch.delenv("ANARCHON_BACKEND", raising=False)
    assert main(["history", "gone"]) == 2
    assert "--backend URL or ANARCHON_BACKEND" in capsys.readouterr().err
    monkeypatch.setenv("ANARCHON_BACKEND", "memory://")
    assert main(["history", "gone", "--json", "--force"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_history_refuses_a_limit_below_one(app: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["history", app, "sync", "--limit", "0"])
    assert info.value.code == 2 and "must be at least 1" in capsys.readouterr().err


def test_check_connects_and_reports_each_check(app: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", app, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is True
    assert [c["check"] for c in report["checks"]] == ["options", "connect", "clock", "guarantee"]
    assert main(["check", app, "--offline", "--json"]) == 0
    assert [c["check"] for c in json.loads(capsys.readouterr().out)["checks"]] == ["options"]


def test_an_unknown_scheme_never_echoes_a_token(app: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--backend", "foo://s3cret@h"]) == 2
    assert main(["history", "x", "--backend", "foo://user:s3cret#x@h/"]) == 2
    err = capsys.readouterr().err
    assert "s3cret" not in err and "foo://***@h" in err and "installed schemes" in err


def test_version_and_python_dash_m(app: str, tmp_path: Path) -> None:
    version = _cli("--version")
    assert version.returncode == 0 and version.stdout.strip() == f"anarchon {anarchon.__version__}"
    jobs = _cli("jobs", app, cwd=tmp_path)
    assert jobs.returncode == 0 and "sync" in jobs.stdout


def test_every_option_of_every_command_has_help() -> None:
    undocumented = [
        f"{name} {action.option_strings or action.dest}"
        for name, sub in _subparsers().items()
        for action in sub._actions
        if not action.help
    ]
    assert undocumented == []
    history = _subparsers()["history"].format_help()
    assert "newest N runs" in history and "JSON instead of a table" in history


def test_every_read_command_takes_json() -> None:
    subs = _subparsers()
    assert [c for c in READ_COMMANDS if "--json" not in subs[c]._option_string_actions] == []


def test_run_now_says_it_runs_in_this_process() -> None:
    text = " ".join(_subparsers()["run-now"].format_help().split())
    assert "in this process" in text and "the running fleet is not asked" in text


def test_jobs_shows_the_next_slot_in_utc_and_in_the_jobs_zone(app: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["jobs", app, "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    utc = datetime.fromisoformat(row["next_slot"].replace("Z", "+00:00"))
    local = datetime.fromisoformat(row["next_slot_local"])
    assert local == utc and local.utcoffset() == utc.astimezone(ZoneInfo("Europe/Athens")).utcoffset()
    assert local.utcoffset() != utc.utcoffset()  # Athens is never on UTC
    assert main(["jobs", app]) == 0
    out = capsys.readouterr().out
    assert "next slot (UTC)" in out and "next slot (job's zone)" in out
    assert local.strftime("%H:%M:%S") in out and utc.strftime("%H:%M:%S") in out


@pytest.mark.parametrize("where", ["before", "after"])
def test_verbose_works_before_and_after_the_command(app: str, tmp_path: Path, where: str) -> None:
    args = ["-v", "jobs", app] if where == "before" else ["jobs", app, "-v"]
    loud = _cli(*args, cwd=tmp_path)
    assert loud.returncode == 0 and "DEBUG anarchon.cli: anarchon" in loud.stderr
    quiet = _cli("jobs", app, cwd=tmp_path)
    assert quiet.returncode == 0 and "DEBUG" not in quiet.stderr


def _start_run(tmp_path: Path, target: str, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": "."}
    return subprocess.Popen(
        [sys.executable, "-m", "anarchon", "run", target, *extra],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.timeout(120)
def test_a_second_ctrl_c_forces_the_stop(app: str, tmp_path: Path) -> None:
    proc = _start_run(tmp_path, "slowapp:scheduler", "--grace-ms", "3600000")
    try:
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline().strip() == "job started"
        proc.send_signal(signal.SIGINT)
        for line in proc.stderr:  # the first signal was handled: a graceful stop, waiting for the job
            if "send SIGINT again to force" in line:
                break
        assert proc.poll() is None  # still waiting: the grace is an hour
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 128 + signal.SIGINT
        assert "SIGINT again: forcing the stop" in proc.stderr.read()
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.timeout(120)
def test_one_sigterm_stops_gracefully(app: str, tmp_path: Path) -> None:
    proc = _start_run(tmp_path, "quickapp:scheduler")
    try:
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline().strip() == "job started"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        err = proc.stderr.read()
        assert "SIGTERM: stopping" in err and "anarchon stopped" in err and "forcing" not in err
    finally:
        proc.kill()
        proc.wait()
