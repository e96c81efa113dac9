"""NATS URLs: one server or several, and the seed's options in the query.

``nats://[user:password@ | token@]host:4222[,host2:4222…][?stream=…&prefix=…]``.
Several servers are separated by commas; one without a scheme takes the
first one's. The query may set the seed's options (``stream``, ``prefix``,
``duplicate_window_ms``, ``history_size``, ``replicas``), which the
constructor checks like its arguments; nats-py reads no query, so any other
key is refused by name. Each server URL is parsed and checked, so one whose
password holds an unencoded ``#``, ``/`` or ``?`` is refused, masked whole.
"""

from __future__ import annotations

from urllib.parse import unquote, urlsplit, urlunsplit

import nats

from anarchon.urls import UrlOptions, integer, read_query, split_url, text, url_scheme

__all__ = ["URL_OPTIONS", "check_server", "connect_credentials", "is_refusal", "read_nats_url"]

SCHEMES = ("nats", "tls")

#: The seed's options a URL may set, each with the conversion of its text.
URL_OPTIONS = {
    "stream": text,
    "prefix": text,
    "duplicate_window_ms": integer,
    "history_size": integer,
    "replicas": integer,
}


def _not_nats(scheme: str) -> ValueError:
    return ValueError(f"not a NATS URL: use nats://host:4222 or tls://host:4222, got scheme {scheme!r}")


def check_server(url: str) -> str:
    """Check one server URL (``host:4222`` alone means ``nats://host:4222``, as nats-py reads it)."""
    full = url if "://" in url else f"nats://{url}"
    if url_scheme(full) not in SCHEMES:
        raise _not_nats(url_scheme(full))
    if split_url(full, what="NATS").query:
        raise ValueError(
            "a server URL in a list carries a query (?stream=…): give the options as NatsBackend arguments, "
            "or the servers as one comma-separated URL, as NatsBackend.from_url(url) and Scheduler(backend=url) read it"
        )
    return url


def read_nats_url(url: str) -> tuple[list[str], UrlOptions]:
    """The servers of a comma-separated NATS URL, and the options in its query."""
    base, _, query = url.partition("?")
    servers = [s.strip() for s in base.split(",") if s.strip()]
    first = url_scheme(servers[0]) if servers and "://" in servers[0] else ("nats" if servers else "")
    if first not in SCHEMES:
        raise _not_nats(first)
    servers = [check_server(s if "://" in s else f"{first}://{s}") for s in servers]
    values, _ = read_query(query, URL_OPTIONS, what="NATS")
    return servers, UrlOptions(url=",".join(servers), values=values)


def connect_credentials(servers: list[str]) -> tuple[list[str], dict[str, str]]:
    """Server URLs for nats-py, and the credentials in them as its ``user``/``password`` or ``token``.

    nats-py sends a URL's user and password as written, never decoding them,
    so a password holding ``#``, ``/`` or ``?`` (which must be percent-encoded
    to stay in the URL) would reach the server still encoded. When every
    server that carries credentials carries the same ones, they are decoded
    here and passed as options, and taken out of the URLs; servers with
    different credentials are left to nats-py as they are.
    """
    found: set[tuple[str, str | None]] = set()
    for server in servers:
        parts = urlsplit(server if "://" in server else f"nats://{server}")
        if "@" in parts.netloc:
            name, colon, secret = parts.netloc.rpartition("@")[0].partition(":")
            found.add((unquote(name), unquote(secret) if colon else None))
    if len(found) != 1:
        return servers, {}
    ((user, password),) = found
    bare = []
    for server in servers:
        parts = urlsplit(server if "://" in server else f"nats://{server}")
        bare.append(urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2])))
    return bare, ({"token": user} if password is None else {"user": user, "password": password})


def is_refusal(exc: BaseException) -> bool:
    """Whether the server refused the credentials; nats-py reports that as a typed error or
    as a plain ``Error`` whose text is the server's ``-ERR 'Authorization Violation'``."""
    return isinstance(exc, nats.errors.AuthorizationError) or "authorization violation" in str(exc).lower()
