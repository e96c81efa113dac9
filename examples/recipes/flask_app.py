"""Recipe: anarchon inside a Flask application (threads, no event loop of its own).

The scheduler runs on a loop in a thread of its own (``start_in_background``);
request handlers, in whatever threads the WSGI server uses, ask it for history
or a manual run through the handle, which is safe from any thread. Every
process of the application (several hosts, several workers) starts the same
scheduler against the same backend, and each slot runs on one of them.

    ANARCHON_BACKEND=redis://cache:6379/0 flask --app flask_app run

Start the scheduler once per process, after any fork (see gunicorn_app.py),
and not in the reloader's watcher process of ``flask run --debug``.
"""

from __future__ import annotations

import os
import time

from flask import Flask, abort, jsonify

from anarchon import RunContext, Scheduler, start_in_background

scheduler = Scheduler()  # ANARCHON_BACKEND, else sqlite:///anarchon.sqlite3


@scheduler.job("* * * * *", name="flask-cleanup", jitter_ms=0)
def cleanup(ctx: RunContext) -> None:
    """A plain function: it runs in a worker thread, so blocking calls are fine here."""
    time.sleep(0.01)  # stands in for the real work: a query, an HTTP call


def create_app() -> Flask:
    app = Flask(__name__)
    if os.environ.get("WERKZEUG_RUN_MAIN") != "false":  # not the reloader's watcher process
        # Raises here if the backend cannot be reached; stops (and hands over) at interpreter exit.
        app.extensions["anarchon"] = start_in_background(scheduler)

    @app.get("/jobs/<name>/runs")
    def runs(name: str) -> object:
        if name not in scheduler.jobs:
            abort(404)
        history = app.extensions["anarchon"].history(name, limit=20, timeout=5)
        return jsonify(
            [{"slot": r.slot.isoformat(), "status": r.status.value, "instance": r.instance} for r in history]
        )

    @app.post("/jobs/<name>/run")
    def run_now(name: str) -> object:
        if name not in scheduler.jobs:
            abort(404)
        run = app.extensions["anarchon"].run_now(name, timeout=60)
        return jsonify({"status": run.status.value, "instance": run.instance, "error": run.error})

    return app
