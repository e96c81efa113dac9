"""The next matching wall time of an expression, on the naive local clock, in whole seconds.

The naive clock counts seconds since 1970-01-01 00:00 of the local calendar,
with no zone: days have no gaps and no repeats. :mod:`anarchon.cron.schedule`
maps its answers to instants.
"""

from __future__ import annotations

from bisect import bisect_left

from .days import LAST_DAY, DayRule, NoMatch
from .expression import Expression

__all__ = ["LAST_WALL", "Matcher", "NoMatch", "Periodic", "Table", "matcher"]

_DAY = 86_400
LAST_WALL = (LAST_DAY + 1) * _DAY  # the first wall time past anarchon's calendar


class Matcher:
    """Next matching wall time strictly after ``wall``; :class:`NoMatch` past the calendar's end."""

    __slots__ = ()

    def next_wall(self, wall: int) -> int:
        raise NotImplementedError


class Periodic(Matcher):
    """Time-of-day sets that form one arithmetic progression dividing the day, every day.

    ``* * * * * *``, ``*/5 * * * *`` and ``0 */2 * * *`` are all of this kind;
    their next match is arithmetic, which keeps the every-second jobs cheap.
    """

    __slots__ = ("period", "phase")

    def __init__(self, period: int, phase: int) -> None:
        self.period = period
        self.phase = phase

    def next_wall(self, wall: int) -> int:
        found = wall + self.period - (wall - self.phase) % self.period
        if found >= LAST_WALL:
            raise NoMatch
        return found


class Table(Matcher):
    """Any expression: the day rule picks the day, then hour, minute and second are bisected."""

    __slots__ = ("_days", "_every_second", "_hours", "_minutes", "_seconds")

    def __init__(self, seconds: list[int] | None, minutes: list[int], hours: list[int], days: DayRule) -> None:
        self._every_second = seconds is not None
        self._seconds = tuple(seconds) if seconds is not None else (0,)
        self._minutes = tuple(minutes)
        self._hours = tuple(hours)
        self._days = days

    def next_wall(self, wall: int) -> int:
        start = wall + 1 if self._every_second else (wall // 60 + 1) * 60
        day, second = divmod(start, _DAY)
        while True:
            found = self._days.next_day(day)
            if found != day:
                day, second = found, 0
            tod = self._next_time_of_day(second)
            if tod is not None:
                return day * _DAY + tod
            day, second = day + 1, 0

    def _next_time_of_day(self, second: int) -> int | None:
        hours, minutes, seconds = self._hours, self._minutes, self._seconds
        h0, rest = divmod(second, 3600)
        m0, s0 = divmod(rest, 60)
        i = bisect_left(hours, h0)
        if i < len(hours) and hours[i] == h0:
            j = bisect_left(minutes, m0)
            if j < len(minutes) and minutes[j] == m0:
                k = bisect_left(seconds, s0)
                if k < len(seconds):
                    return h0 * 3600 + m0 * 60 + seconds[k]
                j += 1
            if j < len(minutes):
                return h0 * 3600 + minutes[j] * 60 + seconds[0]
            i += 1
        if i < len(hours):
            return hours[i] * 3600 + minutes[0] * 60 + seconds[0]
        return None


def matcher(expression: Expression) -> Matcher:
    """The cheapest matcher for ``expression``: arithmetic when it can be, else the table."""
    seconds = sorted(expression.seconds.values) if expression.seconds is not None else None
    minutes, hours = sorted(expression.minute.values), sorted(expression.hour.values)
    days = DayRule(expression.day, expression.month, expression.weekday, expression.days_and)
    if days.every_day:
        period = _period(seconds or [0], minutes, hours)
        if period is not None:
            return Periodic(period, hours[0] * 3600 + minutes[0] * 60 + (seconds or [0])[0])
    return Table(seconds, minutes, hours, days)


def _period(seconds: list[int], minutes: list[int], hours: list[int]) -> int | None:
    """The step if the day's matching seconds form one progression, else None.

    The finest field with more than one value must step evenly through its whole
    cycle and every coarser field must be complete, e.g. ``*/15 * * * * *``
    (15 s) or ``0 */20 * * * *`` (1200 s), but not ``*/7 * * * * *``.
    """

    def step(field: list[int], size: int) -> int | None:
        if size % len(field):
            return None
        gap = size // len(field)
        if field[0] >= gap or any(v != field[0] + i * gap for i, v in enumerate(field)):
            return None
        return gap

    levels = ((seconds, 60, 1), (minutes, 60, 60), (hours, 24, 3600))
    for index, (field, size, unit) in enumerate(levels):
        if len(field) > 1 or index == len(levels) - 1:
            gap = step(field, size)
            if gap is None or any(len(coarser) != n for coarser, n, _ in levels[index + 1 :]):
                return None
            return gap * unit
    return None  # pragma: no cover - the loop always returns at the hours level
