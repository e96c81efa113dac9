"""How records look on a page and in the JSON API: times in UTC and in the job's zone."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo

from anarchon import Job, Run
from anarchon.run import datetime_to_ms

from ._slots import Slot, outcome_of

__all__ = ["iso", "job_dict", "local", "next_slots", "run_dict", "slot_dict", "start_delay_ms", "utc"]


@lru_cache(maxsize=512)
def _zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


def utc(ms: int | None) -> str:
    """``2026-12-01 13:47:05.250Z``: to the millisecond, since slots a second apart must read apart."""
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def local(ms: int, zone: str) -> str:
    """The same instant on the job's wall clock, with the zone's abbreviation."""
    moment = datetime.fromtimestamp(ms / 1000, tz=_zone(zone))
    return moment.strftime("%Y-%m-%d %H:%M:%S ") + (moment.tzname() or zone)


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat()


def start_delay_ms(run: Run) -> int | None:
    return None if run.started_at is None else datetime_to_ms(run.started_at) - run.slot_ms


def run_dict(run: Run) -> dict[str, Any]:
    """The record as ``anarchon history --json`` prints it, plus the dashboard's outcome word."""
    return {**run.to_dict(), "outcome": outcome_of(run), "start_delay_ms": start_delay_ms(run)}


def slot_dict(slot: Slot) -> dict[str, Any]:
    run = slot.run
    return {
        "slot": iso(slot.slot_ms),
        "slot_ms": slot.slot_ms,
        "outcome": slot.outcome,
        "instance": run.instance if run else None,
        "attempt": run.attempt if run else None,
    }


def next_slots(job: Job, now_ms: int, count: int) -> list[dict[str, Any]]:
    out = []
    for moment in job.slots(after=datetime.fromtimestamp(now_ms / 1000, tz=timezone.utc), count=count):
        ms = datetime_to_ms(moment)
        out.append({"utc": iso(ms), "local": local(ms, job.timezone), "slot_ms": ms})
    return out


def job_dict(job: Job) -> dict[str, Any]:
    """A job's schedule and resolved options (none of which is a secret: they are plain numbers and names).

    Every field of :class:`~anarchon.JobOptions` is listed, read from the
    dataclass, so an option added to the core shows here without a change;
    ``max_takeovers`` (the name ``add()`` takes) beside ``max_attempts`` (the
    field backends read, kept for readers of the JSON API).
    """
    o = job.options
    options: dict[str, Any] = {f.name: getattr(o, f.name) for f in dataclasses.fields(o) if f.name != "timezone"}
    options["max_takeovers"] = o.max_takeovers
    return {"name": job.name, "cron": job.cron, "timezone": job.timezone, "options": options}
