"""Steering, for signed-in users only: pause, resume, trigger, run now and backfill a job.

Every POST passes the CSRF check (``_csrf.check``) and calls the core with
the signed-in name as ``by``, so the pause, the request and the audit trail
say who did it. The destructive ones (pause, trigger, run now, backfill) first
answer a confirmation (a page with the details and a second form, or JSON
with ``"confirmed": false``) and act only on a POST carrying ``confirm=yes``;
a backfill's confirmation is its dry run: the slots that would run.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from anarchon import AnarchonError, Job
from anarchon.backfill import BackfillSummary
from anarchon.run import ms_to_datetime

from . import _csrf
from ._present import run_dict, utc
from ._render import Renderer, wants_json
from ._settings import Settings
from ._source import FleetSource, Source
from ._views import BadRequest

__all__ = ["Steering", "field_text", "runs_here", "steering_on"]

#: Slots listed on a backfill's confirmation (the count is always complete).
SHOWN_SLOTS = 200


def steering_on(actions: bool | None, sign_in: bool) -> bool:
    """``actions``: ``None`` steers when sign-in is configured; ``True`` needs sign-in; ``False`` never steers."""
    if actions is not None and not isinstance(actions, bool):
        raise ValueError(f"anarchon_web.app(actions={actions!r}): use True, False or None")
    if actions and not sign_in:
        raise ValueError(
            "anarchon_web.app(actions=True) lets users pause, trigger and backfill jobs, so it needs sign-in: "
            "pass token=..., token_file=... or trusted_header=... (anarchon-web: ANARCHON_WEB_TOKEN, --token-file "
            "or --trusted-header)"
        )
    return sign_in if actions is None else actions


def runs_here(source: Source | None, job: Job) -> bool:
    """Whether this process has the job's function (module:attr), so it can run it: run now, backfill."""
    if isinstance(source, FleetSource):
        return False
    from ._load import _not_here  # the placeholder of jobs named with --job

    return job.func is not _not_here


def field_text(fields: dict[str, str], name: str, *, required: bool = False, limit: int = 500) -> str | None:
    """A free-text field (a reason), stripped; a clear 400 when it is missing or too long."""
    value = fields.get(name, "").strip()
    if required and not value:
        raise BadRequest(f"{name}: give one (it is stored and shown with the change)")
    if len(value) > limit or not value.isprintable():
        raise BadRequest(f"{name}: use at most {limit} printable characters on one line")
    return value or None


def _moment(fields: dict[str, str], name: str) -> datetime:
    raw = fields.get(name, "").strip()
    try:
        if not raw or not raw.isascii() or len(raw) > 40:
            raise ValueError
        moment = datetime.fromisoformat(raw)
    except ValueError:
        raise BadRequest(f"{name}={raw!r} is not a time: give an ISO 8601 date or time in UTC, e.g. "
                         "2026-12-05T14:30, or one with its offset (2026-12-05T14:30+01:00)") from None  # fmt: skip
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


