"""A paused job's slots (``Scheduler.pause``) show as paused on every page, not as missed."""

from __future__ import annotations

import time
import uuid
from typing import Any

from starlette.testclient import TestClient

import anarchon_web
from anarchon import Claim, Job, Scheduler

MINUTE = 60_000


async def test_a_paused_slot_is_drawn_paused(store: Any, fixed_clock: Any) -> None:
    backend = await store.started()
    now = time.time_ns() // 1_000_000 // MINUTE * MINUTE
    job = Job("held", "* * * * *", lambda: None, backend.job_options("held", {}))
    await backend.pause(job.name, reason="test", by="i1")
    slot = now - 2 * MINUTE
    claim = Claim(job=job, slot_ms=slot, instance="i1", token=uuid.uuid4().hex, now_ms=slot + 5)
    (answer,) = await backend.claim_paused([claim])
    assert answer is not None and str(answer.outcome) == "paused"
    scheduler = Scheduler(store.backend(), clock=fixed_clock(now + 1000))
    scheduler.add(job.name, job.cron, lambda: None)
    with TestClient(anarchon_web.app(scheduler, open_backend=True)) as client:
        data = client.get("/", params={"format": "json"}).json()
        (held,) = data["jobs"]
        outcomes = {s["slot_ms"]: s["outcome"] for s in held["strip"]}
        assert outcomes[slot] == "paused"
        page = client.get(f"/jobs/{job.name}")
    assert page.status_code == 200
    assert "paused" in page.text


async def test_the_pause_in_force_shows_since_by_whom_and_why_on_both_pages(store: Any, fixed_clock: Any) -> None:
    backend = await store.started()
    now = time.time_ns() // 1_000_000 // MINUTE * MINUTE
    scheduler = Scheduler(store.backend(), clock=fixed_clock(now + 1000))
    for name in ("held", "running"):
        scheduler.add(name, "* * * * *", lambda: None)
    state = await backend.pause("held", reason="<b>db migration</b> until 14:00", by="alice@ops")
    with TestClient(anarchon_web.app(scheduler, open_backend=True)) as client:
        jobs = {j["name"]: j for j in client.get("/", params={"format": "json"}).json()["jobs"]}
        assert jobs["running"]["paused"] is None
        paused = jobs["held"]["paused"]
        assert (paused["by"], paused["reason"], paused["since_ms"]) == (
            "alice@ops",
            "<b>db migration</b> until 14:00",
            state.since_ms,
        )
        listing = client.get("/").text
        assert 'class="tag paused"' in listing and "by alice@ops: &lt;b&gt;db migration&lt;/b&gt;" in listing
        page = client.get("/jobs/held").text
        assert 'id="pause"' in page and "<b>alice@ops</b>: &lt;b&gt;db migration&lt;/b&gt; until 14:00" in page
        assert "<b>db migration</b>" not in page, "the reason reached the page unescaped"
        assert 'id="pause"' not in client.get("/jobs/running").text
        await backend.resume("held", by="alice@ops")
        assert client.get("/jobs/held", params={"format": "json"}).json()["paused"] is None
        assert 'class="tag paused"' not in client.get("/").text
