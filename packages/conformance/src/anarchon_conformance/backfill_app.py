"""The scheduler an ``anarchon backfill`` process of the multi-process test loads (``module:attr``).

``anarchon backfill anarchon_conformance.backfill_app:scheduler JOB …`` with
the environment naming the backend (``ANARCHON_CF_BACKEND``: the fleet's
backend keyword arguments as JSON), the ledger (``ANARCHON_CF_LEDGER``), the
job names and cron (``ANARCHON_CF_JOBS``, ``ANARCHON_CF_CRON``): the same jobs
as the fleet's instances (:mod:`anarchon_conformance.instance`), writing the
same ``start``/``end`` ledger lines, so one ledger counts every run of a slot
by whoever made it.
"""

from __future__ import annotations

import json
import os

from anarchon import RunContext, Scheduler

from .instance import _Ledger, build_backend

__all__ = ["scheduler"]


def scheduler() -> Scheduler:
    spec = json.loads(os.environ["ANARCHON_CF_BACKEND"])
    instance = f"backfill-{os.getpid()}"
    ledger = _Ledger(os.environ["ANARCHON_CF_LEDGER"], instance)
    built = Scheduler(build_backend(**spec), instance_id=instance)

    def make(name: str) -> object:
        async def job(ctx: RunContext) -> None:
            fields = {"job": name, "slot": ctx.slot_ms, "attempt": ctx.attempt, "fencing": ctx.fencing}
            ledger.write("start", **fields, catch_up=ctx.catch_up, missed=ctx.missed, manual=ctx.manual)
            ledger.write("end", **fields)

        return job

    options = json.loads(os.environ.get("ANARCHON_CF_OPTIONS", "{}"))
    for name in os.environ["ANARCHON_CF_JOBS"].split(","):
        built.add(name, os.environ["ANARCHON_CF_CRON"], make(name), **options)  # type: ignore[arg-type]
    return built
