"""Schedules fixed in real time rather than on the wall clock: ``@every 90s`` and ``@at <ISO time>``.

``@every 90s`` (units ``s``, ``m``, ``h``, ``d``, ``w``, combinable as
``1h30m``) names the instants ``k * 90 s`` after 1970-01-01T00:00:00Z: a grid
fixed by the interval alone, so every instance derives the same slots
whenever it started (robfig/cron's ``@every`` counts from the process start
and would give each instance its own slots). An interval is real time, so
the time zone and DST policy do not move it; ``@every 1h`` runs on the hour
UTC, ``@every 90s`` at 00:00:00, 00:01:30, 00:03:00 UTC and so on.

``@at 2026-12-24T18:00:00+01:00`` names one instant; a time without an offset
is read in the schedule's time zone (the first of a repeated wall time). It has
no slot after that instant, so the job then stays idle.

Both are matchers on a clock with offset 0 (:mod:`anarchon.cron.schedule`
maps them without a timeline), so every path that reads a cron schedule reads
these alike; ``@every`` is a :class:`~anarchon.cron.matcher.Periodic`, whose
slots are counted arithmetically.
"""

from __future__ import annotations

import functools
import re
from datetime import datetime

from .matcher import LAST_WALL, Matcher, NoMatch, Periodic
from .timeline import zone

__all__ = ["Once", "fixed_matcher", "is_fixed"]

_UNITS = {"s": 1, "m": 60, "h": 3_600, "d": 86_400, "w": 604_800}
_DURATION = re.compile(r"(?:[0-9]+[smhdw])+")
_PART = re.compile(r"([0-9]+)([smhdw])")
#: The keyword, then what it takes after spaces or tabs, as cron separates fields.
_FIXED = re.compile(r"@(every|at)(?:[ \t]+(.*))?", re.IGNORECASE | re.DOTALL)
_EVERY_HINT = "write @every with a whole number of seconds or more, such as @every 90s, @every 15m or @every 1h30m"
_AT_HINT = "write @at with an ISO 8601 time, such as @at 2026-12-24T18:00:00+01:00 (without an offset: the job's zone)"


class Once(Matcher):
    """One instant (seconds since the epoch): the next match before it, none after."""

    __slots__ = ("instant",)

    def __init__(self, instant: int) -> None:
        self.instant = instant

    def next_wall(self, wall: int) -> int:
        if wall < self.instant:
            return self.instant
        raise NoMatch


def is_fixed(cron: str) -> bool:
    """Whether ``cron`` is an ``@every`` or ``@at`` schedule rather than a cron expression."""
    return _FIXED.fullmatch(cron.strip()) is not None


@functools.lru_cache(maxsize=4096)
def fixed_matcher(cron: str, timezone: str) -> Matcher:
    """The matcher of an ``@every``/``@at`` schedule; ``ValueError`` naming the text and how to write it."""
    found = _FIXED.fullmatch(cron.strip())
    assert found is not None, "is_fixed() decides which expressions come here"
    keyword, rest = found.group(1).lower(), (found.group(2) or "").strip()
    if keyword == "every":
        return Periodic(_seconds(cron, rest), 0)
    return Once(_instant(cron, rest, timezone))


def _seconds(cron: str, text: str) -> int:
    if not _DURATION.fullmatch(text.lower()):
        raise ValueError(f"schedule {cron!r} is invalid: {text!r} is not a duration; {_EVERY_HINT}")
    total = sum(int(n) * _UNITS[unit] for n, unit in _PART.findall(text.lower()))
    if total < 1:
        raise ValueError(f"schedule {cron!r} is invalid: the interval is 0; {_EVERY_HINT}")
    if total >= LAST_WALL:
        raise ValueError(f"schedule {cron!r} is invalid: the interval outlasts the calendar; {_EVERY_HINT}")
    return total


def _instant(cron: str, text: str, timezone: str) -> int:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"schedule {cron!r} is invalid: {text!r} is not an ISO 8601 time; {_AT_HINT}") from None
    if moment.microsecond:
        raise ValueError(f"schedule {cron!r} is invalid: slots are whole seconds; drop the fraction of {text!r}")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=zone(timezone))
    instant = int(moment.timestamp())
    if instant < 0 or instant >= LAST_WALL:
        raise ValueError(f"schedule {cron!r} is invalid: {text!r} is outside 1970 to 9999; {_AT_HINT}")
    return instant
