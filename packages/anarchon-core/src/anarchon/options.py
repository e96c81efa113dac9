"""Job options: their defaults per backend tier and every check ``add()`` makes.

Defaults depend on the backend's tier (a claim backend cannot skip overlaps or
catch up), so options are resolved against the backend's capabilities, never
its name. A lease-only option set *explicitly* on a claim backend is refused;
left unset it simply takes the claim tier's value.
"""

from __future__ import annotations

import dataclasses
import re
import sys
import warnings
from dataclasses import dataclass, fields
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .capabilities import Capabilities
from .cron.dst import DST_POLICIES, DstPolicy
from .distributions import LEASE_BACKENDS_HINT
from .errors import AnarchonDeprecationWarning, InvalidJobError, UnsupportedOptionError

__all__ = [
    "JOB_NAME_PATTERN",
    "MAX_ATTEMPTS",
    "MAX_DURATION_MS",
    "MAX_HISTORY_SIZE",
    "MAX_RETRIES",
    "JobOptions",
    "check_group_name",
    "check_history_limit",
    "check_job_name",
    "resolve_options",
]

JOB_NAME_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,100}")

Overlap = Literal["skip", "allow"]
#: What an instance does with the slots nobody ran while no instance could claim them (lease tier).
CatchUp = Literal["coalesce", "each", "none"]
CATCH_UP_POLICIES: tuple[str, ...] = ("coalesce", "each", "none")

