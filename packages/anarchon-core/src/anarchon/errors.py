"""Every error anarchon raises on purpose.

The tree::

    AnarchonError
    ├── InvalidJobError (ValueError)        a job or option that cannot work: fix the call to add()
    │   └── UnsupportedOptionError          a lease-only option on a backend that only claims
    ├── BackendNotInstalledError (ImportError)   pip install the package it names
    ├── BackendUnavailableError (ConnectionError) start() could not reach the backend
    ├── JobNotFoundError (KeyError)          no job of that name on this scheduler
    ├── BackfillError (ValueError)           a backfill that cannot be done as asked
    ├── UnsupportedOperationError (NotImplementedError)  pause/trigger on a backend without the capability
    └── ScheduleConflictError (ValueError)   a stored schedule changed over someone else's change

Each inherits the builtin a caller would already catch, so ``except ValueError``
around ``add()`` keeps working.
"""

from __future__ import annotations

__all__ = [
    "AnarchonDeprecationWarning",
    "AnarchonError",
    "BackendNotInstalledError",
    "BackendUnavailableError",
    "BackfillError",
    "InstanceIdInUseError",
    "InvalidJobError",
    "JobNotFoundError",
    "ScheduleConflictError",
    "UnsupportedOperationError",
    "UnsupportedOptionError",
]


class AnarchonError(Exception):
    """Base of every error anarchon raises on purpose."""


class InvalidJobError(AnarchonError, ValueError):
    """A job whose name, schedule or options cannot work on this backend.

    Raised by ``Scheduler.add()`` (and ``anarchon check``) before anything is
    scheduled, so bad input never turns into a lost or a doubled run.
    """

    def __init__(self, message: str, *, option: str | None = None, value: object = None) -> None:
        super().__init__(message)
        self.option = option
        self.value = value


class UnsupportedOptionError(InvalidJobError):
    """A lease-only option set on a backend of the claim tier."""


class BackendNotInstalledError(AnarchonError, ImportError):
    """The backend asked for lives in a distribution that is not installed."""


class BackendUnavailableError(AnarchonError, ConnectionError):
    """``start()`` could not reach the backend within its connect timeout."""


class JobNotFoundError(AnarchonError, KeyError):
    """No job of that name is registered on this scheduler."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0]) if self.args else ""


class BackfillError(AnarchonError, ValueError):
    """A backfill refused before anything ran: a range, a backend or a history that cannot tell.

    ``option`` names what to change (``--from``, ``history_size``…).
    """

    def __init__(self, message: str, *, option: str | None = None) -> None:
        super().__init__(message)
        self.option = option


class InstanceIdInUseError(AnarchonError, ValueError):
    """A live instance on another host (or another live process here) holds this instance id."""


class UnsupportedOperationError(AnarchonError, NotImplementedError):
    """A fleet operation (pause, resume, trigger) the backend cannot do.

    The message names the operation, the capability it needs, the backend,
    and the backends that have it.
    """

    def __init__(self, message: str, *, operation: str, capability: str) -> None:
        super().__init__(message)
        self.operation = operation
        self.capability = capability


class ScheduleConflictError(AnarchonError, ValueError):
    """A stored schedule was not at the revision the change expected (``expected`` 0: absent).

    ``current`` is its revision now, 0 when there is no such schedule. Nothing was changed:
    read it again (``anarchon schedules show``), then repeat the change against ``current``.
    """

    def __init__(self, name: str, expected: int | None, current: int) -> None:
        if current == 0:
            text = f"there is no stored schedule named {name!r}; add it first (anarchon schedules add)"
        elif expected == 0:
            text = f"a stored schedule named {name!r} exists already (revision {current}); change it with 'set'"
        else:
            text = (
                f"stored schedule {name!r} is at revision {current}, not {expected}: someone changed it since "
                f"you read it; read it again (anarchon schedules show {name}) and repeat the change "
                f"with --if-revision {current}"
            )
        super().__init__(text)
        self.name = name
        self.expected = expected
        self.current = current


class AnarchonDeprecationWarning(DeprecationWarning):
    """An option or call of anarchon that still works and will go: the message names its replacement.

    Its own class, so a test suite can turn anarchon's deprecations into errors
    (``filterwarnings = ["error::anarchon.errors.AnarchonDeprecationWarning"]``,
    as anarchon's own tests do) without failing on other libraries' warnings.
    """
