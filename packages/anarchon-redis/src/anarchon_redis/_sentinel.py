"""Redis Sentinel: the ``redis+sentinel://`` URL, and a client that follows the primary the Sentinels name.

``redis+sentinel://[[user]:password@]host[:port][,host[:port]…]/SERVICE[/DB][?key=value…]`` is the form
the Redis-Sentinel-Url package defined and Prefect and RedisVL accept too: the Sentinels, comma
separated (port 26379 when left out), then the service name (``sentinel monitor <name> …``), then the
database. The user and password are the data nodes' (the primary's and its replicas'); the Sentinels'
own ``requirepass`` goes in the query as ``sentinel_password`` (and ``sentinel_username``). The query
takes the backend's options and redis-py's connection keys as ``redis://`` does; TLS is not offered
through this URL (pass ``client=Sentinel(...).master_for(...)``), nor Redis Cluster (it has no Sentinel).

The client is redis-py's ``Sentinel(...).master_for(SERVICE)``: each new connection asks a Sentinel
where the primary is. What it leaves open, this module closes:

* a connection stays on the server it first reached. Until it fails, it keeps writing to a primary the
  Sentinels have replaced (a switch-over leaves the old one a primary for seconds before they demote
  it). :func:`follow_primary` asks the Sentinels again (the backend every ``WATCH_PERIOD_S``, the
  heartbeat every second); when the primary moved, idle connections are closed and busy ones are
  closed as they come back (:class:`PrimaryPool`), so every call soon goes to the new primary;
* a demoted primary answers writes with ``READONLY``: redis-py turns that into a ``ConnectionError``
  and reconnects, so no claim is granted there (its ``WAIT`` would fail anyway: a replica refuses it);
* closing the client closes its Sentinel connections too (:class:`SentinelPrimary`).

Scripts are sent again as ``EVAL`` on ``NOSCRIPT`` (:mod:`._calls`), which a promoted replica answers.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Union
from urllib.parse import parse_qsl, unquote, urlsplit

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.connection import parse_url
from redis.asyncio.sentinel import Sentinel, SentinelConnectionPool

from anarchon.urls import UrlOptions, read_url_options, redact_url, url_scheme

__all__ = ["SCHEME", "PrimaryPool", "SentinelPrimary", "connect", "follow_primary", "read_sentinel_url"]

SCHEME = "redis+sentinel"
DEFAULT_PORT = 26379
#: Query keys for the Sentinels' own connections (their ``requirepass``/ACL user), not the data nodes'.
SENTINEL_KEYS = frozenset({"sentinel_username", "sentinel_password"})
_EXAMPLE = "redis+sentinel://sentinel1:26379,sentinel2:26379/mymaster/0"

Client = Union["Redis", "RedisCluster"]


@dataclass(frozen=True)
class Target:
    """What a ``redis+sentinel://`` URL names."""

    sentinels: list[tuple[str, int]]
    service: str
    #: redis-py keywords for the data nodes' connections (password, db, socket_timeout…).
    connection: dict[str, Any] = field(default_factory=dict)
    #: redis-py keywords for the Sentinels' connections.
    sentinel: dict[str, Any] = field(default_factory=dict)