#: Options only a lease backend can honour, with the value a claim backend has.
LEASE_ONLY: dict[str, object] = {
    "lease_ms": None,
    "max_attempts": None,
    "max_takeovers": None,
    "overlap": "allow",
    "catch_up_ms": 0,
    "catch_up": "none",
    "catch_up_max": None,
    "hand_over": False,
    "every_instance": False,
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
#: Retries of one attempt after the job raised; its error text carries the count (see Run.retries).
MAX_RETRIES = 1000
#: Missed slots one catch-up with ``catch_up="each"`` claims in one batch.
MAX_CATCH_UP = 10_000
#: ``catch_up_max`` of a job with ``catch_up="each"`` that sets none: a day of hourly slots.
CATCH_UP_EACH_DEFAULT = 24


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
    #: Runners one slot may have: the first, and one more per take-over after a runner died. Not
    #: retries (``retries``). Set as ``max_takeovers`` (this minus one); backends read this field.
    max_attempts: int = 3
    catch_up_ms: int = 3_600_000
    #: ``"coalesce"``: one run of the newest missed slot (``missed`` counts them); ``"each"``: one run
    #: per missed slot, oldest first; ``"none"``: missed slots are not run.
    catch_up: CatchUp = "coalesce"
    #: With ``catch_up="each"``: the most missed slots run, the newest ones (``None`` on other policies).
    catch_up_max: int | None = None
    hand_over: bool = True
    dst: DstPolicy = "cron"
    #: Re-runs of a slot whose run raised (or timed out), by the same instance under the same lease.
    retries: int = 0
    #: Delay before the first retry; it doubles for each next one, up to ``retry_delay_max_ms``.
    retry_delay_ms: int = 1000
    retry_delay_max_ms: int = 300_000
    #: Draw each delay from its upper half, so jobs that failed together do not retry in step.
    retry_jitter: bool = True
    #: The concurrency group whose limit the job's runs obey across the fleet (``anarchon.groups``).
    group: str | None = None
    #: With ``group``: how long after its slot a run may wait for a place before it is recorded
    #: ``skipped`` (``None``: the job's ``max_late_ms``).
    max_wait_ms: int | None = None
    #: One run per live instance per slot, each instance's claimed and recorded for it (``anarchon.every_instance``).
    every_instance: bool = False

    @property
    def wait_bound_ms(self) -> int:
        """How long after its slot a run of a group may still wait for a place."""
        return self.max_late_ms if self.max_wait_ms is None else self.max_wait_ms

    @property
    def max_takeovers(self) -> int:
        """Take-overs one slot may have after its runner died (``max_attempts - 1``)."""
        return self.max_attempts - 1

    @property
    def catches_up(self) -> bool:
        """Whether missed slots are run at all (a window and a policy other than ``"none"``)."""
        return self.catch_up_ms > 0 and self.catch_up != "none"


#: What ``add()`` accepts: the fields, and ``max_takeovers``, the name of ``max_attempts`` since 0.x.
OPTION_NAMES = frozenset(f.name for f in fields(JobOptions)) | {"max_takeovers"}


def check_job_name(name: object) -> str:
    if not isinstance(name, str) or not JOB_NAME_PATTERN.fullmatch(name):
        raise InvalidJobError(
            f"job name {name!r} is not allowed: use 1 to 100 letters, digits, '_' or '-' "
            "(names become queue names, subjects, keys and row values), for example 'nightly-report'",
            option="name",
            value=name,
        )
    return name


def check_group_name(name: object, *, option: str = "group") -> str:
    """A group name is a job name (:func:`check_job_name`'s rule): it becomes part of keys, rows and payloads."""
    if not isinstance(name, str) or not JOB_NAME_PATTERN.fullmatch(name):
        raise InvalidJobError(
            f"{option}={name!r} is not a group name: use 1 to 100 letters, digits, '_' or '-' "
            "(as a job name), for example group='reports'",
            option=option,
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
    "max_takeovers": (0, MAX_ATTEMPTS - 1, 2),
    "catch_up_ms": (0, MAX_DURATION_MS, 3_600_000),
    "catch_up_max": (1, MAX_CATCH_UP, 24),
    "retries": (0, MAX_RETRIES, 3),
    "retry_delay_ms": (0, MAX_DURATION_MS, 1000),
    "retry_delay_max_ms": (0, MAX_DURATION_MS, 300_000),
    "max_wait_ms": (1, MAX_DURATION_MS, 600_000),
}
#: Options that may also be ``None`` (off).
NULLABLE = frozenset({"timeout_ms", "history_ttl_ms", "catch_up_max", "max_wait_ms"})
#: Options left out of a job's stored definition while they have this value, so that a release that
#: added them does not change the fingerprint of every job (the fleet registry would see drift).
OMITTED_AT_DEFAULT: dict[str, object] = {"group": None, "max_wait_ms": None, "every_instance": False}
#: The True-or-False options.
BOOLS = frozenset({"hand_over", "retry_jitter", "every_instance"})


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
    elif option in BOOLS and not isinstance(value, bool):
        raise InvalidJobError(
            f"{_where(job, backend)}: {option}={value!r} must be True or False",
            option=option,
            value=value,
        )
    elif option == "catch_up" and value not in CATCH_UP_POLICIES:
        raise InvalidJobError(
            f"{_where(job, backend)}: catch_up={value!r} must be 'coalesce' (one run covers the missed "
            "slots), 'each' (one run per missed slot, oldest first) or 'none'",
            option="catch_up",
            value=value,
        )
    elif option == "dst":
        _dst(job, backend, value)
    elif option == "group" and value is not None:
        try:
            check_group_name(value)
        except InvalidJobError as exc:
            raise InvalidJobError(f"{_where(job, backend)}: {exc}", option="group", value=value) from None


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
        values.update(overlap="allow", catch_up_ms=0, catch_up="none", hand_over=False)
    if "history_ttl_ms" in explicit and explicit["history_ttl_ms"] is not None and not capabilities.history_ttl:
        raise UnsupportedOptionError(
            f"{_where(job, backend)}: history_ttl_ms={explicit['history_ttl_ms']!r} is refused: this backend "
            "trims history by count only; set history_size instead, or use "
            f"{LEASE_BACKENDS_HINT} for time-based trimming",
            option="history_ttl_ms",
            value=explicit["history_ttl_ms"],
        )
    explicit = _takeovers_as_attempts(job, backend, explicit)
    values.update({k: v for k, v in explicit.items() if k not in LEASE_ONLY or capabilities.lease})
    if values.get("every_instance") and "catch_up" not in explicit:
        values["catch_up"] = "none"  # a slot an instance missed while down stays missed for it (every_instance)
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
    for option in BOOLS:
        _check_type(job, backend, option, getattr(opts, option))
    _check_type(job, backend, "catch_up", opts.catch_up)
    opts = _check_policies(job, backend, opts)
    _check_group(job, backend, opts, capabilities)
    if opts.jitter_ms >= opts.max_late_ms:
        raise InvalidJobError(
            f"{_where(job, backend)}: jitter_ms={opts.jitter_ms} must be smaller than "
            f"max_late_ms={opts.max_late_ms}, or every claim could arrive too late; lower jitter_ms "
            "or raise max_late_ms",
            option="jitter_ms",
            value=opts.jitter_ms,
        )
    return _shared(opts)


#: Equal options, one object: 100,000 stored schedules hold a handful of distinct option sets.
_SHARED: dict[JobOptions, JobOptions] = {}
_SHARED_MAX = 10_000


def _shared(opts: JobOptions) -> JobOptions:
    if len(_SHARED) >= _SHARED_MAX:
        _SHARED.clear()
    return _SHARED.setdefault(opts, opts)


def _check_policies(job: str, backend: str, opts: JobOptions) -> JobOptions:
    """The checks between the retry and catch-up options."""
    where = _where(job, backend)
    if opts.retry_delay_ms > opts.retry_delay_max_ms:
        raise InvalidJobError(
            f"{where}: retry_delay_ms={opts.retry_delay_ms} is above retry_delay_max_ms="
            f"{opts.retry_delay_max_ms}, the cap of every retry's delay; lower retry_delay_ms or raise "
            "retry_delay_max_ms",
            option="retry_delay_ms",
            value=opts.retry_delay_ms,
        )
    if opts.catch_up_max is not None and opts.catch_up != "each":
        raise InvalidJobError(
            f"{where}: catch_up_max={opts.catch_up_max} bounds catch_up='each', and this job's catch_up is "
            f"{opts.catch_up!r} (one run covers every missed slot, or none runs); set catch_up='each' or "
            "remove catch_up_max",
            option="catch_up_max",
            value=opts.catch_up_max,
        )
    if opts.catch_up == "each" and opts.overlap == "skip":
        raise InvalidJobError(
            f"{where}: catch_up='each' starts the missed slots' runs together, oldest first, which "
            "overlap='skip' would skip but the first of; set overlap='allow' (the runs then overlap), or "
            "use catch_up='coalesce' for one run that covers them",
            option="catch_up",
            value="each",
        )
    if opts.catch_up == "each" and opts.catch_up_max is None:
        return dataclasses.replace(opts, catch_up_max=CATCH_UP_EACH_DEFAULT)
    return opts


def _check_group(job: str, backend: str, opts: JobOptions, capabilities: Capabilities) -> None:
    """``group`` needs a backend that holds groups; ``max_wait_ms`` bounds a group's wait, so needs one."""
    if opts.group is not None and not capabilities.groups:
        raise UnsupportedOptionError(
            f"{_where(job, backend)}: group={opts.group!r} needs a backend with the capability 'groups' (the "
            f"group's limit and its queue live in the backend); remove group, or use {LEASE_BACKENDS_HINT}",
            option="group",
            value=opts.group,
        )
    if opts.max_wait_ms is not None and opts.group is None:
        raise InvalidJobError(
            f"{_where(job, backend)}: max_wait_ms={opts.max_wait_ms} bounds the wait for a place in a group, and "
            "this job names no group; set group='NAME' or remove max_wait_ms",
            option="max_wait_ms",
            value=opts.max_wait_ms,
        )


def _stacklevel() -> int:
    """The ``stacklevel`` that points a warning at the first caller outside anarchon (the ``add()`` line)."""
    level, frame = 1, sys._getframe(1)
    while frame.f_back is not None and str(frame.f_globals.get("__name__", "")).startswith("anarchon"):
        level, frame = level + 1, frame.f_back
    return level


def _takeovers_as_attempts(job: str, backend: str, explicit: dict[str, Any]) -> dict[str, Any]:
    """``max_takeovers=N`` as the ``max_attempts=N + 1`` backends read; the old name still works, with a warning.

    ``max_attempts`` counts *runners* (take-overs after a runner died), and
    users read it as retries after the job raised, which ``retries`` is.
    """
    if "max_takeovers" not in explicit:
        if explicit.get("max_attempts") is not None:
            attempts = explicit["max_attempts"]
            warnings.warn(
                f"job {job!r}: max_attempts is deprecated, since it reads as retries and counts runners that "
                f"died; use max_takeovers={attempts - 1} (the same limit: take-overs after a runner died), "
                "and retries=N to re-run a job that raised",
                AnarchonDeprecationWarning,
                stacklevel=_stacklevel(),
            )
        return explicit
    if "max_attempts" in explicit:
        raise InvalidJobError(
            f"{_where(job, backend)}: max_attempts={explicit['max_attempts']!r} and max_takeovers="
            f"{explicit['max_takeovers']!r} set the same limit (max_attempts is its old name); set max_takeovers only",
            option="max_attempts",
            value=explicit["max_attempts"],
        )
    renamed = {k: v for k, v in explicit.items() if k != "max_takeovers"}
    if explicit["max_takeovers"] is not None:
        renamed["max_attempts"] = explicit["max_takeovers"] + 1
    return renamed
