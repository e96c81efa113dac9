"""The pages (jobs, job, run, fleet); each answers HTML or JSON. Steering is in ``_steering``.

Backend calls per page (README, "Cost of a page"): the jobs page makes one
``history`` call per job row it shows (at most ``per_page``, all in flight at
once), the job page one, the run page one, whatever the fleet's size or the
history's length. Names in the URL are looked up in the registered job list
before anything reaches a backend.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from anarchon import Job, RunStatus
from anarchon.run import datetime_to_ms

from ._charts import charts
from ._figures import figures
from ._present import job_dict, next_slots, run_dict, slot_dict, utc
from ._render import Renderer
from ._settings import Settings
from ._slots import OUTCOMES, strip
from ._source import Source

__all__ = ["BadRequest", "Views"]

_MANUAL = {"": None, "any": None, "yes": True, "no": False}


class BadRequest(Exception):
    """A query parameter that cannot be used; the message says which and what to send."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def _int_param(request: Request, name: str, default: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    # ASCII only: str.isdigit() accepts '²' (which int() refuses: a 500) and int() reads '٣' as 3.
    if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= high:
        raise BadRequest(f"{name}={raw!r} is not usable: give an integer from 1 to {high}")
    return int(raw)


def _time_param(request: Request, name: str) -> int | None:
    """``from``/``to`` as epoch ms: an ISO 8601 date or time, UTC unless it names an offset."""
    raw = request.query_params.get(name, "")
    if not raw:
        return None
    try:
        if not raw.isascii() or len(raw) > 40:  # fromisoformat reads non-ASCII digits too
            raise ValueError
        moment = datetime.fromisoformat(raw)
    except ValueError:
        raise BadRequest(
            f"{name}={raw!r} is not a time: give an ISO 8601 date or time in UTC, e.g. 2026-12-05 or "
            "2026-12-05T14:30, or one with its offset (2026-12-05T14:30+01:00)"
        ) from None
    return datetime_to_ms(moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc))