def _address(address: str, url: str) -> tuple[str, int]:
    if address.startswith("["):
        host, _, rest = address[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else rest
        bad_port = bool(rest) and not rest.startswith(":")
    else:
        host, colon, port = address.rpartition(":") if ":" in address else (address, "", "")
        bad_port = bool(colon) and not port
    if not host:
        raise ValueError(
            f"the Sentinel address {address!r} in the Redis Sentinel URL {redact_url(url)} has no host; "
            f"list the Sentinels as host:port, comma separated, such as {_EXAMPLE}"
        )
    if bad_port or (port and not (port.isdigit() and 1 <= int(port) <= 65535)):
        raise ValueError(
            f"the Sentinel port in {address!r} (Redis Sentinel URL {redact_url(url)}) must be a number from 1 to "
            f"65535; write host:port, or leave the port out for {DEFAULT_PORT}, such as {_EXAMPLE}"
        )
    return host, int(port) if port else DEFAULT_PORT


def _addresses(url: str) -> list[tuple[str, int]] | None:
    """The Sentinels, or ``None`` when the URL is malformed (:func:`~anarchon.urls.split_url` says how).

    Read before the generic check so that a bad port is named as such; only a URL whose host part
    cannot hold a piece of a password (no ``#``, no ``@`` after the host) gets here.
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.fragment or url.endswith("#") or "@" in parts.path or "@" in parts.query:
        return None
    hosts = parts.netloc.rpartition("@")[2]
    if not hosts:
        raise ValueError(
            f"the Redis Sentinel URL {redact_url(url)} names no Sentinel; list them as host:port before the "
            f"service name, such as {_EXAMPLE}"
        )
    return [_address(a, url) for a in hosts.split(",")]


def _service(path: str, url: str) -> tuple[str, str]:
    """The service name and the database (``""``: none) of the URL's path."""
    pieces = path[1:].split("/") if path else [""]
    service, db = unquote(pieces[0]), pieces[1] if len(pieces) > 1 else ""
    if not service:
        raise ValueError(
            f"the Redis Sentinel URL {redact_url(url)} names no service; put the primary's name as the Sentinels "
            f"know it (sentinel monitor <name> …) after the Sentinels, such as {_EXAMPLE}"
        )
    if service.isdigit():
        raise ValueError(
            f"the service name {service!r} in the Redis Sentinel URL {redact_url(url)} is a number: the database "
            f"comes after the service name, such as {_EXAMPLE}"
        )
    if len(pieces) > 2 or (db and not db.isdigit()):
        raise ValueError(
            f"the database in the Redis Sentinel URL {redact_url(url)} must be a number after the service name, "
            f"such as {_EXAMPLE}; redis-py would quietly use database 0 for anything else"
        )
    return service, db


def read_sentinel_url(url: str, options: dict[str, Any], driver_keys: frozenset[str]) -> UrlOptions:
    """Check a ``redis+sentinel://`` URL and take the backend's options out of it (``ValueError`` naming the fix)."""
    _addresses(url)
    tls = sorted(k for k in driver_keys if k.startswith("ssl"))
    try:
        found = read_url_options(url, options, driver_keys=(driver_keys - set(tls)) | SENTINEL_KEYS, what="Redis")
    except ValueError as exc:
        if any(f"unknown option '{k}'" in str(exc) for k in tls):
            raise ValueError(
                f"{exc}; TLS is not offered through a redis+sentinel:// URL: pass "
                "client=redis.asyncio.sentinel.Sentinel(...).master_for(...) instead"
            ) from None
        raise
    if found.values.get("cluster"):
        raise ValueError(
            f"cluster=true in the Redis Sentinel URL {redact_url(url)}: Sentinel watches one primary, Redis Cluster "
            "fails over by itself; use redis://node:6379/0?cluster=true for a cluster"
        )
    target(found.url)
    return found


def target(url: str) -> Target:
    """The Sentinels, the service and the keywords of both kinds of connection, from a checked URL."""
    sentinels = _addresses(url)
    if sentinels is None:
        raise ValueError(f"the Redis Sentinel URL {redact_url(url)} is malformed")
    parts = urlsplit(url)
    service, db = _service(parts.path, url)
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    if any(k == "db" and not v.isdigit() for k, v in pairs):
        raise ValueError(f"the database in the Redis Sentinel URL {redact_url(url)} must be a number")
    ours = {k: v for k, v in pairs if k in SENTINEL_KEYS}
    rest = "&".join(p for p in parts.query.split("&") if p and p.partition("=")[0] not in SENTINEL_KEYS)
    userinfo = parts.netloc.rpartition("@")[0]
    # redis-py reads the data nodes' keywords from an equivalent redis:// URL: every key works as there.
    plain = f"redis://{userinfo + '@' if userinfo else ''}localhost{'/' + db if db else ''}"
    connection: dict[str, Any] = dict(parse_url(plain + (f"?{rest}" if rest else "")))
    connection.pop("host", None)
    connection.pop("port", None)
    sentinel: dict[str, Any] = {
        k: connection[k] for k in ("socket_timeout", "socket_connect_timeout", "socket_keepalive") if k in connection
    }
    if "sentinel_username" in ours:
        sentinel["username"] = ours["sentinel_username"]
    if "sentinel_password" in ours:
        sentinel["password"] = ours["sentinel_password"]
    return Target(sentinels, service, connection, sentinel)


class PrimaryPool(SentinelConnectionPool):
    """A connection that comes back from a primary the Sentinels no longer name is closed, not reused."""

    async def release(self, connection: Any) -> None:
        address = self.master_address
        if address is not None and (connection.host, connection.port) != tuple(address):
            with contextlib.suppress(Exception):
                await connection.disconnect()
        await super().release(connection)


class SentinelPrimary(Redis):
    """The primary's client; closing it closes its Sentinels' connections too."""

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        try:
            await super().aclose(close_connection_pool)
        finally:
            manager = getattr(self.connection_pool, "sentinel_manager", None)
            if isinstance(manager, Sentinel):
                await manager.aclose()


def connect(url: str, cluster: bool, timeout_s: float) -> Client:
    """The client for a backend URL: a Sentinel-managed primary, a cluster, or one server."""
    if url_scheme(url) == SCHEME:
        t = target(url)
        sentinel = {"socket_connect_timeout": timeout_s, "socket_timeout": timeout_s, **t.sentinel}
        connection = {"socket_connect_timeout": timeout_s, **t.connection}
        manager = Sentinel(t.sentinels, sentinel_kwargs=sentinel, **connection)
        client: Redis = manager.master_for(t.service, redis_class=SentinelPrimary, connection_pool_class=PrimaryPool)
        return client
    if cluster:
        return RedisCluster.from_url(url, socket_connect_timeout=timeout_s)
    return Redis.from_url(url, socket_connect_timeout=timeout_s)


async def follow_primary(client: Any) -> None:
    """Ask the Sentinels where the primary is (a Sentinel-managed client only); errors are the calls' to report.

    When it moved, the pool closes its idle connections at once and the busy ones as they come back.
    """
    pool = getattr(client, "connection_pool", None)
    if isinstance(pool, SentinelConnectionPool):
        with contextlib.suppress(Exception):
            await pool.get_master_address()  # type: ignore[no-untyped-call]
