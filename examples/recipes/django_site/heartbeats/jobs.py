"""The site's scheduled jobs: one scheduler, shared by the AppConfig and the management command.

Sync jobs run in anarchon's worker threads, which Django knows nothing about:
no request starts or ends there, so nothing closes a database connection
that went stale (``CONN_MAX_AGE``, a restarted database). Call
``close_old_connections()`` before and after the ORM work, as Django does
around each request.
"""

from __future__ import annotations

from django.db import close_old_connections

from anarchon import RunContext, Scheduler

scheduler = Scheduler()  # ANARCHON_BACKEND, else sqlite:///anarchon.sqlite3


@scheduler.job("* * * * * *", name="django-heartbeat", jitter_ms=200)
def heartbeat(ctx: RunContext) -> None:
    from .models import Heartbeat

    close_old_connections()
    try:
        Heartbeat.objects.create(slot_ms=ctx.slot_ms, instance=ctx.instance)
    finally:
        close_old_connections()


@scheduler.task(name="report")
def report(ctx: RunContext, tenant: str) -> None:
    """The work: build and mail one tenant's report. Its schedule ``report-<tenant>`` is stored, set by the
    tenant through tenants/views.py; every process that runs this scheduler runs it, once per slot."""
