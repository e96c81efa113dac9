"""The per-tenant recipe: a tenant's schedule stored, run, changed under a revision check, and removed."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

from fastapi.testclient import TestClient


def test_a_tenant_schedule_is_stored_run_changed_and_removed(
    load_recipe: Callable[[str], ModuleType], wait_for: Callable[..., Any]
) -> None:
    recipe = load_recipe("tenant_schedules")
    with TestClient(recipe.app) as client:
        put = client.put("/tenants/42/report-schedule", json={"cron": "* * * * * *"})
        assert put.status_code == 200, put.text
        first = put.json()
        assert (first["task"], first["kwargs"], first["updated_by"]) == ("tenant-report", {"tenant": 42}, "tenant-42")
        wait_for(lambda: any(t == 42 for t, _ in recipe.reports), "the tenant's first report", 6)

        changed = client.put(
            "/tenants/42/report-schedule",
            json={"cron": "0 7 * * 1-5", "timezone": "Europe/Paris", "if_revision": first["revision"]},
        )
        assert changed.status_code == 200, changed.text
        assert changed.json()["timezone"] == "Europe/Paris"
        stale = client.put("/tenants/42/report-schedule", json={"cron": "0 8 * * *", "if_revision": first["revision"]})
        assert stale.status_code == 409, stale.text
        assert client.get("/tenants/42/report-schedule").json()["cron"] == "0 7 * * 1-5"
        bad = client.put("/tenants/42/report-schedule", json={"cron": "0 25 * * *"})
        assert bad.status_code == 422 and "hour" in bad.text

        assert client.delete("/tenants/42/report-schedule").status_code == 200
        assert client.get("/tenants/42/report-schedule").status_code == 404
        assert client.delete("/tenants/42/report-schedule").status_code == 404
