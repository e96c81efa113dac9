"""Instance ids: checked once, when the scheduler is made.

An instance id is recorded on every run and travels in claims (a PostgreSQL
``text`` column, a Redis script argument, a broker's message), so a
NUL or a non-string would fail every claim of every job later, far from the
call that passed it. So: a string of 1 to 200 letters, digits and
``_ . : @ + / -``, which covers host names, pod names and UUIDs.
"""

from __future__ import annotations

import getpass
import os
import re
import secrets
import socket

__all__ = ["INSTANCE_ID_PATTERN", "check_instance_id", "default_actor", "default_instance_id"]

INSTANCE_ID_PATTERN = re.compile(r"[A-Za-z0-9_.:@+/-]{1,200}")


def check_instance_id(value: object) -> str:
    """``value`` if it is a valid instance id, else a ``ValueError``/``TypeError`` saying what to pass."""
    if not isinstance(value, str):
        raise TypeError(
            f"instance_id={value!r} must be a string such as 'web-1' (it is recorded on every run), "
            f"not {type(value).__name__}; pass str(...) or leave it out for <hostname>-<pid>-<hex>"
        )
    if not INSTANCE_ID_PATTERN.fullmatch(value):
        raise ValueError(
            f"instance_id={value!r} is not allowed: use 1 to 200 letters, digits or '_', '.', ':', '@', '+', "
            "'/', '-' (it is recorded on every run by every backend), for example 'web-1'; or leave it out"
        )
    return value


def default_instance_id() -> str:
    """``<hostname>-<pid>-<4 hex>``, with the host name cut and cleaned so the id always passes the check."""
    host = re.sub(r"[^A-Za-z0-9_.:@+/-]", "_", socket.gethostname())[:180] or "host"
    return f"{host}-{os.getpid()}-{secrets.token_hex(2)}"


def default_actor() -> str:
    """``user@host``: who made a change (a pause, a schedule's edit), when the caller does not say.

    The login name, not the instance id: an audit trail answers "who", and a
    control process's instance id names a host, not a person.
    """
    try:
        user = getpass.getuser()
    except Exception:  # no login name (a container with an unknown uid)
        user = "unknown"
    return f"{user}@{socket.gethostname()}"
