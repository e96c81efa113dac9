"""Recipe: each tenant picks when its report runs, in a FastAPI application, with stored schedules.

Every process registers the task; a tenant's schedule is stored in the backend
under a name of its own, so any process may change it and every process runs
it from its next slot, once per slot across the fleet. ``PUT`` with
``if_revision`` turns a concurrent edit into a 409 instead of a lost update.

    ANARCHON_BACKEND=postgresql://db/app uvicorn tenant_schedules:app --workers 4
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, HTTPException
from pydantic import BaseModel

from anarchon import InvalidJobError, JobNotFoundError, RunContext, ScheduleConflictError, Scheduler

scheduler = Scheduler()  # ANARCHON_BACKEND, else sqlite:///anarchon.sqlite3
reports: list[tuple[int, int]] = []  # (tenant, slot): what this process ran, for the demo and its test


@scheduler.task(name="tenant-report")
async def tenant_report(ctx: RunContext, tenant: int) -> None:
    """The work: build and mail one tenant's report. ``ctx.job.name`` is the schedule's name."""
    reports.append((tenant, ctx.slot_ms))


class ReportSchedule(BaseModel):
    cron: str  # e.g. "0 7 * * 1-5", or "H 7 * * *" to spread tenants over the hour
    timezone: str = "UTC"
    if_revision: int | None = None  # the revision the editor read: a 409 if someone changed it since


def _name(tenant: int) -> str:
    return f"report-tenant-{tenant}"  # only digits from the path: a valid, bounded schedule name


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    async with scheduler:
        yield


app = FastAPI(lifespan=lifespan)


@app.put("/tenants/{tenant}/report-schedule")
async def put_schedule(tenant: int, body: ReportSchedule) -> dict[str, Any]:
    schedules, name = scheduler.schedules, _name(tenant)
    try:
        try:
            current = await schedules.get(name)
        except JobNotFoundError:
            stored = await schedules.add(
                name, task="tenant-report", cron=body.cron, timezone=body.timezone, kwargs={"tenant": tenant},
                by=f"tenant-{tenant}",
            )  # fmt: skip
        else:
            stored = await schedules.set(
                name, cron=body.cron, timezone=body.timezone, by=f"tenant-{tenant}",
                if_revision=body.if_revision if body.if_revision is not None else current.revision,
            )  # fmt: skip
    except ScheduleConflictError as exc:
        raise HTTPException(409, str(exc)) from None
    except InvalidJobError as exc:  # a bad cron or time zone: the message names the field and the fix
        raise HTTPException(422, str(exc)) from None
    return stored.to_dict()


@app.get("/tenants/{tenant}/report-schedule")
async def get_schedule(tenant: int) -> dict[str, Any]:
    try:
        return (await scheduler.schedules.get(_name(tenant))).to_dict()
    except JobNotFoundError as exc:
        raise HTTPException(404, str(exc)) from None


@app.delete("/tenants/{tenant}/report-schedule")
async def delete_schedule(tenant: int) -> dict[str, Any]:
    try:
        revision = await scheduler.schedules.remove(_name(tenant), by=f"tenant-{tenant}")
    except ScheduleConflictError as exc:
        raise HTTPException(404, str(exc)) from None
    return {"removed": _name(tenant), "revision": revision}
