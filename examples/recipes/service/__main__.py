"""Recipe: a plain service, ``python -m service``: the scheduler is the whole program.

``Scheduler.run()`` blocks, and SIGTERM or SIGINT (``docker stop``,
``systemctl stop``, Ctrl-C) stop it gracefully: running jobs get ``grace_ms``,
then leases are handed over so another instance takes the run over at once.
Run as many copies as you like, on any hosts, against one backend.

    ANARCHON_BACKEND=postgresql://db/app python -m service
"""

from __future__ import annotations

import logging
import os

from anarchon import RunContext, Scheduler

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

scheduler = Scheduler()  # ANARCHON_BACKEND, else sqlite:///anarchon.sqlite3
HEARTBEATS = os.environ.get("HEARTBEAT_FILE", "heartbeats.log")


@scheduler.job("* * * * * *", name="service-heartbeat", jitter_ms=200)
def heartbeat(ctx: RunContext) -> None:
    with open(HEARTBEATS, "a") as f:
        f.write(f"{ctx.slot_ms} {os.getpid()}\n")


@scheduler.job("0 3 * * *", name="service-nightly", timezone="Europe/Athens", timeout_ms=3_600_000)
async def nightly(ctx: RunContext) -> None:
    logging.getLogger("service").info("nightly run for %s (attempt %d)", ctx.slot, ctx.attempt)


if __name__ == "__main__":
    scheduler.run(grace_ms=10_000)
