"""CSRF protection for the action forms: a double-submit token and an origin check.

A page that shows a form sets a random token in a ``SameSite=Strict``,
``HttpOnly`` cookie and repeats it in the form; a POST is accepted only when
both are present and equal, and when the browser does not say the request
came from another site (``Sec-Fetch-Site``, ``Origin``). Another site can
neither read the cookie nor make the browser send it.
"""

from __future__ import annotations

import hmac
import secrets
from urllib.parse import parse_qs, urlsplit

from starlette.requests import Request
from starlette.responses import Response

__all__ = ["COOKIE", "check", "form", "set_cookie", "token_for"]

COOKIE = "anarchon_csrf"
_MAX_BODY = 4096


def token_for(request: Request) -> str:
    """The token of this browser, or a new one (``set_cookie`` then stores it)."""
    current = request.cookies.get(COOKIE, "")
    return current if len(current) >= 32 else secrets.token_urlsafe(32)


def set_cookie(response: Response, request: Request, token: str) -> None:
    if request.cookies.get(COOKIE) != token:
        path = request.scope.get("root_path") or "/"
        response.set_cookie(COOKIE, token, httponly=True, samesite="strict", path=path)


async def form(request: Request) -> dict[str, str]:
    """A small url-encoded form body (the action forms hold a token and nothing else)."""
    body = await request.body()
    if len(body) > _MAX_BODY:
        return {}
    return {k: v[0] for k, v in parse_qs(body.decode("latin-1")).items() if v}


def check(request: Request, fields: dict[str, str]) -> str | None:
    """``None`` when the POST is the dashboard's own form, else why it is refused."""
    if request.headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
        return "the request came from another site"
    origin = request.headers.get("origin")
    if origin is not None and (origin == "null" or urlsplit(origin).netloc != request.headers.get("host")):
        return "the request's Origin is not this dashboard"
    cookie, sent = request.cookies.get(COOKIE, ""), fields.get("csrf", "")
    if not cookie or not sent or not hmac.compare_digest(cookie.encode(), sent.encode()):
        return "the form's token does not match this browser's; reload the page and try again"
    return None
