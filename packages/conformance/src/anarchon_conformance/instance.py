"""One instance process of a fleet: a scheduler whose every run leaves a line in the ledger.

Every instance appends one JSON line when a run starts, ends, is recorded by
the backend (``recorded``, after ``finish()`` answered), or a slot is
skipped for overlap (for the ``--flaky`` jobs: at each try, as ``try``), to a
file outside the backend (``O_APPEND`` writes of one short line are atomic on
a local file system), so the ledger survives
whatever happens to the backend and to the instances.

Run as ``python -m anarchon_conformance.instance --id ID --ledger PATH …``
(:class:`~anarchon_conformance.fleet.Fleet` starts it).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import signal
import sys
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

__all__ = ["READY", "build_backend", "main"]

#: What an instance prints on stdout once its scheduler started.
READY = "anarchon-fleet-ready"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class _Ledger:
    """Appends one JSON line per event; one ``write`` per line keeps lines whole."""

    def __init__(self, path: str, instance: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.instance = instance

    def write(self, event: str, **fields: Any) -> None:
        line = json.dumps({"e": event, "instance": self.instance, "t": _now_ms(), **fields}) + "\n"
        os.write(self.fd, line.encode())


def build_backend(
    backend: str | None = None, backend_class: str | None = None, backend_kwargs: dict[str, Any] | None = None
) -> Any:
    """The backend a fleet member uses: a URL as is, or ``module:Class`` built with keyword arguments."""
    if backend_class:
        module, _, name = backend_class.partition(":")
        cls = getattr(importlib.import_module(module), name)
        return cls(**(backend_kwargs or {}))
    return backend


def _build_backend(args: argparse.Namespace) -> Any:
    return build_backend(args.backend, args.backend_class, json.loads(args.backend_kwargs or "{}"))


def _instance_main(args: argparse.Namespace) -> None:
    from anarchon import RunContext, Scheduler, SkewedClock, hookimpl

    ledger = _Ledger(args.ledger, args.id)
    #: (reason, slot) -> ordinary claim losses: per slot, so a reader can count a window of its own.
    ordinary: Counter[tuple[str, int]] = Counter()

    class Observer:
        @hookimpl
        def anarchon_scheduler_started(self, scheduler: Scheduler) -> None:
            ledger.write("ready", pid=os.getpid())
            print(READY, flush=True)

        @hookimpl
        def anarchon_run_finished(self, scheduler: Scheduler, job: Any, run: Any) -> None:
            # The backend has the record: a later attempt of this run would be a duplicate, where
            # one after an ``end`` without this line is the re-run the lease rules allow (died before it).
            ledger.write("recorded", job=job.name, slot=run.slot_ms, attempt=run.attempt, fencing=run.fencing)

        @hookimpl
        def anarchon_slot_skipped(self, scheduler: Scheduler, job: Any, slot_ms: int, reason: str) -> None:
            ledger.write("skip", job=job.name, slot=slot_ms, reason=reason)

        @hookimpl
        def anarchon_claim_lost(self, scheduler: Scheduler, job: Any, slot_ms: int, reason: str) -> None:
            if reason in ("lost", "decided"):  # ordinary: counted, written once at the stop (the ledger's cost)
                ordinary[reason, slot_ms] += 1
            else:  # "unknown" (answer lost) and "stale" (lease lost mid-run)
                ledger.write("lost", job=job.name, slot=slot_ms, reason=reason)

        @hookimpl
        def anarchon_scheduler_stopped(self, scheduler: Scheduler) -> None:
            # Claims sent and lost, and slots heard decided (no claim sent): what ranked claims save. Per
            # slot ({slot: [lost, decided]}), so a reader counts its own window: start-up is not the pace.
            slots: dict[str, list[int]] = {}
            for (reason, slot), count in ordinary.items():
                slots.setdefault(str(slot), [0, 0])[reason == "decided"] += count
            ledger.write("claims", slots=slots)

    scheduler = Scheduler(
        _build_backend(args),
        instance_id=args.id,
        plugins=[Observer()],
        clock=SkewedClock(args.skew_ms) if args.skew_ms else None,
    )
    options = json.loads(args.options or "{}")
    if args.die_mid_claim:
        _die_mid_claim(scheduler, args.die_mid_claim, ledger)

    def make(name: str, seconds: float) -> Any:
        async def job(ctx: RunContext) -> None:
            fields = {"job": name, "slot": ctx.slot_ms, "attempt": ctx.attempt, "fencing": ctx.fencing}
            ledger.write("start", **fields, catch_up=ctx.catch_up, missed=ctx.missed, manual=ctx.manual)
            try:
                if seconds:
                    await asyncio.sleep(seconds)
            except asyncio.CancelledError:
                ledger.write("cancel", **fields, lease_lost=ctx.lease_lost)  # when it stopped tells overlap
                raise
            ledger.write("end", **fields)

        return job

    for i in range(args.jobs):
        name = f"{args.job_prefix}{i:02d}"
        scheduler.add(name, args.cron, make(name, args.job_seconds), **options)

    def make_flaky(name: str, fails: int) -> Any:
        async def job(ctx: RunContext) -> None:
            ledger.write("try", job=name, slot=ctx.slot_ms, attempt=ctx.attempt, retry=ctx.retry)
            if ctx.retry < fails:
                raise RuntimeError(f"{name}: try {ctx.retry} fails on purpose")

        return job

    for name, spec in json.loads(args.flaky or "{}").items():
        scheduler.add(
            name, spec["cron"], make_flaky(name, int(spec["fails"])), **{**options, **spec.get("options", {})}
        )
    if args.slow_cron:
        slow_options = {**options, **json.loads(args.slow_options or "{}")}
        name = f"{args.job_prefix}slow"
        scheduler.add(name, args.slow_cron, make(name, args.slow_seconds), **slow_options)
    scheduler.run(grace_ms=args.grace_ms)


def _exists(path: str) -> bool:
    """One stat per granted batch, in a test instance: too short to block its loop."""
    return os.path.exists(path)


def _die_mid_claim(scheduler: Any, trigger: str, ledger: _Ledger) -> None:
    """Fault injection: once ``trigger`` exists, the first instance whose claim batch the store
    granted takes the file (unlink: one winner) and kills itself with SIGKILL before running
    any of it: its grants are in the store, under a live heartbeat, with nobody to run them."""
    backend = scheduler.backend
    claim = backend.claim

    async def claim_then_die(claims: Any) -> Any:
        results = await claim(claims)
        won = [(c.job, c.slot_ms) for c, r in zip(claims, results, strict=True) if r.grant is not None]
        if won and _exists(trigger):
            try:
                os.unlink(trigger)
            except FileNotFoundError:
                return results
            ledger.write("die", granted=won)
            os.kill(os.getpid(), signal.SIGKILL)
        return results

    backend.claim = claim_then_die


def _instance_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m anarchon_conformance.instance")
    p.add_argument("--id", required=True)
    p.add_argument("--ledger", required=True)
    p.add_argument("--backend", help="backend URL")
    p.add_argument("--backend-class", help="module:Class, built with --backend-kwargs")
    p.add_argument("--backend-kwargs", help="JSON object")
    p.add_argument("--jobs", type=int, default=5)
    p.add_argument("--job-prefix", default="job-")
    p.add_argument("--cron", default="* * * * * *")
    p.add_argument("--job-seconds", type=float, default=0.0, help="how long each ordinary job runs")
    p.add_argument("--options", help="JSON object of job options")
    p.add_argument("--slow-cron")
    p.add_argument("--slow-seconds", type=float, default=3.0)
    p.add_argument("--slow-options", help="JSON object of options for the slow job")
    p.add_argument(
        "--flaky", help='JSON {"name": {"cron": …, "fails": N, "options": {…}}}: jobs that raise on their first N tries'
    )
    p.add_argument("--skew-ms", type=int, default=0)
    p.add_argument("--grace-ms", type=int, default=10_000)
    p.add_argument("--die-mid-claim", help="a path: once it exists, SIGKILL after a granted claim batch")
    return p


def main(argv: Sequence[str] | None = None) -> None:
    _instance_main(_instance_parser().parse_args(list(sys.argv[1:] if argv is None else argv)))


if __name__ == "__main__":
    main()
