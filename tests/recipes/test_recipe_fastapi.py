"""The FastAPI recipe: the scheduler on the application's own loop, started and stopped by ``lifespan``."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

from fastapi.testclient import TestClient


def test_lifespan_starts_and_stops_the_scheduler_and_handlers_await_it(
    load_recipe: Callable[[str], ModuleType],
) -> None:
    recipe = load_recipe("fastapi_app")
    with TestClient(recipe.app) as client:  # runs the lifespan: start() on the app's loop
        assert recipe.scheduler._started
        run = client.post("/jobs/fastapi-refresh/run")
        assert run.status_code == 200, run.text
        assert run.json() == {"status": "succeeded", "instance": recipe.scheduler.instance_id, "manual": True}
        runs = client.get("/jobs/fastapi-refresh/runs").json()
        assert [r["status"] for r in runs][:1] == ["succeeded"]
        assert client.get("/jobs/nosuch/runs").status_code == 404
        assert client.post("/jobs/nosuch/run").status_code == 404
    assert not recipe.scheduler._started  # the lifespan's exit stopped it
