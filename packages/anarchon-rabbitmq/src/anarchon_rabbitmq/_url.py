"""The AMQP URL: what RabbitMQBackend reads from it and what it leaves to aio-pika.

``amqp://[user[:password]@]host[:port][/vhost][?key=value…]``. The seed's
options, ``prefix`` and ``slot_ttl_ms``, may be set in the query; they are
taken out and checked by the constructor like its arguments. The keys
aio-pika and aiormq read (``heartbeat``, ``name``, TLS files…) stay in the
URL. Any other key is refused by name: aiormq would ignore it, so a
misspelt ``?prefx=billing.`` would silently share the default namespace.
"""

from __future__ import annotations

import aio_pika

from anarchon.urls import UrlOptions, integer, read_url_options, redact_url, text, url_scheme

__all__ = ["DRIVER_KEYS", "URL_OPTIONS", "read_amqp_url", "redact_amqp"]

SCHEMES = ("amqp", "amqps")

#: The seed's options a URL may set, each with the conversion of its text.
URL_OPTIONS = {"prefix": text, "slot_ttl_ms": integer}

#: Keys aio-pika's connection parses, and those aiormq reads from the URL (aiormq.connection.Connection).
DRIVER_KEYS = frozenset(p.name for p in aio_pika.Connection.PARAMETERS) | {
    "auth",
    "cafile",
    "capath",
    "cadata",
    "certfile",
    "keyfile",
    "no_verify_ssl",
    "heartbeat",
    "name",
    "timeout",
}


def redact_amqp(url: str) -> str:
    """The URL fit for logs: password masked, the user name (no secret in AMQP) kept."""
    return redact_url(url, bare_user_is_secret=False)


def read_amqp_url(url: object) -> UrlOptions:
    """Check an AMQP URL and take the backend's options out of it (``ValueError`` naming the fix)."""
    if not isinstance(url, str) or url_scheme(url) not in SCHEMES:
        shown = redact_amqp(url) if isinstance(url, str) else repr(url)
        raise ValueError(
            f"url={shown} must be an AMQP URL such as 'amqp://user:password@rabbit.internal/' "
            "or 'amqps://rabbit.internal/'"
        )
    return read_url_options(url, URL_OPTIONS, driver_keys=DRIVER_KEYS, what="AMQP")
