"""``anarchon migrate``: create or upgrade a backend's schema ahead of a deploy, or print its SQL.

Only backends with a schema of their own have something to do (PostgreSQL:
``migration_sql()`` and ``start()``). ``--sql`` connects read-only, reads the
schema's version and prints the script that brings it to this release's, for
a DBA to review and run with ``psql -f``; without it the backend's own
``start()`` applies the same statements, safely while instances start.
"""

from __future__ import annotations

import argparse

from ._common import UsageError, reading, resolve

__all__ = ["migrate"]


async def migrate(args: argparse.Namespace) -> int:
    _, backend = resolve(args.target, args.backend)
    migration_sql = getattr(backend, "migration_sql", None)
    if not callable(migration_sql):
        if args.sql:
            raise UsageError(f"backend {backend.name!r} keeps no SQL schema: there is nothing to print")
        print(f"backend {backend.name!r} keeps no schema to migrate: start() prepares what it needs")
        return 0
    if args.sql:
        async with reading(backend):
            print(migration_sql(), end="")
        return 0
    await backend.start()
    try:
        print(f"{backend!r}: schema at version {getattr(backend, 'schema_version', '?')}, this release's")
    finally:
        await backend.close()
    return 0
