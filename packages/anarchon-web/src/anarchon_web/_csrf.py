"""CSRF protection for every POST: the request's origin, and a signed double-submit token.

A page that shows a form sets a random nonce in a ``SameSite=Strict``,
``HttpOnly`` cookie and puts ``nonce.signature`` in the form: an HMAC of the
nonce and the signed-in user under the dashboard's key. A POST is accepted
only when the form's token carries this browser's nonce, its signature is
right for the user sending it, and the browser does not say it came from
another site (``Sec-Fetch-Site``, ``Origin``). ``Origin`` must be one of the
configured ``origins`` or, without them, equal the ``Host`` the request was
sent to, and that Host must be an allowed one: a rebinding page's own host
is neither. Another site can neither read the cookie nor make one of its
own for this dashboard. A request signed in with ``Authorization: Bearer``
carries no ambient credential (no browser adds that header to a cross-site
request), so it needs no form token.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

from starlette.requests import Request
from starlette.responses import Response

__all__ = ["COOKIE", "GUARD", "SCOPE", "Guard", "check", "form", "set_cookie", "signed_in", "token_for"]

COOKIE = "anarchon_csrf"
_MAX_BODY = 16384
#: Scope keys the sign-in gate (``_auth.Gate``) sets: what it learned of the request, and the :class:`Guard`.
SCOPE = "anarchon_web.seen"
GUARD = "anarchon_web.guard"


@dataclass(frozen=True)
class Guard:
    """The key tokens are signed with, the origins a POST may come from, the Host names answered."""

    key: bytes
    origins: tuple[str, ...] | None = None
    allowed_hosts: tuple[str, ...] | None = None

    @classmethod
    def make(cls, key: bytes | None, origins: Sequence[str] | None, hosts: Sequence[str] | None) -> Guard:
        for origin in origins or ():
            parts = urlsplit(origin)
            if parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("", "/"):
                raise ValueError(f"origins: {origin!r} is not an origin: write scheme://host[:port], e.g. "
                                 "https://cron.example.com")  # fmt: skip
        return cls(
            key or secrets.token_bytes(32),
            tuple(o.lower().rstrip("/") for o in origins) if origins else None,
            tuple(h.lower() for h in hosts) if hosts is not None else None,
        )

    def host_allowed(self, host: str) -> bool:
        """Starlette's TrustedHostMiddleware rule: a name, ``*.domain``, or ``*`` for any."""
        if self.allowed_hosts is None or "*" in self.allowed_hosts:
            return True
        name = host.lower()
        name = name.rsplit(":", 1)[0] if not name.endswith("]") and name.count(":") == 1 else name
        name = name[: name.rindex("]") + 1] if name.startswith("[") and "]" in name else name
        return any(name == h or (h.startswith("*.") and name.endswith(h[1:])) for h in self.allowed_hosts)


def _guard(request: Request) -> Guard:
    found = request.scope.get(GUARD)
    if not isinstance(found, Guard):
        raise RuntimeError("the dashboard's CSRF guard is missing: build the app with anarchon_web.app()")
    return found


def signed_in(request: Request) -> tuple[str, str | None]:
    """The signed-in user (``''`` for none) and how they signed in (``bearer``, ``cookie``, ``header``)."""
    seen = request.scope.get(SCOPE)
    return getattr(seen, "user", None) or "", getattr(seen, "via", None)


def _signature(key: bytes, nonce: str, user: str) -> str:
    return hmac.new(key, f"csrf|{nonce}|{user}".encode(), hashlib.sha256).hexdigest()


def token_for(request: Request) -> str:
    """The form token of this browser and user: ``nonce.signature`` (``set_cookie`` stores a new nonce)."""
    current = request.cookies.get(COOKIE, "")
    nonce = current if len(current) >= 32 and current.isascii() and "." not in current else secrets.token_urlsafe(32)
    return f"{nonce}.{_signature(_guard(request).key, nonce, signed_in(request)[0])}"


def set_cookie(response: Response, request: Request, token: str) -> None:
    nonce = token.partition(".")[0]
    if request.cookies.get(COOKIE) != nonce:
        path = request.scope.get("root_path") or "/"
        secure = request.url.scheme == "https"
        response.set_cookie(COOKIE, nonce, httponly=True, samesite="strict", path=path, secure=secure)


async def form(request: Request) -> dict[str, str]:
    """A small url-encoded form body (a token, a reason, a range, a schedule's fields)."""
    body = await request.body()
    if len(body) > _MAX_BODY:
        return {}
    return {k: v[0] for k, v in parse_qs(body.decode("latin-1")).items() if v}


def check(request: Request, fields: dict[str, str]) -> str | None:
    """``None`` when the POST is the dashboard's own form (or a Bearer call), else why it is refused."""
    user, via = signed_in(request)
    if via == "bearer":
        return None
    guard = _guard(request)
    if request.headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
        return "the request came from another site"
    origin = request.headers.get("origin")
    if origin is not None:
        host = request.headers.get("host", "")
        if guard.origins is not None:
            if origin.lower().rstrip("/") not in guard.origins:
                return f"the request's Origin {origin!r} is not one of this dashboard's origins"
        elif origin == "null" or urlsplit(origin).netloc != host or not guard.host_allowed(host):
            return "the request's Origin is not this dashboard"
    nonce, sent = request.cookies.get(COOKIE, ""), fields.get("csrf", "")
    sent_nonce, _, signature = sent.partition(".")
    if not nonce or not sent_nonce or not hmac.compare_digest(nonce.encode(), sent_nonce.encode()):
        return "the form's token does not match this browser's; reload the page and try again"
    if not hmac.compare_digest(signature.encode(), _signature(guard.key, nonce, user).encode()):
        return "the form's token is not signed for this user; reload the page and try again"
    return None
