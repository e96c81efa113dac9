"""anarchon-sqlite: the embedded default backend, leases in one SQLite file per host.

``SQLiteBackend("anarchon.sqlite3")`` or ``Scheduler(backend="sqlite:///anarchon.sqlite3")``.
"""

from __future__ import annotations

from ._errors import DatabaseFileError, DatabaseFullError
from ._schema import SCHEMA_VERSION
from .backend import SQLiteBackend

__all__ = ["SCHEMA_VERSION", "DatabaseFileError", "DatabaseFullError", "SQLiteBackend"]