class Views:
    def __init__(self, source: Source, settings: Settings, renderer: Renderer) -> None:
        self.source, self.settings, self.render = source, settings, renderer

    def _job(self, request: Request) -> Job:
        name = request.path_params["name"]
        job = self.source.job(name)
        if job is None:
            raise BadRequest(f"no job named {name!r} is registered on this dashboard; see the jobs page", 404)
        return job

    def _now(self) -> int:
        return self.source.scheduler.clock.now_ms()

    def _stored(self, name: str) -> bool:
        """Whether the job is a stored schedule (changed with ``anarchon schedules``, not in code)."""
        fleet = self.source.fleet
        return fleet is not None and name in fleet.stored

    def _pause(self, name: str) -> dict[str, Any] | None:
        """The job's pause in force (since, by whom, why), ``None`` when it runs."""
        found = self.source.pauses.get(name)
        if found is None:
            return None
        return {"since": utc(found.since_ms), "since_ms": found.since_ms, "by": found.by, "reason": found.reason}

    def _drift(self, name: str) -> dict[str, Any] | None:
        """A job's definitions side by side where live instances differ (``None`` where they do not)."""
        job = self.source.fleet_job(name)
        if job is None or not job.drift:
            return None
        fields = job.differing_fields()
        variants = [
            {
                "fingerprint": fp,
                "instances": list(holders),
                "values": {f: d.cron if f == "cron" else d.options.get(f) for f in fields},
            }
            for fp, (d, holders) in job.definitions.items()
        ]
        assert self.source.fleet is not None
        running = self.source.fleet.running(job).fingerprint
        return {"fields": fields, "variants": variants, "running": running}

    async def fleet(self, request: Request) -> Response:
        await self.source.refresh()
        fleet = self.source.fleet
        if fleet is None:
            raise BadRequest(
                f"this dashboard's backend ({self.source.backend_label}) keeps no fleet registry, or it could not be "
                "read; the jobs page still shows the jobs",
                404,
            )
        instances = [
            {"instance": i.instance, "host": i.host, "pid": i.pid, "version": i.version, "started": utc(i.started_ms),
             "last_seen": utc(i.seen_ms), "jobs": i.jobs, "drift_policy": i.drift}
            for i in fleet.instances
        ]  # fmt: skip
        drifting = [j.name for j in fleet.jobs() if j.drift]
        now = self._now()
        groups = [g.to_dict(now) for g in await self.source.groups()]
        data = {"now": utc(now), "backend": self.source.backend_label, "instances": instances,
                "drifting": drifting, "groups": groups}  # fmt: skip
        return self.render(request, "fleet.html", data)

    async def jobs(self, request: Request) -> Response:
        await self.source.refresh()
        query = request.query_params.get("q", "").strip()
        names = self.source.names()
        if query:
            names = [n for n in names if query.lower() in n.lower()]
        per_page = _int_param(request, "per_page", self.settings.per_page, 500)
        pages = max(1, math.ceil(len(names) / per_page))
        page = _int_param(request, "page", 1, pages)
        shown = [self.source.jobs[n] for n in names[(page - 1) * per_page : page * per_page] if n in self.source.jobs]
        histories = await self.source.histories(shown, self.settings.strip_slots + 10)
        now = self._now()
        rows = []
        for job, runs in zip(shown, histories, strict=True):
            rows.append(
                {
                    **job_dict(job),
                    "next": next_slots(job, now, 3),
                    "last": run_dict(runs[0]) if runs else None,
                    "strip": [slot_dict(s) for s in strip(job, runs, now, self.settings.strip_slots)],
                    "drift": self._drift(job.name),
                    "stored": self._stored(job.name),
                    "paused": self._pause(job.name),
                }
            )
        data = {"now": utc(now), "backend": self.source.backend_label, "kind": self.source.kind,
                "q": query, "page": page, "pages": pages, "per_page": per_page, "total": len(names),
                "jobs": rows, "fleet": self.source.fleet is not None}  # fmt: skip
        return self.render(request, "jobs.html", data, outcomes=OUTCOMES, live=True)

    async def job(self, request: Request) -> Response:
        await self.source.refresh()
        job = self._job(request)
        status = request.query_params.get("status", "")
        if status and status not in {s.value for s in RunStatus}:
            raise BadRequest(
                f"status={status!r} is not a run status: use one of {', '.join(s.value for s in RunStatus)}"
            )
        manual_raw = request.query_params.get("manual", "")
        if manual_raw not in _MANUAL:
            raise BadRequest(f"manual={manual_raw!r}: use yes, no or any")
        instance = request.query_params.get("instance", "")
        runs = await self.source.history(job, self.settings.history_limit)
        instances = sorted({r.instance for r in runs})
        if instance and instance not in instances:
            raise BadRequest(f"instance={instance!r} ran nothing in this job's history; instances: {instances}")
        manual = _MANUAL[manual_raw]
        since, until = _time_param(request, "from"), _time_param(request, "to")
        if since is not None and until is not None and until < since:
            raise BadRequest("to= is before from=: give a range whose end is at or after its start")
        chosen = [
            r
            for r in runs
            if (not status or r.status.value == status)
            and (not instance or r.instance == instance)
            and (manual is None or r.manual is manual)
            and (since is None or r.slot_ms >= since)
            and (until is None or r.slot_ms <= until)
        ]
        per_page = _int_param(request, "per_page", 50, 1000)
        pages = max(1, math.ceil(len(chosen) / per_page))
        page = _int_param(request, "page", 1, pages)
        now = self._now()
        slots = strip(job, runs, now, self.settings.timeline_slots)
        rows = [{"instance": i, "cells": [slot_dict(s) if s.run and s.run.instance == i else None for s in slots]}
                for i in sorted({s.run.instance for s in slots if s.run})]  # fmt: skip
        rows.append({"instance": "(no record)", "cells": [None if s.run else slot_dict(s) for s in slots]})
        data = {
            "now": utc(now), "backend": self.source.backend_label, "kind": self.source.kind,
            "job": job_dict(job), "next": next_slots(job, now, 5), "figures": figures(runs).to_dict(),
            "filters": {"status": status, "instance": instance, "manual": manual_raw,
                        "from": request.query_params.get("from", ""), "to": request.query_params.get("to", "")},
            "instances": instances, "statuses": [s.value for s in RunStatus],
            "page": page, "pages": pages, "per_page": per_page, "total": len(chosen), "read": len(runs),
            "runs": [run_dict(r) for r in chosen[(page - 1) * per_page : page * per_page]],
            "timeline": {"slots": [slot_dict(s) for s in slots], "rows": rows},
            "drift": self._drift(job.name), "paused": self._pause(job.name),
            "charts": charts(runs, since, until),  # the range of from/to only, not the other filters
        }  # fmt: skip
        return self.render(request, "job.html", data, outcomes=OUTCOMES, actions=self.settings.actions, live=True)

    async def run(self, request: Request) -> Response:
        await self.source.refresh()
        job = self._job(request)
        slot_ms = request.path_params["slot_ms"]
        manual = request.query_params.get("manual", "no") == "yes"
        runs = await self.source.history(job, self.settings.history_limit)
        found = next((r for r in runs if r.slot_ms == slot_ms and r.manual is manual), None)
        if found is None:
            raise BadRequest(
                f"job {job.name!r} has no {'manual ' if manual else ''}run of slot {slot_ms} in its history", 404
            )
        return self.render(
            request, "run.html", {"job": job_dict(job), "run": run_dict(found), "backend": self.source.backend_label}
        )
