"""The errors this package adds: a database file that cannot be used, or cannot grow."""

from __future__ import annotations

import sqlite3

from anarchon.errors import BackendUnavailableError

__all__ = ["DatabaseFileError", "DatabaseFullError"]


class DatabaseFileError(BackendUnavailableError):
    """``start()`` found the database file unusable: the message says why and what to do.

    A :class:`~anarchon.errors.BackendUnavailableError`, so code that handles an
    unreachable backend handles this too; ``path`` is the absolute path tried.
    Raised for a folder that does not exist or cannot be written, a file that
    is not a SQLite database, and a database written by a newer schema.
    """

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


class DatabaseFullError(DatabaseFileError, sqlite3.OperationalError):
    """The SQLite file cannot grow because its filesystem is full; the message says what to do.

    A :class:`DatabaseFileError` (so a :class:`~anarchon.errors.BackendUnavailableError`)
    and a ``sqlite3.OperationalError``, so code catching either still catches it.
    ``sqlite_errorname`` is SQLite's own code (``SQLITE_FULL``, or the I/O error a
    full filesystem gave), ``free_bytes`` what was free when it was raised.
    """

    def __init__(self, message: str, *, path: str, code: str, free: int | None) -> None:
        super().__init__(message, path=path)
        self.sqlite_errorname = code
        self.free_bytes = free
