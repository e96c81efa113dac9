"""``anarchon run`` and ``anarchon run-now``: the two commands that run jobs.

``run`` is an instance of the fleet until SIGINT or SIGTERM. The first signal
stops it gracefully: no new claims, running jobs get ``--grace-ms`` to
finish, then they are cancelled and (lease backends) handed over. A second
signal forces the stop: the process exits at once with 128 + the signal
number, as a shell reports it. Runs still going are then neither recorded nor
handed over; on a lease backend a backup takes each over when its lease
expires, on a claim backend its record stays ``running``.

``run-now`` runs one job once, in this process, through the backend (recorded
``manual``): the running fleet is not asked to do it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal

from ..health import serve_health
from ..run import RunStatus
from ..scheduler import Scheduler
from ._common import print_runs, resolve

__all__ = ["run", "run_now"]

log = logging.getLogger("anarchon.cli")


async def serve(
    scheduler: Scheduler, grace_ms: int, health_port: int | None = None, health_host: str = "127.0.0.1"
) -> None:
    """Run the scheduler until a signal; a second signal exits at once.

    The health endpoints start first, so a liveness probe answers while the
    scheduler still waits for its backend (readiness says 503 until it schedules).
    """
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    received: list[int] = []

    def on_signal(signum: int) -> None:
        received.append(signum)
        name = signal.Signals(signum).name
        if len(received) == 1:
            log.warning(
                "%s: stopping; running jobs get %d ms to finish (send %s again to force the stop now)",
                name,
                grace_ms,
                name,
            )
            stop.set()
            return
        log.error(
            "%s again: forcing the stop; runs still going are not recorded (on a lease backend a backup "
            "takes each over when its lease expires)",
            name,
        )
        logging.shutdown()
        os._exit(128 + signum)

    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):  # not on Windows' loops
            loop.add_signal_handler(sig, on_signal, sig)
    health = await serve_health(scheduler, health_port, health_host) if health_port is not None else None
    try:
        await scheduler.start()
        try:
            await stop.wait()
        finally:
            await scheduler.stop(grace_ms)
    finally:
        if health is not None:
            await health.close()


def run(args: argparse.Namespace) -> int:
    scheduler, _ = resolve(args.target, args.backend)
    assert scheduler is not None
    asyncio.run(serve(scheduler, args.grace_ms, args.health_port, args.health_host))
    return 0


async def run_now(args: argparse.Namespace) -> int:
    scheduler, _ = resolve(args.target, args.backend)
    assert scheduler is not None
    run = await scheduler.run_now(args.job)
    print_runs([run], args.json)
    return 0 if run.status in (RunStatus.SUCCEEDED, RunStatus.SKIPPED) else 1