class Steering:
    def __init__(self, source: Source, settings: Settings, render: Renderer) -> None:
        self.source, self.settings, self.render = source, settings, render

    def routes(self) -> list[Route]:
        return [
            Route("/jobs/{name}/pause", self.pause, methods=["POST"], name="pause"),
            Route("/jobs/{name}/resume", self.resume, methods=["POST"], name="resume"),
            Route("/jobs/{name}/trigger", self.trigger, methods=["POST"], name="trigger"),
            Route("/jobs/{name}/backfill", self.backfill, methods=["POST"], name="backfill"),
            Route("/jobs/{name}/run-now", self.run_now, methods=["POST"], name="run_now"),
        ]

    async def _post(self, request: Request) -> tuple[Job, dict[str, str], str]:
        """The job, the form and who sends it, once the POST passed the CSRF check."""
        fields = await _csrf.form(request)
        refused = _csrf.check(request, fields)
        if refused:
            raise BadRequest(f"{request.url.path.rsplit('/', 1)[-1]} refused: {refused}", 403)
        await self.source.refresh()  # the fleet's jobs, for a dashboard reading them from the registry
        name = request.path_params["name"]
        job = self.source.job(name)
        if job is None:
            raise BadRequest(f"no job named {name!r} is registered on this dashboard; see the jobs page", 404)
        who = _csrf.signed_in(request)[0]
        if not who:  # the sign-in gate lets none through; this is for an app whose middleware was changed
            raise BadRequest("sign in first: steering records who did it", 401)
        return job, fields, who

    def _confirm(self, request: Request, action: str, job: Job, fields: dict[str, str], **details: Any) -> Response:
        data = {"confirmed": False, "action": action, "job": job.name, "details": details,
                "hint": "nothing changed yet: POST again with confirm=yes to do it"}  # fmt: skip
        if wants_json(request):
            return JSONResponse(data)
        keep = {k: v for k, v in fields.items() if k in ("reason", "from", "to")}
        return self.render(request, "confirm.html", {**data, "fields": keep, "target": request.url.path})

    def _done(self, request: Request, job: Job, data: dict[str, Any]) -> Response:
        if wants_json(request):
            return JSONResponse({"confirmed": True, "job": job.name, **data})
        # A path, not a URL built from the Host header (which a rebinding attacker chooses).
        return RedirectResponse(str(request.url_for("job", name=job.name).path), status_code=303)

    async def _call(self, what: str, job: Job, call: Any) -> Any:
        try:
            return await call
        except AnarchonError as exc:
            raise BadRequest(f"{what} of {job.name!r} failed: {exc}", 409) from exc

    async def pause(self, request: Request) -> Response:
        job, fields, who = await self._post(request)
        reason = field_text(fields, "reason", required=True)
        if fields.get("confirm") != "yes":
            return self._confirm(request, "pause", job, fields, reason=reason, by=who,
                                 effect="its scheduled slots are recorded paused, not run, on every instance, "
                                 "until it is resumed; runs going now finish")  # fmt: skip
        state = await self._call("pause", job, self.source.scheduler.pause(job.name, reason=reason, by=who))
        return self._done(request, job, {"paused": {"since": utc(state.since_ms), "by": state.by,
                                                    "reason": state.reason}})  # fmt: skip

    async def resume(self, request: Request) -> Response:
        job, fields, who = await self._post(request)
        reason = field_text(fields, "reason")
        state = await self._call("resume", job, self.source.scheduler.resume(job.name, reason=reason, by=who))
        return self._done(request, job, {"was_paused": state is not None, "by": who})

    async def trigger(self, request: Request) -> Response:
        job, fields, who = await self._post(request)
        reason = field_text(fields, "reason")
        if fields.get("confirm") != "yes":
            return self._confirm(request, "trigger", job, fields, reason=reason, by=who,
                                 effect="one instance of the fleet that has the job runs it once, now, as a "
                                 "manual run (within about a second)")  # fmt: skip
        asked = await self._call("trigger", job, self.source.scheduler.trigger(job.name, reason=reason, by=who))
        return self._done(request, job, {"slot_ms": asked.slot_ms, "slot": utc(asked.slot_ms), "by": who})

    async def run_now(self, request: Request) -> Response:
        job, fields, who = await self._post(request)
        if not runs_here(job=job, source=self.source):
            raise BadRequest(f"run now runs {job.name!r} in the dashboard's process, which does not have its "
                             "function: use trigger, which the fleet runs", 409)  # fmt: skip
        if fields.get("confirm") != "yes":
            return self._confirm(request, "run now", job, fields, by=who,
                                 effect="the dashboard's own process runs it once, now, as a manual run")  # fmt: skip
        run = await self._call("run now", job, self.source.scheduler.run_now(job.name))
        if wants_json(request):
            return JSONResponse(run_dict(run))
        target = request.url_for("run", name=job.name, slot_ms=str(run.slot_ms)).path + "?manual=yes"
        return RedirectResponse(target, status_code=303)

    async def backfill(self, request: Request) -> Response:
        job, fields, who = await self._post(request)
        if not runs_here(self.source, job):
            raise BadRequest(
                f"a backfill runs {job.name!r} in the dashboard's process, which does not have its function: "
                "serve the dashboard with module:attr, or use anarchon backfill",
                409,
            )
        start, end, reason = _moment(fields, "from"), _moment(fields, "to"), field_text(fields, "reason")
        scheduler = self.source.scheduler
        plan = await self._call("backfill", job, scheduler.backfill(job.name, start, end, dry_run=True))
        if fields.get("confirm") != "yes":
            return self._confirm(request, "backfill", job, fields, reason=reason, by=who, **_slots(plan),
                                 effect="the dashboard's process runs each slot of the range that has no record, "
                                 "once across the fleet; this page answers when they have run")  # fmt: skip
        done = await self._call("backfill", job, scheduler.backfill(job.name, start, end, reason=reason, by=who))
        data = {"confirmed": True, "job": job.name, "by": who, **_slots(done), "counts": done.counts()}
        if wants_json(request):
            return JSONResponse(data)
        page = {"summary": data, "job": job.name, "jobs_url": str(request.url_for("jobs").path)}
        return self.render(request, "backfilled.html", page)


def _slots(summary: BackfillSummary) -> dict[str, Any]:
    """A backfill's slots as the confirmation and the result show them (the first ``SHOWN_SLOTS`` of each)."""

    def shown(slots: list[int]) -> list[str]:
        return [ms_to_datetime(s).isoformat() for s in sorted(slots)[:SHOWN_SLOTS]]

    out: dict[str, Any] = {"from": utc(summary.start_ms), "to": utc(summary.end_ms)}
    for name in ("would_run", "already_run", "ran", "failed", "skipped"):
        slots = getattr(summary, name)
        if slots or (name == "would_run" and summary.dry_run):
            out[name] = {"count": len(slots), "slots": shown(slots)}
    return out
