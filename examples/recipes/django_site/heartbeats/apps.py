"""Start the scheduler with the web process: ``AppConfig.ready``, gated by ``ANARCHON_AUTOSTART=1``.

``ready()`` runs in every process that sets Django up: each ``manage.py``
command (``migrate``, ``shell``, the test runner), and under ``runserver``
both the reloader's watcher and the server it restarts. Starting a
scheduler in each would make every ``migrate`` an instance for a moment, so
this starts it only where the environment asks (set the variable in the
web service's unit or container). Under gunicorn, start it per worker
instead (gunicorn_conf.py). The management command ``runscheduler`` is the
other way: a process of its own that only schedules.
"""

from __future__ import annotations

import os

from django.apps import AppConfig


class HeartbeatsConfig(AppConfig):
    name = "heartbeats"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        if os.environ.get("ANARCHON_AUTOSTART") != "1":
            return
        from anarchon import start_in_background

        from .jobs import scheduler

        self.anarchon = start_in_background(scheduler)  # stops, with hand-over, at interpreter exit
