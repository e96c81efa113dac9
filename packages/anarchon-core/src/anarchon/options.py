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
from .distributions import LEASE_BACKENDS_HINT
from .errors import InvalidJobError, UnsupportedOptionError

__all__ = ["JOB_NAME_PATTERN", "JobOptions", "check_job_name", "resolve_options"]

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


def _where(job: str, backend: str) -> str:
    return f"job {job!r} on backend {backend!r}"


def _int(job: str, backend: str, option: str, value: object, *, minimum: int, example: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        bound = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise InvalidJobError(
            f"{_where(job, backend)}: {option}={value!r} must be {bound}"
            f"{' (milliseconds)' if option.endswith('_ms') else ''}; for example {option}={example}",
            option=option,
            value=value,
        )
    return value


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

    _int(job, backend, "jitter_ms", opts.jitter_ms, minimum=0, example=2000)
    _int(job, backend, "max_late_ms", opts.max_late_ms, minimum=1, example=60_000)
    if opts.timeout_ms is not None:
        _int(job, backend, "timeout_ms", opts.timeout_ms, minimum=1, example=120_000)
    _int(job, backend, "history_size", opts.history_size, minimum=1, example=1000)
    if opts.history_ttl_ms is not None:
        _int(job, backend, "history_ttl_ms", opts.history_ttl_ms, minimum=1, example=7 * 86_400_000)
    _int(job, backend, "lease_ms", opts.lease_ms, minimum=MIN_LEASE_MS, example=30_000)
    _int(job, backend, "max_attempts", opts.max_attempts, minimum=1, example=3)
    _int(job, backend, "catch_up_ms", opts.catch_up_ms, minimum=0, example=3_600_000)
    if opts.overlap not in ("skip", "allow"):
        raise InvalidJobError(
            f"{_where(job, backend)}: overlap={opts.overlap!r} must be 'skip' or 'allow'",
            option="overlap",
            value=opts.overlap,
        )
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
