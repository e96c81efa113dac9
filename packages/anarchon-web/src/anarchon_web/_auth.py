"""Sign-in: a token (``Authorization: Bearer``, or a signed cookie the sign-in form sets) or a proxy's header.

Without sign-in configured the dashboard is read-only and every page is
open (``anarchon-web`` then binds localhost only). With it, every route but
``/sign-in``, ``/sign-out`` and ``/static`` needs a signed-in user: an HTML
``GET`` is sent to the sign-in form, anything else gets 401. The cookie is
``HttpOnly``, ``SameSite=Strict`` and signed with HMAC-SHA256 (a key derived
from the token, so a new token signs everybody out); it holds the user's name
and its expiry. The token is compared in constant time and never logged.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from ._csrf import GUARD, SCOPE
from ._render import wants_json

__all__ = ["COOKIE", "DEFAULT_USER", "GUARD", "SCOPE", "Gate", "Seen", "SignIn", "configure"]

COOKIE = "anarchon_session"
#: The name users who sign in with the token are recorded by (``--token-user`` changes it): a name, no secret.
DEFAULT_USER = "token"
MIN_TOKEN = 16
_HEADER = re.compile(r"^[A-Za-z0-9-]{1,64}$")
_OPEN = ("/sign-in", "/sign-out", "/static/")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def mac(key: bytes, purpose: str, text: str) -> str:
    """HMAC-SHA256 of ``text`` for one purpose (a session cookie is no CSRF token), URL-safe."""
    return _b64(hmac.new(key, f"{purpose}|{text}".encode(), hashlib.sha256).digest())


@dataclass(frozen=True)
class SignIn:
    """How users sign in; ``token`` and ``key`` are left out of ``repr`` (and of every log line)."""

    token: str | None = field(default=None, repr=False)
    trusted_header: str | None = None
    token_user: str = DEFAULT_USER
    session_s: int = 12 * 3600
    key: bytes = field(default_factory=lambda: secrets.token_bytes(32), repr=False)

    def cookie(self, user: str) -> str:
        payload = _b64(json.dumps({"u": user, "e": int(time.time()) + self.session_s}).encode())
        return f"{payload}.{mac(self.key, 'session', payload)}"

    def user_of_cookie(self, value: str) -> str | None:
        """The user a cookie this dashboard signed names, ``None`` when it is tampered with or expired."""
        payload, _, signature = value.partition(".")
        if not payload or not hmac.compare_digest(signature.encode(), mac(self.key, "session", payload).encode()):
            return None
        try:
            data = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
            user, expires = data["u"], data["e"]
        except (ValueError, KeyError, TypeError):
            return None
        return user if isinstance(user, str) and isinstance(expires, int) and expires > time.time() else None

    def token_is(self, given: str) -> bool:
        """Constant time, its length too: the digests compared are of equal length whatever was given."""
        if self.token is None:
            return False
        return hmac.compare_digest(
            hashlib.sha256(given.encode()).digest(), hashlib.sha256(self.token.encode()).digest()
        )


def configure(
    *,
    token: str | None,
    token_file: str | os.PathLike[str] | None,
    trusted_header: str | None,
    token_user: str,
    session_s: int,
) -> SignIn | None:
    """The sign-in settings, checked; ``None`` when none is configured (a read-only dashboard)."""
    if token is not None and token_file is not None:
        raise ValueError("anarchon_web.app(token=..., token_file=...): give one of them, not both")
    if token_file is not None:
        try:
            token = open(token_file, encoding="utf-8").read().strip()  # noqa: SIM115 - read once
        except OSError as exc:
            raise ValueError(f"token_file={os.fspath(token_file)!r} cannot be read ({exc.strerror}): "
                             "give a readable file holding the token") from None  # fmt: skip
    if token is not None and (not isinstance(token, str) or len(token.strip()) < MIN_TOKEN):
        raise ValueError(
            f"the sign-in token is too short ({len(str(token).strip())} characters): use at least {MIN_TOKEN}, "
            "e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))'"
        )
    if trusted_header is not None and not _HEADER.match(str(trusted_header)):
        raise ValueError(f"trusted_header={trusted_header!r} is not a header name: use letters, digits and '-', "
                         "e.g. X-Forwarded-User")  # fmt: skip
    if not isinstance(token_user, str) or not _user_ok(token_user):
        raise ValueError(f"token_user={token_user!r}: give a name of 1 to 200 printable characters, e.g. 'ops'")
    if isinstance(session_s, bool) or not isinstance(session_s, int) or not 60 <= session_s <= 30 * 86400:
        raise ValueError(f"session_s={session_s!r}: give the seconds a sign-in lasts, from 60 to 2592000 (30 days)")
    if token is None and trusted_header is None:
        return None
    key = hashlib.sha256(b"anarchon-web session key\0" + token.strip().encode()).digest() if token else None
    return SignIn(token=token.strip() if token else None, trusted_header=trusted_header, token_user=token_user,
                  session_s=session_s, **({"key": key} if key else {}))  # fmt: skip


def _user_ok(name: str) -> bool:
    return 0 < len(name) <= 200 and name.isprintable() and name.strip() == name


@dataclass(frozen=True)
class Seen:
    """Who sent a request and how (``bearer``, ``cookie``, ``header``), or why a credential was refused."""

    user: str | None = None
    via: str | None = None
    refused: str | None = None


def identify(auth: SignIn, request: Request) -> Seen:
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and auth.token is not None:  # another scheme may be the proxy's own
        if not auth.token_is(given.strip()):
            return Seen(refused="the Authorization header's Bearer token is not this dashboard's token")
        return Seen(auth.token_user, "bearer")
    if auth.trusted_header is not None:
        name = request.headers.get(auth.trusted_header, "").strip()
        if name:
            if not _user_ok(name):
                return Seen(refused=f"the {auth.trusted_header} header does not hold a usable user name")
            return Seen(name, "header")
    cookie = request.cookies.get(COOKIE)
    if cookie and auth.token is not None and (user := auth.user_of_cookie(cookie)) is not None:
        return Seen(user, "cookie")
    return Seen()


def route_path(scope: Scope) -> str:
    path, root = str(scope.get("path", "")), str(scope.get("root_path", ""))
    return path[len(root) :] if root and path.startswith(root) else path


Error = Callable[[Request, int, str], Response]


class Gate:
    """ASGI middleware: learns who sent each request and, with sign-in configured, refuses strangers."""

    def __init__(self, app: ASGIApp, auth: SignIn | None, error: Error, guard: object) -> None:
        self.app, self.auth, self.error, self.guard = app, auth, error, guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        scope[GUARD] = self.guard  # the CSRF guard's key and origins (_csrf)
        if self.auth is None:
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        found = scope[SCOPE] = identify(self.auth, request)
        path = route_path(scope)
        answer: Response | None = None
        if found.refused is not None:
            answer = self._refuse(request, found.refused)
        elif found.user is None and not path.startswith(_OPEN):
            if request.method in ("GET", "HEAD") and not wants_json(request):
                target = path + (f"?{scope['query_string'].decode('latin-1')}" if scope.get("query_string") else "")
                root = scope.get("root_path", "")
                answer = RedirectResponse(f"{root}/sign-in?next={quote(root + target, safe='/')}", status_code=303)
            else:
                answer = self._refuse(request, self.hint())
        if answer is not None:
            await answer(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def hint(self) -> str:
        assert self.auth is not None
        ways = []
        if self.auth.token is not None:
            ways.append("send Authorization: Bearer TOKEN, or sign in at /sign-in")
        if self.auth.trusted_header is not None:
            ways.append(f"come through the proxy that sets {self.auth.trusted_header}")
        return "sign in first: " + "; or ".join(ways)

    def _refuse(self, request: Request, why: str) -> Response:
        answer = (
            JSONResponse({"error": why, "status": 401}, status_code=401)
            if wants_json(request) or request.headers.get("authorization")
            else self.error(request, 401, why)
        )
        answer.headers["www-authenticate"] = 'Bearer realm="anarchon"'
        return answer
