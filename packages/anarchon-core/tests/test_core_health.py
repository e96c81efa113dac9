"""The health endpoints on an embedded scheduler: start_in_background(health_port=0)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from anarchon import MemoryBackend, Scheduler, start_in_background
from anarchon.health import readiness


def _get(port: int, path: str, method: str = "GET") -> tuple[int, bytes]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method)
    try:
        with urllib.request.urlopen(request, timeout=5) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_ready_while_scheduling_and_gone_after_stop() -> None:
    scheduler = Scheduler(MemoryBackend(), instance_id="embedded")
    scheduler.add("tick", "* * * * * *", lambda: None)
    assert readiness(scheduler) == (
        False,
        {
            "ready": False,
            "instance": "embedded",
            "reasons": ["not scheduling yet: starting, or waiting for the backend"],
        },
    )
    handle = start_in_background(scheduler, health_port=0)
    try:
        assert handle.health is not None
        port = handle.health.port
        assert _get(port, "/readyz") == (200, json.dumps({"ready": True, "instance": "embedded"}).encode())
        assert _get(port, "/healthz?probe=1")[0] == 200
        assert _get(port, "/healthz", "HEAD") == (200, b"")
        assert _get(port, "/readyz", "POST")[0] == 405
    finally:
        handle.stop()
    with pytest.raises(urllib.error.URLError):
        _get(port, "/healthz")


@pytest.mark.parametrize("bad", [-1, 65536, True, "8081"])
def test_a_bad_health_port_is_refused_in_the_caller(bad: object) -> None:
    scheduler = Scheduler(MemoryBackend())
    with pytest.raises(ValueError, match=r"health_port=.* must be a TCP port"):
        start_in_background(scheduler, health_port=bad)  # type: ignore[arg-type]
    assert not scheduler.started
