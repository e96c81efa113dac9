"""The instance process of a chaos scenario: the fleet's instance, with a richer ledger.

Same arguments and jobs as ``python -m anarchon_conformance.fleet instance``;
the ledger lines also carry what the judge needs and the fleet's do not:
``catch_up`` and ``missed`` on a run's start (slots coalesced into a catch-up
run are not missed), a ``ready`` line with the process id, and ``lost`` lines
for claims whose answer never came (``reason="unknown"``) or whose lease
went stale mid-run.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from typing import Any

from anarchon_conformance.fleet import READY, _build_backend, _instance_parser, _Ledger


def main(argv: list[str]) -> None:
    from anarchon import RunContext, Scheduler, SkewedClock, hookimpl

    args = _instance_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    ledger = _Ledger(args.ledger, args.id)

    class Observer:
        @hookimpl
        def anarchon_scheduler_started(self, scheduler: Scheduler) -> None:
            ledger.write("ready", pid=os.getpid())
            print(READY, flush=True)

        @hookimpl
        def anarchon_slot_skipped(self, scheduler: Scheduler, job: Any, slot_ms: int, reason: str) -> None:
            ledger.write("skip", job=job.name, slot=slot_ms, reason=reason)

        @hookimpl
        def anarchon_claim_lost(self, scheduler: Scheduler, job: Any, slot_ms: int, reason: str) -> None:
            if reason != "lost":
                ledger.write("lost", job=job.name, slot=slot_ms, reason=reason)

    scheduler = Scheduler(
        _build_backend(args),
        instance_id=args.id,
        plugins=[Observer()],
        clock=SkewedClock(args.skew_ms) if args.skew_ms else None,
    )
    options = json.loads(args.options or "{}")

    def make(name: str, seconds: float) -> Any:
        async def job(ctx: RunContext) -> None:
            fields = {"job": name, "slot": ctx.slot_ms, "attempt": ctx.attempt, "fencing": ctx.fencing}
            ledger.write("start", **fields, catch_up=ctx.catch_up, missed=ctx.missed, manual=ctx.manual)
            try:
                if seconds:
                    await asyncio.sleep(seconds)
            except asyncio.CancelledError:
                # Cancelled by a lost lease or by stop(): when it stopped is what tells overlap from take-over.
                ledger.write("cancel", **fields, lease_lost=ctx.lease_lost)
                raise
            ledger.write("end", **fields, lease_lost=ctx.lease_lost)

        return job

    for i in range(args.jobs):
        name = f"{args.job_prefix}{i:02d}"
        scheduler.add(name, args.cron, make(name, 0), **options)
    if args.slow_cron:
        slow_options = {**options, **json.loads(args.slow_options or "{}")}
        name = f"{args.job_prefix}slow"
        scheduler.add(name, args.slow_cron, make(name, args.slow_seconds), **slow_options)
    scheduler.run(grace_ms=args.grace_ms)


if __name__ == "__main__":
    main(sys.argv[1:])
