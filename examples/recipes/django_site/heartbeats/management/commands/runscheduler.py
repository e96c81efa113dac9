"""``python manage.py runscheduler``: a process that only runs the site's scheduled jobs.

Blocks until SIGTERM or SIGINT, then stops gracefully (running jobs get
``--grace-ms``, then their leases are handed over). Run it beside the web
processes, as many copies as you like, against one backend.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser


class Command(BaseCommand):
    help = "Run the site's anarchon jobs until SIGTERM or SIGINT."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--grace-ms", type=int, default=10_000, help="time running jobs get on stop")

    def handle(self, *args: Any, grace_ms: int, **options: Any) -> None:
        from heartbeats.jobs import scheduler

        self.stdout.write(f"anarchon: {len(scheduler.jobs)} jobs on {scheduler.backend!r}")
        self.stdout.flush()
        scheduler.run(grace_ms=grace_ms)
        self.stdout.write("anarchon: stopped")
