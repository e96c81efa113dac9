"""Job options: their defaults per backend tier and every check ``add()`` makes.

Defaults depend on the backend's tier (a claim backend cannot skip overlaps or
catch up), so options are resolved against the backend's capabilities, never
its name. A lease-only option set *explicitly* on a claim backend is refused;
left unset it simply takes the claim tier's value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .capabilities import Capabilities
from .cron.dst import DST_POLICIES, DstPolicy
from .distributions import LEASE_BACKENDS_HINT
from .errors import InvalidJobError, UnsupportedOptionError

__all__ = [
    "JOB_NAME_PATTERN",
    "MAX_ATTEMPTS",
    "MAX_DURATION_MS",
    "MAX_HISTORY_SIZE",
    "JobOptions",
    "check_history_limit",
    "check_job_name",
    "resolve_options",
]

JOB_NAME_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,100}")

Overlap = Literal["skip", "allow"]

#: Options only a lease backend can honour, with the value a claim backend has.
LEASE_ONLY: dict[str, object] = {
    "lease_ms": None,
    "max_attempts": None,
    "overlap": "allow",
    "catch_up_ms": 0,
    "hand_over": False,
}

#: Shorter leases cannot be renewed (every third of them) over a real network.
MIN_LEASE_MS = 100

# Upper bounds of the stored integers, the same on every backend: each is far
# below what the narrowest store holds (Lua numbers are doubles, exact to
# 2**53; PostgreSQL ``integer`` is 2**31 - 1; a RabbitMQ stream is sized at
# 3,600 bytes per run; a slot plus a duration must stay a ``datetime``), so a
# value add() accepts can never stop a backend. The core README has the table.

#: Ten years: any duration (jitter, lateness, timeout, lease, TTL, catch-up window).
MAX_DURATION_MS = 10 * 365 * 86_400_000
#: Runs kept per job (a RabbitMQ stream of this many runs takes 3.6 GB).
MAX_HISTORY_SIZE = 1_000_000
#: Tries of one slot.
MAX_ATTEMPTS = 1_000_000


@dataclass(frozen=True)
class JobOptions:
    """A job's options after defaults were applied for its backend."""

    timezone: str = "UTC"
    jitter_ms: int = 2000
    max_late_ms: int = 60_000
    timeout_ms: int | None = None
    history_size: int = 1000
    history_ttl_ms: int | None = None
    overlap: Overlap = "skip"
    lease_ms: int = 30_000
    max_attempts: int = 3
    catch_up_ms: int = 3_600_000
    hand_over: bool = True
    dst: DstPolicy = "cron"


OPTION_NAMES = frozenset(f.name for f in fields(JobOptions))


def check_job_name(name: object) -> str:
    if not isinstance(name, str) or not JOB_NAME_PATTERN.fullmatch(name):
        raise InvalidJobError(
            f"job name {name!r} is not allowed: use 1 to 100 letters, digits, '_' or '-' "
            "(names become queue names, subjects, keys and row values), for example 'nightly-report'",
            option="name",
            value=name,
        )
    return name


def check_history_limit(limit: object) -> int:
    """``history(limit=...)`` checked before any driver sees it: an integer from 0 to MAX_HISTORY_SIZE.

    Every backend calls this first in ``history()``; 0 gives ``[]``.
    """
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise TypeError(f"history limit={limit!r} must be an integer, for example limit=100")
    if not 0 <= limit <= MAX_HISTORY_SIZE:
        raise ValueError(
            f"history limit={limit!r} must be from 0 to {MAX_HISTORY_SIZE:,} (no job keeps more runs); "
            "for example limit=100"
        )
    return limit


def _where(job: str, backend: str) -> str:
    return f"job {job!r} on backend {backend!r}"


#: The integer options: (smallest, largest, example).
INT_BOUNDS: dict[str, tuple[int, int, int]] = {
    "jitter_ms": (0, MAX_DURATION_MS, 2000),
    "max_late_ms": (1, MAX_DURATION_MS, 60_000),
    "timeout_ms": (1, MAX_DURATION_MS, 120_000),
    "history_size": (1, MAX_HISTORY_SIZE, 1000),
    "history_ttl_ms": (1, MAX_DURATION_MS, 7 * 86_400_000),
    "lease_ms": (MIN_LEASE_MS, MAX_DURATION_MS, 30_000),
    "max_attempts": (1, MAX_ATTEMPTS, 3),
    "catch_up_ms": (0, MAX_DURATION_MS, 3_600_000),
}
#: Options that may also be ``None`` (off).
NULLABLE = frozenset({"timeout_ms", "history_ttl_ms"})


def _int(job: str, backend: str, option: str, value: object) -> int:
    minimum, maximum, example = INT_BOUNDS[option]
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        unit = " (milliseconds; the largest is ten years)" if option.endswith("_ms") else ""
        raise InvalidJobError(
            f"{_where(job, backend)}: {option}={value!r} must be an integer from {minimum:,} to {maximum:,}"
            f"{unit}, which every backend can store; for example {option}={example}",
            option=option,
            value=value,
        )
    return value


