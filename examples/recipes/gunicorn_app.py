"""Recipe: a WSGI application served by gunicorn with several workers, one scheduler per worker.

Every worker process is an instance: each starts the same scheduler against
the same backend, and for each slot exactly one worker runs the job. Start the
scheduler *after* the fork, in the worker (threads do not survive ``fork()``,
so a scheduler started in the master, e.g. with ``--preload``, would be dead
in every worker): gunicorn_conf.py does it in ``post_worker_init`` and stops
it, handing running jobs over to a sibling, in ``worker_exit``.

    ANARCHON_BACKEND=redis://cache:6379/0 gunicorn -w 4 -c gunicorn_conf.py gunicorn_app:app
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

from anarchon import RunContext, Scheduler

scheduler = Scheduler()  # ANARCHON_BACKEND, else sqlite:///anarchon.sqlite3
HEARTBEATS = os.environ.get("HEARTBEAT_FILE", "heartbeats.log")


@scheduler.job("* * * * * *", name="gunicorn-heartbeat", jitter_ms=200)
def heartbeat(ctx: RunContext) -> None:
    """Append one line per run: which slot, which worker. One write call, so lines never interleave."""
    line = f"{ctx.slot_ms} {os.getpid()} {ctx.attempt}\n".encode()
    fd = os.open(HEARTBEATS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    body = f"worker {os.getpid()}, scheduler instance {scheduler.instance_id}\n".encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
