"""The PostgreSQL URL: what PostgresBackend reads from it and what it leaves to asyncpg.

``postgresql://[user[:password]@]host[:port][,host2…]/database[?key=value…]``.
The backend's own options (``schema``, ``timeout_ms``, ``min_replicas``,
``replica_timeout_ms``) are taken out of the
query and checked by the constructor like its arguments; the connection keys
asyncpg reads stay in the DSN. Any other key is refused by name: asyncpg
would send it to the server as a setting, so a typo (``?schem=billing``)
would fail late, or not at all. Server settings belong to a pool of your
own: ``asyncpg.create_pool(dsn, server_settings={...})``, passed as ``pool=``.
"""

from __future__ import annotations

from anarchon.urls import UrlOptions, auto_or_integer, integer, read_url_options, redact_url, text, url_scheme

__all__ = ["DRIVER_KEYS", "URL_OPTIONS", "read_postgres_url", "redact_dsn"]

SCHEMES = ("postgresql", "postgres")

#: PostgresBackend's options a URL may set, each with the conversion of its text.
URL_OPTIONS = {
    "schema": text,
    "timeout_ms": integer,
    "min_replicas": auto_or_integer,
    "replica_timeout_ms": integer,
}

#: The connection keys asyncpg reads from a DSN's query (asyncpg.connect_utils._parse_connspec),
#: and application_name, the one server setting the backend itself sets.
DRIVER_KEYS = frozenset(
    {
        "host",
        "port",
        "user",
        "password",
        "passfile",
        "database",
        "dbname",
        "service",
        "sslmode",
        "sslcert",
        "sslkey",
        "sslrootcert",
        "sslnegotiation",
        "sslcrl",
        "sslpassword",
        "ssl_min_protocol_version",
        "ssl_max_protocol_version",
        "target_session_attrs",
        "krbsrvname",
        "gsslib",
        "application_name",
    }
)


def redact_dsn(dsn: str) -> str:
    """The DSN fit for logs: password masked, the user name (no secret in PostgreSQL) kept."""
    return redact_url(dsn, bare_user_is_secret=False)


def read_postgres_url(dsn: object) -> UrlOptions:
    """Check a PostgreSQL URL and take PostgresBackend's options out of it (``ValueError`` naming the fix)."""
    if not isinstance(dsn, str):
        raise TypeError(f"dsn must be a string such as 'postgresql://localhost/postgres', got {type(dsn)}")
    if url_scheme(dsn) not in SCHEMES:
        raise ValueError(
            f"PostgresBackend needs a postgresql:// or postgres:// URL, got {redact_dsn(dsn)!r}; "
            "for example 'postgresql://app@db.internal/app?schema=billing'"
        )
    return read_url_options(dsn, URL_OPTIONS, driver_keys=DRIVER_KEYS, what="PostgreSQL")