def _check_type(job: str, backend: str, option: str, value: object) -> None:
    """The checks of one explicit value that hold on every tier, made before the tier is looked at.

    So ``catch_up_ms=False`` or ``hand_over=0`` is refused on a claim backend as on a
    lease backend, though ``False == 0`` would pass for the claim tier's value.
    """
    if option in INT_BOUNDS and not (value is None and option in NULLABLE):
        _int(job, backend, option, value)
    elif option == "hand_over" and not isinstance(value, bool):
        raise InvalidJobError(
            f"{_where(job, backend)}: hand_over={value!r} must be True or False",
            option="hand_over",
            value=value,
        )
    elif option == "dst":
        _dst(job, backend, value)


def _dst(job: str, backend: str, value: object) -> None:
    """The DST policy: one of :data:`~anarchon.cron.dst.DST_POLICIES`, each named with what it does."""
    if not isinstance(value, str) or value not in DST_POLICIES:
        choices = "; ".join(f"{name!r} ({what})" for name, what in DST_POLICIES.items())
        raise InvalidJobError(
            f"{_where(job, backend)}: dst={value!r} is not a DST policy; use one of {choices}; "
            "for example dst='skip' so that a wall time a spring-forward gap removes does not run",
            option="dst",
            value=value,
        )


def resolve_options(job: str, explicit: dict[str, Any], capabilities: Capabilities, backend: str) -> JobOptions:
    """Apply defaults for the backend's tier and check every option.

    Raises ``TypeError`` for an unknown option (as a wrong keyword would),
    :class:`UnsupportedOptionError` for a lease-only option on a claim
    backend, and :class:`InvalidJobError` for every other bad value.
    """
    unknown = sorted(set(explicit) - OPTION_NAMES)
    if unknown:
        raise TypeError(
            f"{_where(job, backend)}: unknown option(s) {', '.join(unknown)}; "
            f"the options are {', '.join(sorted(OPTION_NAMES))}"
        )
    for option, value in explicit.items():
        if not (value is None and option in LEASE_ONLY and not capabilities.lease):
            _check_type(job, backend, option, value)
    values: dict[str, Any] = {}
    if not capabilities.lease:
        for option, claim_value in LEASE_ONLY.items():
            if option in explicit and explicit[option] != claim_value:
                raise UnsupportedOptionError(
                    f"{_where(job, backend)}: {option}={explicit[option]!r} needs a lease, and "
                    f"backend {backend!r} only claims (no backup runners, overlap protection, catch-up "
                    f"or hand-over); remove {option}, or use a lease backend: {LEASE_BACKENDS_HINT}",
                    option=option,
                    value=explicit[option],
                )
        values.update(overlap="allow", catch_up_ms=0, hand_over=False)
    if "history_ttl_ms" in explicit and explicit["history_ttl_ms"] is not None and not capabilities.history_ttl:
        raise UnsupportedOptionError(
            f"{_where(job, backend)}: history_ttl_ms={explicit['history_ttl_ms']!r} is refused: this backend "
            "trims history by count only; set history_size instead, or use "
            f"{LEASE_BACKENDS_HINT} for time-based trimming",
            option="history_ttl_ms",
            value=explicit["history_ttl_ms"],
        )
    values.update({k: v for k, v in explicit.items() if k not in LEASE_ONLY or capabilities.lease})
    opts = JobOptions(**values)

    tz = opts.timezone
    if not isinstance(tz, str) or not tz:
        raise InvalidJobError(
            f"{_where(job, backend)}: timezone={tz!r} must be an IANA zone name such as 'Europe/Athens'",
            option="timezone",
            value=tz,
        )
    try:
        ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise InvalidJobError(
            f"{_where(job, backend)}: timezone={tz!r} is not a known IANA zone; use a name such as "
            "'UTC' or 'Europe/Athens' (install the tzdata package where the system has no zone files)",
            option="timezone",
            value=tz,
        ) from exc

    for option in INT_BOUNDS:
        value = getattr(opts, option)
        if not (value is None and option in NULLABLE):
            _int(job, backend, option, value)
    if opts.overlap not in ("skip", "allow"):
        raise InvalidJobError(
            f"{_where(job, backend)}: overlap={opts.overlap!r} must be 'skip' or 'allow'",
            option="overlap",
            value=opts.overlap,
        )
    _dst(job, backend, opts.dst)
    if not isinstance(opts.hand_over, bool):
        raise InvalidJobError(
            f"{_where(job, backend)}: hand_over={opts.hand_over!r} must be True or False",
            option="hand_over",
            value=opts.hand_over,
        )
    if opts.jitter_ms >= opts.max_late_ms:
        raise InvalidJobError(
            f"{_where(job, backend)}: jitter_ms={opts.jitter_ms} must be smaller than "
            f"max_late_ms={opts.max_late_ms}, or every claim could arrive too late; lower jitter_ms "
            "or raise max_late_ms",
            option="jitter_ms",
            value=opts.jitter_ms,
        )
    return opts
