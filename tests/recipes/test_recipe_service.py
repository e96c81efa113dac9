"""The plain-service recipe, ``python -m service``: runs jobs until SIGTERM, then stops gracefully."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

RECIPES = Path(__file__).resolve().parents[2] / "examples" / "recipes"


@pytest.mark.slow
def test_two_service_processes_share_the_slots_and_stop_on_sigterm(
    tmp_path: Path,
    recipe_env: Callable[..., dict[str, str]],
    wait_for: Callable[..., Any],
    heartbeats: Callable[[], list[list[str]]],
) -> None:
    env = recipe_env(HEARTBEAT_FILE=str(tmp_path / "heartbeats.log"))
    logs = [tmp_path / f"service-{i}.log" for i in range(2)]
    procs = []
    for log in logs:
        with log.open("w") as out:
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "service"], cwd=RECIPES, env=env, stdout=out, stderr=subprocess.STDOUT
                )
            )
    try:
        wait_for(lambda: all("anarchon started" in log.read_text() for log in logs), "both services started")
        wait_for(lambda: len({slot for slot, _ in heartbeats()}) >= 4, "four slots of the heartbeat job ran")
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        codes = [proc.wait(60) for proc in procs]
    texts = [log.read_text() for log in logs]
    assert codes == [0, 0], texts
    assert all("anarchon stopped" in text for text in texts), texts
    twice = {slot: n for slot, n in Counter(slot for slot, _ in heartbeats()).items() if n > 1}
    assert not twice, f"slots run more than once: {twice}"
