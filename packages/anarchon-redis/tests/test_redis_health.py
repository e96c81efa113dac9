"""``anarchon run --health-port``: /readyz follows the backend, /healthz the process's own loop.

A real ``anarchon run`` process against a private Redis that the test kills
and starts again, then freezes with SIGSTOP: the probes must say what a
Kubernetes kubelet needs to know each time.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from anarchon_conformance import eventually, free_port

pytestmark = pytest.mark.slow

APP = """
from anarchon import Scheduler
from anarchon_redis import RedisBackend

scheduler = Scheduler(RedisBackend(url={url!r}, prefix="health:"), instance_id="health-1")
scheduler.add("tick", "* * * * * *", lambda: None, jitter_ms=0)
"""


def _get(port: int, path: str) -> tuple[int, dict[str, object]] | None:
    """(status, JSON body), or None when nothing answered within a second."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=1) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())
    except (urllib.error.URLError, TimeoutError, ConnectionError):
        return None


async def test_probes_follow_the_backend_and_the_loop(unstarted_server, tmp_path: Path) -> None:
    unstarted_server.start()
    (tmp_path / "health_app.py").write_text(APP.format(url=unstarted_server.url))
    port = free_port()
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    argv = [sys.executable, "-m", "anarchon", "run", "health_app:scheduler", "--health-port", str(port)]
    log = (tmp_path / "run.log").open("wb")  # a file, not a pipe: a full pipe would block the loop under test
    proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=log)
    try:
        await eventually(lambda: _get(port, "/readyz") == (200, {"ready": True, "instance": "health-1"}), 30,
                         what="/readyz 200 once the scheduler schedules")  # fmt: skip
        assert _get(port, "/healthz") == (200, {"alive": True, "instance": "health-1"})
        assert _get(port, "/nope") == (404, {"error": "no such path '/nope': /healthz or /readyz", "status": 404})

        unstarted_server.stop(kill=True)
        down = await eventually(lambda: (r := _get(port, "/readyz")) and r[0] == 503 and r, 15,
                                what="/readyz 503 with the backend gone")  # fmt: skip
        assert down[1]["ready"] is False and any("backend 'redis' is failing" in r for r in down[1]["reasons"])
        assert _get(port, "/healthz") == (200, {"alive": True, "instance": "health-1"}), (
            "alive while the backend is down"
        )

        unstarted_server.start()
        await eventually(lambda: _get(port, "/readyz") == (200, {"ready": True, "instance": "health-1"}), 30,
                         what="/readyz 200 again once the backend answers")  # fmt: skip

        proc.send_signal(signal.SIGSTOP)
        try:
            assert _get(port, "/healthz") is None, "a frozen process must not answer its liveness probe"
        finally:
            proc.send_signal(signal.SIGCONT)
        await eventually(lambda: _get(port, "/healthz") is not None, 10, what="/healthz once thawed")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        log.close()


def test_a_bad_health_port_is_refused_before_anything_starts(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "anarchon", "run", "x:y", "--health-port", "70000"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "'70000' is not a TCP port from 0 to 65535" in done.stderr
