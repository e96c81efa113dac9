"""The one table of what the core says about distributions it does not import.

The core imports no backend. It still has to name them in four places: the
install hint when a URL's scheme or a lazily imported class has no installed
backend, the default backend, the lease backends an error can suggest, and the
``anarchon`` subcommands another distribution adds.
Those names live here, as data, and nowhere else in the core; installed
plugins are asked first wherever they can answer.
"""

from __future__ import annotations

__all__ = [
    "COMMAND_DISTRIBUTIONS",
    "DEFAULT_BACKEND",
    "DEFAULT_BACKEND_DISTRIBUTION",
    "FIRST_PARTY",
    "LEASE_BACKENDS_HINT",
    "SCHEME_DISTRIBUTIONS",
    "install_hint",
]

#: Class name -> (import package, distribution) of the backends this project
#: ships, so ``from anarchon import RedisBackend`` works once installed and
#: otherwise names what to install.
# >>> generated: first-party (scripts/backends.py, from packages/*/backend.toml)
FIRST_PARTY: dict[str, tuple[str, str]] = {
    "SQLiteBackend": ("anarchon_sqlite", "anarchon-sqlite"),
    "RedisBackend": ("anarchon_redis", "anarchon-redis"),
    "PostgresBackend": ("anarchon_postgres", "anarchon-postgres"),
    "RabbitMQBackend": ("anarchon_rabbitmq", "anarchon-rabbitmq"),
    "NatsBackend": ("anarchon_nats", "anarchon-nats"),
}
_BACKEND_SCHEMES: dict[str, str] = {
    "sqlite": "anarchon-sqlite",
    "redis": "anarchon-redis",
    "rediss": "anarchon-redis",
    "redis+sentinel": "anarchon-redis",
    "postgresql": "anarchon-postgres",
    "postgres": "anarchon-postgres",
    "amqp": "anarchon-rabbitmq",
    "amqps": "anarchon-rabbitmq",
    "nats": "anarchon-nats",
    "tls": "anarchon-nats",
}
# <<< generated: first-party

#: URL scheme -> distribution that provides it, for the "not installed" message.
SCHEME_DISTRIBUTIONS: dict[str, str] = {"memory": "anarchon-core", **_BACKEND_SCHEMES}

#: ``anarchon`` subcommand -> the distribution that adds it (through the hook
#: ``anarchon_register_commands``), for the hint when it is not installed.
COMMAND_DISTRIBUTIONS: dict[str, str] = {
    "web": "anarchon-web",
}

#: The backend of a Scheduler given none and no ``ANARCHON_BACKEND``: a file beside the app.
DEFAULT_BACKEND = "sqlite:///anarchon.sqlite3"
DEFAULT_BACKEND_DISTRIBUTION = "anarchon-sqlite"

#: The lease backends an error suggests when an option needs a lease.
LEASE_BACKENDS_HINT = "Redis, PostgreSQL or SQLite"


def install_hint(distribution: str) -> str:
    return f"pip install {distribution}"
