"""``anarchon_web.app()``: the dashboard as a Starlette application."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import AsyncIterator, Sequence

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from anarchon import Scheduler

from . import _auth, _csrf, _schedules, _steering
from ._audit_page import AuditPage
from ._render import Renderer, wants_json
from ._settings import Settings
from ._signin import SignInViews
from ._source import FleetSource, Source
from ._views import BadRequest, Views

__all__ = ["app"]

log = logging.getLogger("anarchon.web")

#: Scripts and styles only from this dashboard's own files (no inline script: live.js is a file), no frames,
#: no outside resources, forms only to this dashboard, fetches only to itself (live.js re-reads the page).
_CSP = (
    b"default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; img-src 'self' data:; "
    b"form-action 'self'; frame-ancestors 'none'"
)
_HEADERS = [
    (b"content-security-policy", _CSP + b"; base-uri 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
]


class _SecurityHeaders:
    def __init__(self, inner: ASGIApp) -> None:
        self.inner = inner

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *_HEADERS]
            await send(message)

        await self.inner(scope, receive, with_headers if scope["type"] == "http" else send)


def app(
    scheduler: Scheduler,
    *,
    actions: bool | None = None,
    title: str = "anarchon",
    per_page: int = 50,
    strip_slots: int = 30,
    timeline_slots: int = 60,
    history_limit: int = 1000,
    open_backend: bool = False,
    backend_url: str | None = None,
    from_registry: bool = False,
    allowed_hosts: Sequence[str] | None = None,
    refresh_s: int = 5,
    token: str | None = None,
    token_file: str | os.PathLike[str] | None = None,
    trusted_header: str | None = None,
    token_user: str = _auth.DEFAULT_USER,
    session_s: int = 12 * 3600,
    origins: Sequence[str] | None = None,
) -> Starlette:
    """The dashboard of ``scheduler``'s jobs, to serve or to mount in an ASGI application.

    It reads the scheduler's registered jobs and their history. Mounted next
    to the running scheduler (``Mount("/cron", anarchon_web.app(scheduler))``)
    it reads through that scheduler. For a scheduler this process does not
    run, pass ``open_backend=True``: the app's lifespan opens the backend once
    (a mounted app gets no lifespan, so serve it as the top-level app then).
    ``backend_url`` is shown with its password masked.
    ``from_registry=True`` shows the jobs the live fleet defines, read from
    the backend's fleet registry, instead of the scheduler's own (``anarchon
    web --backend URL``); it opens the backend itself.

    Sign-in (README, "Sign-in and steering"): ``token`` or ``token_file`` (a secret of 16
    characters or more, sent as ``Authorization: Bearer`` or typed into
    ``/sign-in``, whose users are named ``token_user``; the signed cookie
    lasts ``session_s``), or ``trusted_header``, a header only the user's own
    proxy can set, naming the user. With sign-in configured every route needs
    it. Steering (pause, resume, trigger, backfill, run now, stored
    schedules; CSRF-protected, the destructive ones confirmed) is on with
    sign-in unless ``actions=False``; ``actions=True`` without sign-in is a
    ``ValueError``. ``origins``: the exact origins (``https://cron.example``)
    POSTs may come from, for a dashboard behind a proxy that rewrites
    ``Host``; by default the request's own Host, which must be allowed.
    ``allowed_hosts``: the only ``Host`` names answered (``anarchon web``
    passes the address it binds and the names of localhost); any other gets
    400 before anything else runs, so a DNS-rebinding page cannot reach the
    dashboard through the browser. ``None`` (for an application that checks
    hosts itself) answers any. ``refresh_s``: seconds between the live
    refreshes of the jobs and job pages (a same-origin script re-reads the
    page, filters kept); 0 turns them off.
    """
    if not isinstance(scheduler, Scheduler):
        raise TypeError(f"anarchon_web.app() needs an anarchon Scheduler, not {type(scheduler).__name__}")
    auth = _auth.configure(token=token, token_file=token_file, trusted_header=trusted_header,
                           token_user=token_user, session_s=session_s)  # fmt: skip
    steering = _steering.steering_on(actions, auth is not None)
    local = not from_registry and any(_steering.runs_here(None, j) for j in scheduler.jobs.values())
    settings = Settings(title=title, per_page=per_page, strip_slots=strip_slots, timeline_slots=timeline_slots,
                        history_limit=history_limit, actions=steering, refresh_s=refresh_s,
                        sign_in=auth is not None, local_runs=local)  # fmt: skip
    guard = _csrf.Guard.make(auth.key if auth else None, origins, allowed_hosts)
    source = (
        FleetSource(scheduler, backend_url=backend_url)
        if from_registry
        else Source(scheduler, open_backend=open_backend, backend_url=backend_url)
    )
    views = Views(source, settings, Renderer(settings))
    routes = [
        Route("/", views.jobs, name="jobs"),
        Route("/jobs/{name}", views.job, name="job"),
        Route("/jobs/{name}/runs/{slot_ms:int}", views.run, name="run"),
        Route("/fleet", views.fleet, name="fleet"),
        Route("/audit", AuditPage(source, views.render).page, name="audit"),
        Mount("/static", StaticFiles(packages=[("anarchon_web", "static")]), name="static"),
    ]
    if auth is not None:
        routes += SignInViews(auth, views.render).routes()
    if steering:
        routes += _steering.Steering(source, settings, views.render).routes()
        routes += _schedules.SchedulesViews(source, settings, views.render).routes()

    def error(request: Request, status: int, message: str) -> Response:
        """The error as JSON where JSON is asked for, else a page of the dashboard linking home."""
        if wants_json(request):
            return JSONResponse({"error": message, "status": status}, status_code=status)
        page = views.render.env.get_template("error.html").render(
            title=settings.title, error=message, status=status, home=str(request.url_for("jobs").path),
            static=lambda path: str(request.url_for("static", path=path).path),
        )  # fmt: skip
        return HTMLResponse(page, status_code=status)

    async def bad_request(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, BadRequest)
        return error(request, exc.status, str(exc))

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return error(request, exc.status_code, exc.detail or "not found")

    async def server_error(request: Request, exc: Exception) -> Response:
        log.error("dashboard: %s %s failed", request.method, request.url.path, exc_info=exc)
        return error(request, 500, "the dashboard failed to answer; its log says why")

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        await source.start()
        try:
            yield
        finally:
            await source.close()

    handlers = {BadRequest: bad_request, HTTPException: http_error, Exception: server_error}
    dashboard = Starlette(routes=routes, exception_handlers=handlers, lifespan=lifespan)
    dashboard.add_middleware(_auth.Gate, auth=auth, error=error, guard=guard)  # inside the security headers
    dashboard.add_middleware(_SecurityHeaders)
    if allowed_hosts is not None:
        # Added last, so it runs first: a foreign Host is refused before any route or header work.
        dashboard.add_middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts))
    dashboard.state.source = source
    dashboard.state.settings = settings
    return dashboard
