"""The Redis URL: what RedisBackend reads from it and what it leaves to redis-py.

``redis://[[user]:password@]host[:port][/db][?key=value…]``, or through Sentinel
``redis+sentinel://[[user]:password@]host[:port][,host[:port]…]/SERVICE[/db][?key=value…]``
(:mod:`._sentinel`). The backend's
own options (``prefix``, ``cluster``, ``sweep_ms``, ``connect_timeout_ms``,
``min_replicas``, ``replica_timeout_ms``) are taken out of the query and
checked by the constructor like its arguments; the keys redis-py reads stay in the URL; any other key is refused
by name, since redis-py would pass it to the connection as a keyword
(``AbstractConnection.__init__() got an unexpected keyword argument``). The
database must be a number: redis-py reads ``/abc`` as database 0.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

from redis.asyncio.connection import URL_QUERY_ARGUMENT_PARSERS

from anarchon.urls import UrlOptions, auto_or_integer, boolean, integer, read_url_options, redact_url, text, url_scheme

from ._sentinel import SCHEME as SENTINEL
from ._sentinel import read_sentinel_url

__all__ = ["DRIVER_KEYS", "URL_OPTIONS", "read_redis_url"]


SCHEMES = ("redis", "rediss", SENTINEL)

#: RedisBackend's options a URL may set, each with the conversion of its text.
URL_OPTIONS = {
    "prefix": text,
    "cluster": boolean,
    "sweep_ms": integer,
    "connect_timeout_ms": integer,
    "min_replicas": auto_or_integer,
    "replica_timeout_ms": integer,
}

#: Keys redis-py reads from a URL: those it converts, and the text keywords of its connections.
DRIVER_KEYS = frozenset(URL_QUERY_ARGUMENT_PARSERS) | {
    "client_name",
    "username",
    "password",
    "ssl_cert_reqs",
    "ssl_ca_certs",
    "ssl_ca_data",
    "ssl_ca_path",
    "ssl_certfile",
    "ssl_keyfile",
    "ssl_password",
    "ssl_ciphers",
}


def read_redis_url(url: object) -> UrlOptions:
    """Check a Redis URL and take RedisBackend's options out of it (``ValueError`` naming the fix)."""
    if not isinstance(url, str) or url_scheme(url) not in SCHEMES:
        shown = redact_url(url) if isinstance(url, str) else repr(url)
        raise ValueError(
            f"RedisBackend needs a redis://, rediss:// or redis+sentinel:// URL, got {shown}; for example "
            "'redis://localhost:6379/0' or 'redis+sentinel://sentinel1:26379,sentinel2:26379/mymaster/0'"
        )
    if url_scheme(url) == SENTINEL:
        return read_sentinel_url(url, URL_OPTIONS, DRIVER_KEYS)
    found = read_url_options(url, URL_OPTIONS, driver_keys=DRIVER_KEYS, what="Redis")
    parts = urlsplit(found.url)
    databases = [parts.path[1:]] + [v for k, v in parse_qsl(parts.query, keep_blank_values=True) if k == "db"]
    if any(db and not db.isdigit() for db in databases):
        raise ValueError(
            f"the database in the Redis URL {redact_url(url)} must be a number, such as redis://host:6379/0; "
            "redis-py would quietly use database 0 for anything else"
        )
    return found
