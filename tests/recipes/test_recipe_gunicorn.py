"""The gunicorn recipe: a real gunicorn master with two workers, each an instance on one backend."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from anarchon_conformance import free_port

RECIPES = Path(__file__).resolve().parents[2] / "examples" / "recipes"


@pytest.mark.slow
def test_two_gunicorn_workers_run_each_slot_once(
    tmp_path: Path,
    recipe_env: Callable[..., dict[str, str]],
    wait_for: Callable[..., Any],
    heartbeats: Callable[[], list[list[str]]],
) -> None:
    port = free_port()
    log = tmp_path / "gunicorn.log"
    env = recipe_env(HEARTBEAT_FILE=str(tmp_path / "heartbeats.log"))
    gunicorn = [sys.executable, "-m", "gunicorn", "-w", "2", "-c", "gunicorn_conf.py", "-b", f"127.0.0.1:{port}"]
    with log.open("w") as out:
        proc = subprocess.Popen(
            [*gunicorn, "--error-logfile", "-", "gunicorn_app:app"],
            cwd=RECIPES,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        started = wait_for(
            lambda: log.read_text().count("anarchon started in worker") >= 2 or None, "both workers started a scheduler"
        )
        assert started
        wait_for(lambda: len({slot for slot, *_ in heartbeats()}) >= 6, "six slots of the heartbeat job ran")
        answer = httpx.get(f"http://127.0.0.1:{port}/", timeout=10)
        assert answer.status_code == 200 and "scheduler instance" in answer.text
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(60)
    text = log.read_text()
    assert rc == 0, text
    assert text.count("anarchon stopped in worker") == 2, text
    lines = heartbeats()
    twice = {slot: n for slot, n in Counter(slot for slot, *_ in lines).items() if n > 1}
    assert not twice, f"slots run more than once: {twice}\n{lines}"
    workers = {pid for _, pid, _ in lines}
    assert workers <= {
        line.split("worker ")[1].split(":")[0] for line in text.splitlines() if "anarchon started in worker" in line
    }
    assert os.getpid() not in {int(p) for p in workers}
