"""One answer per page, two forms: HTML from a Jinja2 template, or the same data as JSON.

JSON is chosen by ``?format=json`` or an ``Accept`` header that prefers
``application/json``; the JSON is exactly the data the template receives, so
the API and the page cannot drift apart. Templates autoescape everything.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from . import _csrf
from ._cells import cells
from ._present import local, utc
from ._settings import Settings

__all__ = ["Renderer", "environment", "wants_json"]


def wants_json(request: Request) -> bool:
    if request.query_params.get("format") == "json":
        return True
    accept = request.headers.get("accept", "")
    return accept.startswith("application/json") or ("application/json" in accept and "text/html" not in accept)


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("anarchon_web", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["utc"] = utc
    env.filters["local"] = local
    env.globals["cells"] = cells
    return env


class Renderer:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.env = environment()

    def __call__(self, request: Request, template: str, data: dict[str, Any], **extra: Any) -> Response:
        if wants_json(request):
            return JSONResponse(data)
        token = _csrf.token_for(request) if self.settings.actions or self.settings.sign_in else ""

        def url(route: str, **params: Any) -> str:
            return str(request.url_for(route, **{k: str(v) for k, v in params.items()}).path)

        def query(**changes: Any) -> str:
            """This page with some query parameters changed (filters and pages keep the others).

            Relative (``?page=2``), never built from the Host header, which a rebinding attacker chooses.
            """
            params = {**request.query_params, **{k: str(v) for k, v in changes.items()}}
            return "?" + urlencode({k: v for k, v in params.items() if v != ""})

        html = self.env.get_template(template).render(
            **data, **extra, title=self.settings.title, csrf=token, url=url, query=query,
            refresh_s=self.settings.refresh_s,
            signed_in=_csrf.signed_in(request)[0], steering=self.settings.actions, local_runs=self.settings.local_runs,
            static=lambda path: str(request.url_for("static", path=path).path),
        )  # fmt: skip
        response = HTMLResponse(html)
        if token:
            _csrf.set_cookie(response, request, token)
        return response
