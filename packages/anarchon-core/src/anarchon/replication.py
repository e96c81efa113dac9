"""The backend kit's ``min_replicas`` and ``replica_timeout_ms``: how many copies a grant waits for, and how long.

A referee that replicates asynchronously (a primary streaming to replicas or
standbys after each commit) can lose its last grants when a copy is promoted,
and then a slot runs twice. A backend that can wait for its copies takes
these two options, checked here once for every such backend: a grant counts
only once ``min_replicas`` copies have it, waiting up to
``replica_timeout_ms``; ``"auto"`` (``None`` once checked) lets the backend
follow the server: wait for one copy while it has one.
"""

from __future__ import annotations

__all__ = ["AUTO", "check_min_replicas", "check_replica_timeout"]

#: ``min_replicas`` that follows the server: one copy while it has one, else none.
AUTO = "auto"


def check_min_replicas(value: object, copies: str = "replicas") -> int | None:
    """``min_replicas`` checked: a count, or ``None`` for ``"auto"``; ``copies`` names them in the error."""
    if value is None or value == AUTO:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(
            f"min_replicas={value!r} must be 'auto' (the default: wait for one of the {copies} while the server "
            f"has one) or a non-negative integer: the {copies} a grant must reach before it counts (0 never waits)"
        )
    return value


def check_replica_timeout(value: object, copies: str = "replicas") -> int:
    """``replica_timeout_ms`` checked: the milliseconds a grant waits for its copies."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(
            f"replica_timeout_ms={value!r} must be a positive integer (milliseconds a grant waits for min_replicas "
            f"{copies} before it counts as unknown), e.g. 100"
        )
    return value
