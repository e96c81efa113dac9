"""gunicorn settings for gunicorn_app.py: one scheduler per worker, started after the fork."""

from __future__ import annotations

from typing import Any

preload_app = False  # the app (and its scheduler) is imported in each worker, after the fork
graceful_timeout = 15  # longer than the scheduler's grace below, so a hand-over has time


def post_worker_init(worker: Any) -> None:
    from gunicorn_app import scheduler

    from anarchon import start_in_background

    worker.anarchon = start_in_background(scheduler, grace_ms=10_000)
    worker.log.info("anarchon started in worker %s: instance %s", worker.pid, scheduler.instance_id)


def worker_exit(server: Any, worker: Any) -> None:
    handle = getattr(worker, "anarchon", None)
    if handle is not None:
        handle.stop()  # running jobs get grace_ms, then their leases go to another worker
        worker.log.info("anarchon stopped in worker %s", worker.pid)
