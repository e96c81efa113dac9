"""The Flask recipe, served by a real threaded WSGI server, called from many client threads."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from types import ModuleType

import httpx
from werkzeug.serving import make_server


def test_flask_handlers_in_many_threads_share_one_background_scheduler(
    load_recipe: Callable[[str], ModuleType],
) -> None:
    recipe = load_recipe("flask_app")
    app = recipe.create_app()
    handle = app.extensions["anarchon"]
    server = make_server("127.0.0.1", 0, app, threaded=True)
    base = f"http://127.0.0.1:{server.server_port}"
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    try:

        def run_now(_: int) -> dict[str, object]:
            response = httpx.post(f"{base}/jobs/flask-cleanup/run", timeout=60)
            response.raise_for_status()
            return response.json()

        def runs(_: int) -> int:
            response = httpx.get(f"{base}/jobs/flask-cleanup/runs", timeout=30)
            response.raise_for_status()
            return len(response.json())

        with ThreadPoolExecutor(6) as pool:
            started = list(pool.map(run_now, range(6)))
            counted = list(pool.map(runs, range(6)))
        missing = httpx.get(f"{base}/jobs/nosuch/runs", timeout=30)
    finally:
        server.shutdown()
        handle.stop()
    # Six manual runs at once on a lease backend: the overlap rule lets some through and skips the rest.
    statuses = [r["status"] for r in started]
    assert set(statuses) <= {"succeeded", "skipped"} and "succeeded" in statuses, statuses
    assert all(r["instance"] == recipe.scheduler.instance_id for r in started if r["status"] == "succeeded")
    assert min(counted) >= statuses.count("succeeded")
    assert missing.status_code == 404
    assert not handle.running
