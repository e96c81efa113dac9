"""Recipe: anarchon in a FastAPI application, on the application's own event loop.

An ASGI server already runs a loop, so no thread is needed: the ``lifespan``
starts the scheduler when the application starts and stops it (with
hand-over of running jobs) when it shuts down, and handlers await the
scheduler directly. Run one scheduler per server process; with
``uvicorn --workers N`` each worker is an instance and each slot runs on one.

    ANARCHON_BACKEND=redis://cache:6379/0 uvicorn fastapi_app:app
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, HTTPException

from anarchon import JobNotFoundError, RunContext, Scheduler

scheduler = Scheduler()  # ANARCHON_BACKEND, else sqlite:///anarchon.sqlite3


@scheduler.job("*/5 * * * *", name="fastapi-refresh", timeout_ms=60_000)
async def refresh(ctx: RunContext) -> None:
    """An async job runs on the server's loop: never block in it (use a plain function for blocking work)."""


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    async with scheduler:  # start(): raises if the backend cannot be reached, so the app does not start
        yield
    # stop(): running jobs get 10 s, then their leases are handed over to another instance


app = FastAPI(lifespan=lifespan)


@app.get("/jobs/{name}/runs")
async def runs(name: str) -> list[dict[str, Any]]:
    if name not in scheduler.jobs:
        raise HTTPException(404, f"no job {name!r}")
    history = await scheduler.history(name, limit=20)
    return [{"slot": r.slot.isoformat(), "status": r.status.value, "instance": r.instance} for r in history]


@app.post("/jobs/{name}/run")
async def run_now(name: str) -> dict[str, Any]:
    try:
        run = await scheduler.run_now(name)
    except JobNotFoundError as exc:
        raise HTTPException(404, str(exc)) from None
    return {"status": run.status.value, "instance": run.instance, "manual": run.manual}
