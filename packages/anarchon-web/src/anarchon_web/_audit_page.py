"""``/audit``: the backend's audit trail, newest first: who paused, resumed, triggered, backfilled or changed a
schedule, when and why (capability ``audit``; :mod:`anarchon.audit`).

One backend read per page (``limit`` entries, the next page below the last id shown). The page is a
read: it is open to whoever may read the dashboard, as ``anarchon audit`` is to whoever may read the
backend. A ``job`` filter is checked as a job name before it reaches the backend, and need not be a
job this dashboard shows: a removed schedule's entries stay in the trail.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from anarchon.options import check_job_name

from ._present import utc
from ._render import Renderer
from ._source import Source
from ._views import BadRequest, _int_param

__all__ = ["AuditPage"]

#: The most entries one page shows.
MOST = 500


class AuditPage:
    def __init__(self, source: Source, render: Renderer) -> None:
        self.source, self.render = source, render

    async def page(self, request: Request) -> Response:
        backend = self.source.scheduler.backend
        if not backend.capabilities.audit:
            raise BadRequest(
                f"this dashboard's backend ({self.source.backend_label}) keeps no audit trail (capability 'audit'); "
                "`anarchon backends` lists the backends that do",
                404,
            )
        limit = _int_param(request, "limit", 50, MOST)
        before = _int_param(request, "before", 0, 2**62) or None  # absent: 0, as no id is
        job = request.query_params.get("job", "")
        if job:
            try:
                check_job_name(job)
            except ValueError as exc:
                raise BadRequest(f"job={job!r} is not a job name: {exc}") from None
        entries = await self.source.audit(limit=limit, before_id=before, job=job or None)
        rows = [{**e.to_dict(), "when": utc(e.at_ms), "shown": self.source.job(e.job) is not None} for e in entries]
        data = {
            "backend": self.source.backend_label, "job": job, "limit": limit, "before": before,
            "entries": rows, "next_before": rows[-1]["id"] if len(rows) == limit else None,
        }  # fmt: skip
        return self.render(request, "audit.html", data)
