"""``anarchon_web.app()``: the dashboard as a Starlette application."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from anarchon import Scheduler

from ._render import Renderer, wants_json
from ._settings import Settings
from ._source import Source
from ._views import BadRequest, Views, error_body

__all__ = ["app"]

#: No script, no frames, no outside resources, forms only to this dashboard.
_CSP = b"default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'"
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
    actions: bool = False,
    title: str = "anarchon",
    per_page: int = 50,
    strip_slots: int = 30,
    timeline_slots: int = 60,
    history_limit: int = 1000,
    open_backend: bool = False,
    backend_url: str | None = None,
) -> Starlette:
    """The dashboard of ``scheduler``'s jobs, to serve or to mount in an ASGI application.

    It reads the scheduler's registered jobs and their history. Mounted next
    to the running scheduler (``Mount("/cron", anarchon_web.app(scheduler))``)
    it reads through that scheduler. For a scheduler this process does not
    run, pass ``open_backend=True``: the app's lifespan opens the backend once
    (a mounted app gets no lifespan, so serve it as the top-level app then).
    ``backend_url`` is shown with its password masked. ``actions=True`` adds
    the *run now* form (CSRF-protected), which runs the job in this process.
    """
    if not isinstance(scheduler, Scheduler):
        raise TypeError(f"anarchon_web.app() needs an anarchon Scheduler, not {type(scheduler).__name__}")
    settings = Settings(title=title, per_page=per_page, strip_slots=strip_slots, timeline_slots=timeline_slots,
                        history_limit=history_limit, actions=actions)  # fmt: skip
    source = Source(scheduler, open_backend=open_backend, backend_url=backend_url)
    views = Views(source, settings, Renderer(settings))
    routes = [
        Route("/", views.jobs, name="jobs"),
        Route("/jobs/{name}", views.job, name="job"),
        Route("/jobs/{name}/runs/{slot_ms:int}", views.run, name="run"),
        Mount("/static", StaticFiles(packages=[("anarchon_web", "static")]), name="static"),
    ]
    if actions:
        routes.append(Route("/jobs/{name}/run-now", views.run_now, methods=["POST"], name="run_now"))

    async def bad_request(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, BadRequest)
        if wants_json(request):
            return JSONResponse(error_body(exc), status_code=exc.status)
        page = views.render.env.get_template("error.html").render(title=settings.title, error=str(exc),
                                                                   status=exc.status)  # fmt: skip
        return HTMLResponse(page, status_code=exc.status)

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        await source.start()
        try:
            yield
        finally:
            await source.close()

    dashboard = Starlette(routes=routes, exception_handlers={BadRequest: bad_request}, lifespan=lifespan)
    dashboard.add_middleware(_SecurityHeaders)
    dashboard.state.source = source
    dashboard.state.settings = settings
    return dashboard
