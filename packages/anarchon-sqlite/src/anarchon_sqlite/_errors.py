"""The one error this package adds: a database file that cannot be used."""

from __future__ import annotations

from anarchon.errors import BackendUnavailableError

__all__ = ["DatabaseFileError"]


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
