"""Stored schedules (``/schedules``), for signed-in users: list, add, change, remove (confirmed).

Every change goes through :class:`anarchon.Schedules` (``scheduler.schedules``)
with the signed-in name as ``by`` and the form's reason, so each is checked
as ``Scheduler.add()`` checks a job, written against the revision the form
was read at (a change made meanwhile is refused, not overwritten) and logged.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from anarchon import AnarchonError
from anarchon.errors import ScheduleConflictError
from anarchon.options import check_job_name

from . import _csrf
from ._present import utc
from ._render import Renderer, wants_json
from ._settings import Settings
from ._source import Source
from ._steering import field_text
from ._views import BadRequest

__all__ = ["SchedulesViews"]


def _kwargs(fields: dict[str, str]) -> dict[str, Any] | None:
    raw = fields.get("kwargs", "").strip()
    if not raw:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise BadRequest(f'kwargs={raw!r} is not a JSON object: write e.g. {{"tenant": 42}}, or leave it empty')
    return value


def _revision(fields: dict[str, str]) -> int | None:
    raw = fields.get("revision", "")
    if not raw:
        return None
    if not (raw.isascii() and raw.isdigit()):
        raise BadRequest(f"revision={raw!r}: send the revision the form showed (a whole number)")
    return int(raw)


class SchedulesViews:
    def __init__(self, source: Source, settings: Settings, render: Renderer) -> None:
        self.source, self.settings, self.render = source, settings, render

    def routes(self) -> list[Route]:
        return [
            Route("/schedules", self.page, methods=["GET"], name="schedules"),
            Route("/schedules", self.add, methods=["POST"], name="schedule_add"),
            Route("/schedules/{name}/set", self.change, methods=["POST"], name="schedule_set"),
            Route("/schedules/{name}/remove", self.remove, methods=["POST"], name="schedule_remove"),
        ]

    def _able(self) -> None:
        backend = self.source.scheduler.backend
        if not backend.capabilities.schedules:
            raise BadRequest(f"backend {backend.name!r} keeps no stored schedules (capability schedules; see "
                             "anarchon backends)", 404)  # fmt: skip

    async def _post(self, request: Request) -> tuple[dict[str, str], str]:
        fields = await _csrf.form(request)
        refused = _csrf.check(request, fields)
        if refused:
            raise BadRequest(f"schedule change refused: {refused}", 403)
        self._able()
        return fields, _csrf.signed_in(request)[0]

    async def _call(self, what: str, call: Any) -> Any:
        try:
            return await call
        except AnarchonError as exc:
            raise BadRequest(f"{what} failed: {exc}", 409 if isinstance(exc, ScheduleConflictError) else 400) from exc

    def _back(self, request: Request, data: dict[str, Any]) -> Response:
        if wants_json(request):
            return JSONResponse(data)
        return RedirectResponse(str(request.url_for("schedules").path), status_code=303)

    async def page(self, request: Request) -> Response:
        self._able()
        found = await self._call("reading the stored schedules", self.source.scheduler.schedules.list())
        rows = [{**s.to_dict(), "updated": utc(s.updated_ms) if s.updated_ms else "",
                 "kwargs_json": json.dumps(dict(s.kwargs), sort_keys=True)} for s in found]  # fmt: skip
        data = {"schedules": rows, "backend": self.source.backend_label}
        return self.render(request, "schedules.html", data)

    async def add(self, request: Request) -> Response:
        fields, who = await self._post(request)
        name = fields.get("name", "").strip()
        try:
            check_job_name(name)
        except (AnarchonError, ValueError) as exc:
            raise BadRequest(f"name={name!r}: {exc}") from None
        task, cron = fields.get("task", "").strip(), fields.get("cron", "").strip()
        if not task or not cron:
            raise BadRequest("a schedule needs task (a task an instance registered) and cron (e.g. 0 2 * * *)")
        added = await self._call(
            f"adding schedule {name!r}",
            self.source.scheduler.schedules.add(
                name, task=task, cron=cron, timezone=fields.get("timezone", "").strip() or None,
                kwargs=_kwargs(fields), reason=field_text(fields, "reason"), by=who,
            ),
        )  # fmt: skip
        return self._back(request, {"added": added.to_dict()})

    async def change(self, request: Request) -> Response:
        fields, who = await self._post(request)
        name = request.path_params["name"]
        given: dict[str, Any] = {k: v.strip() for k in ("task", "cron", "timezone") if (v := fields.get(k, "")).strip()}
        if (kwargs := _kwargs(fields)) is not None:
            given["kwargs"] = kwargs
        changed = await self._call(
            f"changing schedule {name!r}",
            self.source.scheduler.schedules.set(name, **given, if_revision=_revision(fields),
                                                reason=field_text(fields, "reason"), by=who),
        )  # fmt: skip
        return self._back(request, {"changed": changed.to_dict()})

    async def remove(self, request: Request) -> Response:
        fields, who = await self._post(request)
        name = request.path_params["name"]
        schedule = await self._call(f"reading schedule {name!r}", self.source.scheduler.schedules.get(name))
        reason = field_text(fields, "reason")
        if fields.get("confirm") != "yes":
            details = {"task": schedule.task, "cron": schedule.cron, "timezone": schedule.timezone,
                       "revision": schedule.revision, "reason": reason, "by": who,
                       "effect": "every instance stops running it within a poll; its run history stays"}  # fmt: skip
            data = {"confirmed": False, "action": "remove schedule", "job": name, "details": details,
                    "hint": "nothing changed yet: POST again with confirm=yes to do it"}  # fmt: skip
            if wants_json(request):
                return JSONResponse(data)
            keep = {"reason": fields.get("reason", ""), "revision": str(schedule.revision)}
            return self.render(request, "confirm.html", {**data, "fields": keep, "target": request.url.path})
        revision = await self._call(
            f"removing schedule {name!r}",
            self.source.scheduler.schedules.remove(name, if_revision=_revision(fields), reason=reason, by=who),
        )
        return self._back(request, {"removed": name, "revision": revision})
