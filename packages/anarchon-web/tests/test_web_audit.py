"""The audit page (``/audit``): the backend's audit trail, newest first, escaped, paged and filtered by job."""

from __future__ import annotations

from typing import Any

from starlette.testclient import TestClient

import anarchon_web
from anarchon import Scheduler


async def _steered(store: Any) -> Scheduler:
    """Three actions by two people on two jobs, recorded through the scheduler as the CLI and the API do."""
    scheduler = Scheduler(store.backend())
    for name in ("held", "other"):
        scheduler.add(name, "* * * * *", lambda: None)
    await scheduler.pause("held", reason="<b>db migration</b>", by="alice@ops")
    await scheduler.resume("held", reason="done", by="bob@ops")
    await scheduler.pause("other", by="alice@ops")
    return scheduler


async def test_the_audit_page_lists_each_action_newest_first_and_escaped(store: Any) -> None:
    scheduler = await _steered(store)
    with TestClient(anarchon_web.app(scheduler, open_backend=True)) as client:
        data = client.get("/audit", params={"format": "json"}).json()
        rows = [(e["action"], e["job"], e["by"], e["reason"]) for e in data["entries"]]
        assert rows == [
            ("pause", "other", "alice@ops", None),
            ("resume", "held", "bob@ops", "done"),
            ("pause", "held", "alice@ops", "<b>db migration</b>"),
        ]
        assert data["next_before"] is None
        page = client.get("/audit").text
        assert page.count('<tr data-audit="') == 3
        assert "&lt;b&gt;db migration&lt;/b&gt;" in page and "<b>db migration</b>" not in page
        assert 'href="/jobs/held"' in page, "a job the dashboard shows links to its page"


async def test_the_audit_page_pages_below_the_last_id_and_filters_by_job(store: Any) -> None:
    scheduler = await _steered(store)
    with TestClient(anarchon_web.app(scheduler, open_backend=True)) as client:
        first = client.get("/audit", params={"format": "json", "limit": "2"}).json()
        assert [e["job"] for e in first["entries"]] == ["other", "held"]
        assert first["next_before"] == first["entries"][-1]["id"]
        assert 'href="?limit=2&amp;before=' in client.get("/audit", params={"limit": "2"}).text
        rest = client.get("/audit", params={"format": "json", "limit": "2", "before": first["next_before"]}).json()
        assert [(e["action"], e["job"]) for e in rest["entries"]] == [("pause", "held")]
        held = client.get("/audit", params={"format": "json", "job": "held"}).json()
        assert [e["action"] for e in held["entries"]] == ["resume", "pause"]


async def test_bad_audit_parameters_are_refused_with_the_fix(sqlite_store: Any) -> None:
    scheduler = await _steered(sqlite_store)
    with TestClient(anarchon_web.app(scheduler, open_backend=True)) as client:
        for params, says in (
            ({"limit": "\u00b2"}, "limit='\u00b2' is not usable"),
            ({"limit": "0"}, "from 1 to 500"),
            ({"before": "x"}, "before='x'"),
            ({"job": "a b"}, "job='a b' is not a job name"),
        ):
            answer = client.get("/audit", params={**params, "format": "json"})
            assert answer.status_code == 400, params
            assert says in answer.json()["error"], answer.json()
