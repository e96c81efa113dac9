"""``anarchon-web``: its checks, and a real uvicorn serving a seeded SQLite file with jobs named on the command line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from anarchon_conformance import free_port
from anarchon_web import cli
from anarchon_web._load import UsageError, parse_job


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("sync=*/5 * * * *", ("sync", "*/5 * * * *", "UTC")),
        ("report=0 2 * * *@Europe/Athens", ("report", "0 2 * * *", "Europe/Athens")),
        ("d=@daily", ("d", "@daily", "UTC")),
        ("d=@daily@Asia/Tokyo", ("d", "@daily", "Asia/Tokyo")),
    ],
)
def test_job_arguments(text: str, parsed: tuple[str, str, str]) -> None:
    assert parse_job(text) == parsed


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        ([], "give module:attr, or --backend URL"),
        (
            ["--backend", "memory://", "--actions"],
            "--actions lets users pause, trigger and backfill jobs, so it needs sign-in",
        ),
        (["--backend", "memory://", "--host", "0.0.0.0"], "--host 0.0.0.0 serves the dashboard beyond this machine"),
        (["--backend", "memory://", "--token-file", "/no/such/file"], "token_file='/no/such/file' cannot be read"),
        (["--backend", "memory://", "--trusted-header", "X User"], "trusted_header='X User' is not a header name"),
        (["--backend", "memory://", "--job", "nocron"], "write NAME=CRON"),
        (["--backend", "memory://", "--job", "a b=* * * * *"], "job name 'a b' is not allowed"),
        (["--backend", "memory://", "--job", "a=not cron"], "cron"),
        (["--backend", "memory://", "--job", "a=* * * * *", "--actions"], "--actions lets users pause"),
        (["no_such_module_here:scheduler"], "cannot import 'no_such_module_here'"),
    ],
)
def test_bad_command_lines_exit_2_saying_what_to_do(
    argv: list[str], words: str, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANARCHON_WEB_TOKEN", raising=False)
    assert cli.main(argv) == 2
    assert words in capsys.readouterr().err


def test_the_core_command_can_delegate_under_its_own_name(capsys: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANARCHON_WEB_TOKEN", raising=False)
    assert cli.main(["--backend", "memory://", "--actions"], prog="anarchon web") == 2
    assert capsys.readouterr().err.startswith("anarchon web: error: --actions lets users pause")


def test_module_attr_loads_the_application_s_scheduler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "webapp_fixture.py").write_text(
        "from anarchon import Scheduler, MemoryBackend\n"
        "scheduler = Scheduler(MemoryBackend())\n"
        "scheduler.add('nightly', '0 3 * * *', lambda: None, timezone='Europe/Athens')\n"
    )
    monkeypatch.chdir(tmp_path)
    scheduler, url = cli.build(cli.parser().parse_args(["webapp_fixture:scheduler", "--job", "extra=* * * * *"]))
    assert sorted(scheduler.jobs) == ["extra", "nightly"] and url is None
    assert scheduler.jobs["nightly"].timezone == "Europe/Athens"
    with pytest.raises(UsageError, match="not an anarchon Scheduler"):
        cli.build(cli.parser().parse_args(["webapp_fixture:Scheduler.__name__"]))


@pytest.mark.sqlite
async def test_serves_a_backend_with_jobs_from_the_command_line(sqlite_store: Any, seed: Any) -> None:
    seeded = await seed(sqlite_store, minutes_ago=20)  # all its slots within the strip's 30
    await sqlite_store.cleanup()
    port = free_port()
    url = f"sqlite:///{sqlite_store.path}"
    argv = [
        sys.executable,
        "-m",
        "anarchon_web.cli",
        "--backend",
        url,
        "--job",
        "ledger=* * * * *",
        "--port",
        str(port),
    ]
    server = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        assert server.stdout.readline().strip() == f"anarchon-web: 1 jobs on http://127.0.0.1:{port}/"
        deadline = time.monotonic() + 30
        while True:  # uvicorn binds after the line above; wait for it, boundedly
            try:
                answer = httpx.get(f"http://127.0.0.1:{port}/", params={"format": "json"}, timeout=5)
                break
            except httpx.ConnectError:
                assert server.poll() is None and time.monotonic() < deadline, server.stderr and server.stderr.read()
                time.sleep(0.05)
        data = answer.json()
        assert data["backend"] == f"sqlite {url}"
        got = {(s["slot_ms"] - seeded.base_ms) // 60_000: s["outcome"] for s in data["jobs"][0]["strip"]}
        assert {i: got[i] for i in range(12)} == {i: seeded.expected[i] for i in range(12)}
        page = httpx.get(f"http://127.0.0.1:{port}/jobs/ledger/runs/{seeded.slot(10)}", timeout=5)
        assert page.status_code == 200 and "took the run over" in page.text
    finally:
        server.terminate()
        code = server.wait(30)
    assert code in (0, -signal.SIGTERM), server.stderr.read() if server.stderr else code  # uvicorn re-raises it


def test_the_core_command_delegates_web_to_this_package(capsys: pytest.CaptureFixture[str]) -> None:
    from anarchon.cli import main as anarchon_main

    with pytest.raises(SystemExit) as exit_info:
        anarchon_main(["web", "--help"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith("usage: anarchon web")


def test_the_core_help_lists_web_through_the_plugin_hook() -> None:
    done = subprocess.run([sys.executable, "-m", "anarchon", "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    listed = [line.split()[0] for line in done.stdout.splitlines() if line.startswith("    ") and line.split()]
    assert "web" in listed and "jobs" in listed
    assert "not installed" not in done.stdout


def test_without_the_plugin_the_core_names_the_distribution_to_install() -> None:
    # ANARCHON_DISABLE_PLUGINS blocks the entry point as if anarchon-web were not installed.
    env = {**os.environ, "ANARCHON_DISABLE_PLUGINS": "web"}
    helped = subprocess.run([sys.executable, "-m", "anarchon", "--help"], capture_output=True, text=True, env=env)
    assert "anarchon web: not installed (pip install anarchon-web)" in " ".join(helped.stdout.split())
    ran = subprocess.run([sys.executable, "-m", "anarchon", "web"], capture_output=True, text=True, env=env)
    assert ran.returncode == 2
    assert "'anarchon web' is not installed: pip install anarchon-web" in ran.stderr
