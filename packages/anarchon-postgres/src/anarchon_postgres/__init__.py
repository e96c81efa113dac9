"""anarchon-postgres: the lease backend on PostgreSQL.

``PostgresBackend(dsn="postgresql://localhost/postgres", pool=None, schema="anarchon")``
"""

from __future__ import annotations

from ._schema import SCHEMA_VERSION
from .backend import PostgresBackend

__all__ = ["SCHEMA_VERSION", "PostgresBackend"]
