"""``/healthz`` and ``/readyz`` for the scheduler process (``anarchon run --health-port``).

``anarchon check`` asks the backend, so it answers ok while every instance of
the fleet is frozen. These two ask the instance:

* ``GET /healthz``: 200 when the scheduler's event loop answers. The server
  runs *on that loop*, so a blocked loop (an async job that never yields),
  a frozen (SIGSTOP) or a wedged process does not answer at all, and the
  probe's timeout fails it: the Kubernetes liveness probe;
* ``GET /readyz``: 200 when the scheduler is started and scheduling, the
  backend answers (no outage under way), and, on a backend with liveness,
  this instance's heartbeat is acknowledged; else 503 with the reasons as
  JSON: the readiness probe.

HTTP/1.0 over ``asyncio.start_server``, written here rather than taken from
a web framework: the core carries no third-party dependency, and two fixed
paths answering small JSON need no routing, no TLS and no keep-alive. Bind
it to a pod's own address (``127.0.0.1`` by default); it reveals only states.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .scheduler import Scheduler

__all__ = ["HealthServer", "check_health_port", "readiness", "serve_health"]

log = logging.getLogger("anarchon.health")

#: How long one request may take to arrive: a probe sends it at once; a stalled client is dropped.
READ_TIMEOUT_S = 5.0
_REASONS = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}


def check_health_port(port: object) -> int:
    """``health_port`` checked where it is given: a TCP port, 0 for a free one."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ValueError(f"health_port={port!r} must be a TCP port from 0 to 65535 (0: a free one), for example 8081")
    return port


def readiness(scheduler: Scheduler) -> tuple[bool, dict[str, object]]:
    """Whether the instance can do its share of the fleet's work now, and why not."""
    reasons: list[str] = []
    if scheduler._stopping:
        reasons.append("stopping: no new claims")
    elif not scheduler.ready:
        reasons.append("not scheduling yet: starting, or waiting for the backend")
    if scheduler._health.degraded:
        reasons.append(f"backend {scheduler.backend.name!r} is failing; claims wait until it answers again")
    beat = scheduler._heartbeat
    if beat is not None and not beat.beating():
        reasons.append("this instance's heartbeat is not acknowledged: the fleet may take its runs over")
    state: dict[str, object] = {"ready": not reasons, "instance": scheduler.instance_id}
    if reasons:
        state["reasons"] = reasons
    return not reasons, state


def _answer(scheduler: Scheduler, method: str, path: str) -> tuple[int, dict[str, object]]:
    path = path.split("?", 1)[0]
    if path not in ("/healthz", "/readyz"):
        return 404, {"error": f"no such path {path[:100]!r}: /healthz or /readyz", "status": 404}
    if method not in ("GET", "HEAD"):
        return 405, {"error": "GET or HEAD only", "status": 405}
    if path == "/healthz":
        return 200, {"alive": True, "instance": scheduler.instance_id}
    ready, state = readiness(scheduler)
    return (200 if ready else 503), state


class HealthServer:
    """The probe endpoints of one scheduler, served on the loop it runs on."""

    def __init__(self, scheduler: Scheduler, server: asyncio.Server) -> None:
        self._scheduler = scheduler
        self._server = server

    @property
    def port(self) -> int:
        """The port it listens on (the one chosen, when 0 was asked for)."""
        return int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        self._server.close()
        await self._server.wait_closed()


async def serve_health(scheduler: Scheduler, port: int, host: str = "127.0.0.1") -> HealthServer:
    """Serve ``/healthz`` and ``/readyz`` for ``scheduler`` on this loop (the scheduler's own)."""
    check_health_port(port)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), READ_TIMEOUT_S)
            with contextlib.suppress(asyncio.TimeoutError):  # headers are not read: none changes the answer
                await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
            parts = line.decode("latin-1").split()
            if len(parts) < 2:
                return
            status, body = _answer(scheduler, parts[0], parts[1])
            payload = json.dumps(body).encode()
            head = (
                f"HTTP/1.0 {status} {_REASONS[status]}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(payload)}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n"
            )
            writer.write(head.encode() + (b"" if parts[0] == "HEAD" else payload))
            await writer.drain()
        except (asyncio.TimeoutError, asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    server = await asyncio.start_server(handle, host, port)
    health = HealthServer(scheduler, server)
    log.info("health: /healthz and /readyz on http://%s:%d", host, health.port)
    return health
