"""Backend URLs: choosing a scheme and keeping passwords out of sight."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

__all__ = ["redact_url", "url_scheme"]


def url_scheme(url: str) -> str:
    return urlsplit(url).scheme.lower()


def redact_url(url: str) -> str:
    """The URL with any password replaced by ``***``, for logs and ``repr``.

    Query parameters named like secrets (``password``, ``token``…) are masked
    too, since drivers accept credentials there.
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable url>"
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        user, sep, _password = userinfo.partition(":")
        netloc = f"{user}:***@{host}" if sep else f"{userinfo}@{host}"
    query = parts.query
    if query:
        masked = []
        for pair in query.split("&"):
            key, eq, _value = pair.partition("=")
            if eq and any(s in key.lower() for s in ("pass", "token", "secret", "key", "auth")):
                masked.append(f"{key}=***")
            else:
                masked.append(pair)
        query = "&".join(masked)
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
