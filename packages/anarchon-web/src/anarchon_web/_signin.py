"""The sign-in form (``/sign-in``) and sign-out (``/sign-out``): the cookie a browser signs in with."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from . import _csrf
from ._auth import COOKIE, SignIn
from ._render import Renderer
from ._views import BadRequest

__all__ = ["SignInViews"]


def _next(request: Request, raw: str | None) -> str:
    """Where to go after signing in: a path of this dashboard only (never another site: ``//evil``, ``/\\evil``)."""
    root = request.scope.get("root_path", "")
    home = str(request.url_for("jobs").path)
    if not raw or not raw.startswith((root or "") + "/") or raw.startswith("//") or "\\" in raw or len(raw) > 2000:
        return home
    if not raw.isascii() or any(ord(c) < 32 for c in raw):
        return home
    return raw


class SignInViews:
    def __init__(self, auth: SignIn, render: Renderer) -> None:
        self.auth, self.render = auth, render

    def routes(self) -> list[Route]:
        return [
            Route("/sign-in", self.page, methods=["GET"], name="sign_in"),
            Route("/sign-in", self.sign_in, methods=["POST"], name="sign_in_post"),
            Route("/sign-out", self.sign_out, methods=["POST"], name="sign_out"),
        ]

    def _page(self, request: Request, problem: str | None, status: int = 200, after: str | None = None) -> Response:
        data = {
            "next": _next(request, after if after is not None else request.query_params.get("next")),
            "problem": problem,
            "token_form": self.auth.token is not None,
            "trusted_header": self.auth.trusted_header,
        }
        answer = self.render(request, "sign_in.html", data)
        answer.status_code = status
        return answer

    async def page(self, request: Request) -> Response:
        return self._page(request, None)

    async def sign_in(self, request: Request) -> Response:
        fields = await _csrf.form(request)
        refused = _csrf.check(request, fields)
        if refused:
            raise BadRequest(f"sign-in refused: {refused}", 403)
        if self.auth.token is None:
            raise BadRequest(f"this dashboard signs users in through the {self.auth.trusted_header} header its "
                             "proxy sets, not with a token: open it through that proxy", 400)  # fmt: skip
        if not self.auth.token_is(fields.get("token", "").strip()):
            return self._page(request, "that is not this dashboard's token", 401, fields.get("next", ""))
        answer = RedirectResponse(_next(request, fields.get("next")), status_code=303)
        answer.set_cookie(COOKIE, self.auth.cookie(self.auth.token_user), max_age=self.auth.session_s,
                          path=request.scope.get("root_path") or "/", httponly=True, samesite="strict",
                          secure=request.url.scheme == "https")  # fmt: skip
        return answer

    async def sign_out(self, request: Request) -> Response:
        refused = _csrf.check(request, await _csrf.form(request))
        if refused:
            raise BadRequest(f"sign-out refused: {refused}", 403)
        answer = RedirectResponse(str(request.url_for("sign_in").path), status_code=303)
        answer.delete_cookie(COOKIE, path=request.scope.get("root_path") or "/", httponly=True, samesite="strict")
        return answer
