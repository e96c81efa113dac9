"""A tenant sees and changes the hour of its daily report: the stored schedule ``report-<tenant>``.

GET answers the schedule as JSON. POST (form fields ``hour``, ``timezone`` and,
optionally, the ``revision`` the page showed) changes it, and creates it on the
first POST. The schedule lives in the backend, not in a model: every process
that runs the site's scheduler (with the task ``report``, heartbeats/jobs.py)
picks the change up within a second. POST goes through Django's CSRF check.
"""

from __future__ import annotations

import re

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_http_methods

from anarchon import InvalidJobError, JobNotFoundError, ScheduleConflictError, StoredSchedule, SyncSchedules

TENANT = re.compile(r"[A-Za-z0-9_-]{1,64}")  # what a job name may hold: the schedule's name is made of it
NUMBER = re.compile(r"[0-9]{1,9}")  # ASCII digits only: int() would also read "\u0667" (Arabic-Indic 7)


def _answer(schedule: StoredSchedule) -> JsonResponse:
    return JsonResponse({"cron": schedule.cron, "timezone": schedule.timezone, "revision": schedule.revision})


def _refuse(status: int, error: str, **extra: object) -> JsonResponse:
    return JsonResponse({"error": error, **extra}, status=status)


@require_http_methods(["GET", "POST"])
def report_schedule(request: HttpRequest, tenant: str) -> JsonResponse:
    if not TENANT.fullmatch(tenant):
        return _refuse(400, "tenant: use 1 to 64 letters, digits, '-' or '_'")
    # A real site checks here that request.user may edit this tenant.
    user = getattr(request, "user", None)
    by = user.get_username() if user is not None and user.is_authenticated else "django"
    schedules = SyncSchedules(settings.ANARCHON_BACKEND, by=by)  # one per request: views run in many threads
    name = f"report-{tenant}"
    try:
        current: StoredSchedule | None = schedules.get(name)
    except JobNotFoundError:
        current = None
    if request.method == "GET":
        if current is None:
            return _refuse(404, f"tenant {tenant!r} has no report schedule yet")
        return _answer(current)

    hour, revision = request.POST.get("hour", ""), request.POST.get("revision", "")
    if not NUMBER.fullmatch(hour) or int(hour) > 23:
        return _refuse(400, f"hour={hour!r} must be a whole hour from 0 to 23")
    if revision and not NUMBER.fullmatch(revision):
        return _refuse(400, f"revision={revision!r} must be the revision the GET answered")
    fields = current.cron.split() if current else []
    minute = fields[0] if len(fields) == 5 else "0"  # keep the minute the tenant has; only the hour changes
    cron, timezone = f"{minute} {int(hour)} * * *", request.POST.get("timezone", "")
    # Written against the revision the page read (else the one read above): a change made since is a 409.
    expected = int(revision) if revision else (current.revision if current else None)
    try:
        if expected is None:
            stored = schedules.add(name, task="report", cron=cron, timezone=timezone, kwargs={"tenant": tenant})
        else:
            stored = schedules.set(name, cron=cron, timezone=timezone, if_revision=expected)
    except ScheduleConflictError as exc:  # nothing was written; the page reloads and asks again
        return _refuse(409, str(exc), revision=exc.current)
    except InvalidJobError as exc:  # the message names the field (timezone=...) and the fix
        return _refuse(400, str(exc), field=exc.option)
    return _answer(stored)
