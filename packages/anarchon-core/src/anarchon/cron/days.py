"""Which calendar days a schedule runs on: day-of-month, month and day-of-week together.

Cron's day rule (see :mod:`anarchon.cron.expression`) decides between AND
and OR by the fields' first character. The calendar extensions (``L``,
``L-n``, ``LW``, ``nW``, ``n#k``, ``nL``) are one more way for their field to
match, so beside a restricted other field they are ORed like any value:
``0 0 13 * 1#2`` runs on the 13th and on the second Monday; ``0 0 15W * 1``
on the weekday nearest the 15th and on every Monday.

Days are counted from 1970-01-01 (day 0) on the naive local calendar. The
Gregorian calendar repeats every 400 years, so a search of 400 years and a
month finds a match if there is any; anarchon's calendar ends with
:data:`LAST_DAY` (late December 9999), where Python's dates end.
"""

from __future__ import annotations

import calendar
from bisect import bisect_left
from datetime import date

from .fields import Field

__all__ = ["EPOCH_ORDINAL", "LAST_DAY", "DayRule", "NoMatch"]

EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
# Slots stop two days before Python's dates do, so that no zone offset (at
# most 26 hours) carries a slot's instant or wall time past 9999-12-31.
LAST_DAY = date(9999, 12, 29).toordinal() - EPOCH_ORDINAL
_SEARCH_MONTHS = 400 * 12 + 1
_CACHE_MONTHS = 512


class NoMatch(Exception):
    """No matching wall time before the end of anarchon's calendar."""


def _nearest_weekday(day: int, first_weekday: int, month_days: int) -> int | None:
    """Quartz's ``nW``: the Monday-to-Friday nearest the nth, never leaving the month."""
    if day > month_days:
        return None
    weekday = (first_weekday + day - 1) % 7  # Python's numbering: Monday 0 ... Sunday 6
    if weekday == 5:
        return day - 1 if day > 1 else day + 2
    if weekday == 6:
        return day + 1 if day < month_days else day - 2
    return day


class DayRule:
    """The matching days of each month, computed once per month and kept for the next query."""

    __slots__ = ("_cache", "_day", "_months", "_weekday", "both", "every_day")

    def __init__(self, day: Field, month: Field, weekday: Field, both: bool) -> None:
        self._day = day
        self._months = month.values
        self._weekday = weekday
        self.both = both
        every_dom = day.values >= frozenset(range(1, 32))
        every_dow = weekday.values >= frozenset(range(7))
        every_month = month.values >= frozenset(range(1, 13))
        self.every_day = every_month and ((every_dom and every_dow) if both else (every_dom or every_dow))
        self._cache: dict[tuple[int, int], tuple[int, ...]] = {}

    def month_days(self, year: int, month: int) -> tuple[int, ...]:
        """The days of ``month`` that match, in order (empty if the month itself is not named)."""
        key = (year, month)
        found = self._cache.get(key)
        if found is None:
            if len(self._cache) >= _CACHE_MONTHS:
                self._cache.clear()
            found = self._cache[key] = self._compute(year, month) if month in self._months else ()
        return found

    def _compute(self, year: int, month: int) -> tuple[int, ...]:
        first_weekday, month_days = calendar.monthrange(year, month)
        day, weekday = self._day, self._weekday
        doms = {d for d in day.values if d <= month_days}
        doms.update(month_days - back for back in day.last if month_days - back >= 1)
        doms.update(n for d in day.nearest if (n := _nearest_weekday(d, first_weekday, month_days)) is not None)
        if day.last_weekday:
            last = month_days
            while (first_weekday + last - 1) % 7 >= 5:
                last -= 1
            doms.add(last)
        out = []
        for d in range(1, month_days + 1):
            cron_weekday = (first_weekday + d) % 7  # cron's numbering: Sunday 0 ... Saturday 6
            dow = (
                cron_weekday in weekday.values
                or (cron_weekday, (d - 1) // 7 + 1) in weekday.nth
                or (cron_weekday in weekday.last_of and d + 7 > month_days)
            )
            if (d in doms and dow) if self.both else (d in doms or dow):
                out.append(d)
        return tuple(out)

    def next_day(self, day: int) -> int:
        """The first matching day on or after ``day``; raise :class:`NoMatch` past :data:`LAST_DAY`."""
        if day > LAST_DAY:
            raise NoMatch
        if self.every_day:
            return day
        today = date.fromordinal(day + EPOCH_ORDINAL)
        year, month, first = today.year, today.month, today.day
        for _ in range(_SEARCH_MONTHS):
            days = self.month_days(year, month)
            i = bisect_left(days, first)
            if i < len(days):
                found = date(year, month, days[i]).toordinal() - EPOCH_ORDINAL
                if found > LAST_DAY:
                    raise NoMatch
                return found
            year, month, first = (year + 1, 1, 1) if month == 12 else (year, month + 1, 1)
            if year > 9999:
                raise NoMatch
        raise NoMatch
