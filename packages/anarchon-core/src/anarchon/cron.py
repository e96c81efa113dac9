"""Cron schedules turned into slots: UTC epoch milliseconds that every instance derives alike.

A slot must not depend on when an instance started, or two instances would
claim different slots for the same run. So a schedule is defined as a set of
instants fixed by the expression and the zone alone, and every query asks for
the first member of that set after some instant:

1. croniter parses the expression (and validates it); the wall-clock times it
   matches are computed on a naive clock (seconds since 1970-01-01 00:00 of
   the local calendar, no zone), where days have no gaps and no repeats.
2. Those wall times are mapped to instants one stretch of constant UTC offset
   at a time, with the DST rules of classic cron (SPEC section 4).

Croniter's own time-zone handling is not used for step 2: it answers from the
start time it is given (on a fall-back day ``30 2 * * *`` yields both 02:30,
and which ones a caller sees depends on where it started).
"""

from __future__ import annotations

import calendar
import functools
import re
import threading
import time
from bisect import bisect_left, bisect_right
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from croniter import CroniterError, croniter

__all__ = ["Schedule"]

_HINT = "use 5 fields (minute hour day month weekday), 6 with seconds first, or @hourly/@daily/@weekly/@monthly/@yearly"

_ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

# croniter's H (hashed) and R (random) fields: R differs per process, H needs a
# hash id; either way two instances could disagree on the slots.
_HASHED_FIELD = re.compile(r"[hr](\(\d+-\d+\))?(/\d+)?", re.IGNORECASE | re.ASCII)
_FIELD = re.compile(r"\S+", re.ASCII)

_FIXED_OFFSET_ZONES = re.compile(
    r"(Etc/)?(UTC|UCT|Universal|Zulu|Greenwich|GMT([+-]?0)?)|Etc/GMT[+-]\d{1,2}",
)

_DAY = 86_400
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_EPOCH_NAIVE = datetime(1970, 1, 1)
_MAX_YEARS = 60
# A zone's offset is sampled this often to find its changes; two changes within
# one step would go unseen. The closest two in the tz database are four days
# apart (Africa/Freetown, 1939).
_SAMPLE_STEP = 6 * 3_600
_MAX_SEGMENTS = 1_000


class _NoMatch(Exception):
    """The expression names no wall time within ``_MAX_YEARS``."""


class _Matcher:
    """Next matching wall time on the naive local clock, in whole seconds."""

    __slots__ = ()

    def next_wall(self, wall: int) -> int:
        raise NotImplementedError


class _Periodic(_Matcher):
    """Time-of-day sets that form one arithmetic progression dividing the day, every day.

    ``* * * * * *``, ``*/5 * * * *`` and ``0 */2 * * *`` are all of this kind;
    their next match is arithmetic, which keeps the every-second jobs cheap.
    """

    __slots__ = ("period", "phase")

    def __init__(self, period: int, phase: int) -> None:
        self.period = period
        self.phase = phase

    def next_wall(self, wall: int) -> int:
        return wall + self.period - (wall - self.phase) % self.period


class _Table(_Matcher):
    """Plain numeric fields, matched from croniter's expansion without building a croniter per query.

    croniter's ``get_next`` costs 13-35 µs; this walks days and then bisects
    hour, minute and second, and is proven equal to croniter by the tests.
    """

    __slots__ = ("_any_day", "_dom", "_dow_delta", "_every_second", "_hours", "_minutes", "_months", "_seconds")

    def __init__(
        self,
        seconds: list[int] | None,
        minutes: list[int],
        hours: list[int],
        dom: list[int] | None,
        months: list[int] | None,
        dow: list[int] | None,
    ) -> None:
        self._every_second = seconds is not None
        self._seconds = tuple(seconds) if seconds is not None else (0,)
        self._minutes = tuple(minutes)
        self._hours = tuple(hours)
        self._dom = tuple(dom) if dom is not None else None
        self._months = frozenset(months) if months is not None else None
        self._dow_delta = tuple(min((d - w) % 7 for d in dow) for w in range(7)) if dow is not None else None
        self._any_day = dom is None and dow is None and months is None

    def next_wall(self, wall: int) -> int:
        start = wall + 1 if self._every_second else (wall // 60 + 1) * 60
        day, second = divmod(start, _DAY)
        while True:
            if not self._any_day:
                found = self._next_day(day)
                if found != day:
                    day, second = found, 0
            tod = self._next_time_of_day(second)
            if tod is not None:
                return day * _DAY + tod
            day, second = day + 1, 0

    def _next_day(self, day: int) -> int:
        for _ in range(12 * _MAX_YEARS):
            ordinal = day + _EPOCH_ORDINAL
            today = date.fromordinal(ordinal)
            month_days = calendar.monthrange(today.year, today.month)[1]
            if self._months is None or today.month in self._months:
                best: int | None = None
                if self._dom is not None:
                    i = bisect_left(self._dom, today.day)
                    if i < len(self._dom) and self._dom[i] <= month_days:
                        best = self._dom[i] - today.day
                if self._dow_delta is not None:
                    delta = self._dow_delta[ordinal % 7]
                    if today.day + delta <= month_days and (best is None or delta < best):
                        best = delta
                if self._dom is None and self._dow_delta is None:
                    best = 0
                if best is not None:
                    return day + best
            day += month_days - today.day + 1
        raise _NoMatch

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


class _Croniter(_Matcher):
    """Fallback for L, W and # fields, whose calendar rules only croniter knows.

    One naive croniter is kept and shared by every schedule with the same
    expression; ``get_next`` moves its cursor, hence the lock.
    """

    __slots__ = ("_iter", "_lock")

    def __init__(self, parsed: croniter) -> None:
        self._iter = parsed
        self._lock = threading.Lock()

    def next_wall(self, wall: int) -> int:
        with self._lock:
            try:
                return int(self._iter.get_next(float, start_time=float(wall)))
            except CroniterError as exc:
                raise _NoMatch from exc


@functools.lru_cache(maxsize=4096)
def _parse(cron: str) -> tuple[_Matcher, bool]:
    """The matcher and the wall_clock flag; cached because croniter takes ~140 µs to parse."""

    def invalid(reason: str) -> ValueError:
        return ValueError(f"cron expression {cron!r} is invalid: {reason}; {_HINT}")

    text = cron.strip()
    if text.startswith("@"):
        alias = text.lower()
        if alias not in _ALIASES:
            raise invalid(f"{text} is not a supported alias")
        text = _ALIASES[alias]
    fields = _FIELD.findall(text)
    if not fields:
        raise invalid("it is empty")
    if len(fields) == 7:
        raise invalid("it has 7 fields; a year field is not supported")
    if len(fields) not in (5, 6):
        raise invalid(f"it has {len(fields)} field{'s' if len(fields) != 1 else ''}")
    if any(_HASHED_FIELD.fullmatch(field) for field in fields):
        raise invalid("H and R (hashed and random) fields are not supported, every instance must derive the same slots")
    seconds_first = len(fields) == 6
    expression = " ".join(fields)
    try:
        parsed = croniter(expression, 0.0, second_at_beginning=seconds_first)
    except CroniterError as exc:
        raise invalid(str(exc)) from exc
    minute, hour = (fields[1], fields[2]) if seconds_first else (fields[0], fields[1])
    wall_clock = not any(c in minute or c in hour for c in "*/")
    matcher = _matcher(parsed, seconds_first)
    try:
        matcher.next_wall(calendar.timegm((2000, 1, 1, 0, 0, 0)))
    except _NoMatch:
        raise invalid("it never matches a date (such as the 30th of February)") from None
    return matcher, wall_clock


def _matcher(parsed: croniter, seconds_first: bool) -> _Matcher:
    expanded: list[list[int | str]] = parsed.expanded
    nearest_weekday = getattr(parsed, "nearest_weekday", None)  # W fields; croniter before 6 has none
    if parsed.nth_weekday_of_month or nearest_weekday or any("l" in values for values in expanded):
        return _Croniter(parsed)

    ranges = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 6), (0, 59))

    def values(index: int) -> list[int] | None:
        field = expanded[index]
        if field == ["*"]:
            return None
        return sorted(int(v) for v in field)

    def full(index: int) -> list[int]:
        field = values(index)
        low, high = ranges[index]
        return field if field is not None else list(range(low, high + 1))

    seconds = full(5) if seconds_first else None
    minutes, hours = full(0), full(1)
    dom, months, dow = values(2), values(3), values(4)
    if dom is None and months is None and dow is None:
        period = _period(seconds or [0], minutes, hours)
        if period is not None:
            return _Periodic(period, hours[0] * 3600 + minutes[0] * 60 + (seconds or [0])[0])
    return _Table(seconds, minutes, hours, dom, months, dow)


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


class _Timeline:
    """Where one zone's UTC offset changes, found lazily per UTC year and shared by all its schedules.

    zoneinfo answers "offset at instant t" but does not list its transitions;
    sampling each year every six hours and bisecting to the second finds them
    (about 3 ms per zone and year, once per process).
    """

    def __init__(self, zone: ZoneInfo) -> None:
        self._zone = zone
        self._years: dict[int, tuple[int, int, list[int]]] = {}

    def offset(self, instant: int) -> int:
        delta = datetime.fromtimestamp(instant, self._zone).utcoffset()
        assert delta is not None
        return int(delta.total_seconds())

    def segment(self, instant: int) -> tuple[int, int, int, int]:
        """(start, end, offset, offset at end) of the stretch of constant offset holding ``instant``.

        Stretches also end at UTC new year, where the offset may well not change.
        """
        year = time.gmtime(instant).tm_year
        bounds = self._years.get(year)
        if bounds is None:
            bounds = self._years[year] = self._scan(year)
        year_start, year_end, changes = bounds
        i = bisect_right(changes, instant)
        start = changes[i - 1] if i else year_start
        end = changes[i] if i < len(changes) else year_end
        return start, end, self.offset(instant), self.offset(end)

    def _scan(self, year: int) -> tuple[int, int, list[int]]:
        start = calendar.timegm((year, 1, 1, 0, 0, 0))
        end = calendar.timegm((year + 1, 1, 1, 0, 0, 0))
        changes: list[int] = []
        before, offset = start, self.offset(start)
        while before < end:
            after = min(before + _SAMPLE_STEP, end)
            next_offset = self.offset(after)
            if next_offset != offset:
                low, high = before, after
                while high - low > 1:
                    middle = (low + high) // 2
                    if self.offset(middle) == offset:
                        low = middle
                    else:
                        high = middle
                changes.append(high)
            before, offset = after, next_offset
        return start, end, changes


_timelines: dict[str, _Timeline] = {}
_timelines_lock = threading.Lock()


def _timeline(zone: ZoneInfo) -> _Timeline:
    with _timelines_lock:
        found = _timelines.get(zone.key)
        if found is None:
            found = _timelines[zone.key] = _Timeline(zone)
        return found


def _zone(name: str) -> ZoneInfo:
    def invalid() -> ValueError:
        return ValueError(f"unknown timezone {name!r}: use an IANA name such as 'UTC' or 'Europe/Berlin'")

    if not isinstance(name, str) or not name or name == "localtime":
        raise invalid()
    try:
        return ZoneInfo(name)
    except (ValueError, KeyError, OSError) as exc:  # ZoneInfoNotFoundError is a KeyError
        raise invalid() from exc


class Schedule:
    """A cron expression in a time zone, as the set of slots it names.

    Slots follow classic cron across DST changes (SPEC section 4): when the
    hour and minute fields are fixed (``wall_clock``) a wall time runs once, at
    its first occurrence, and a wall time skipped by a spring-forward gap runs
    at the first instant after the gap (several skipped ones run once); any
    other expression runs at every instant whose local time it matches (an
    hourly job runs 25 times on a fall-back day, 23 on a spring-forward day).
    """

    __slots__ = (
        "_next_wall",
        "_offset",
        "_periodic",
        "_segment",
        "_timeline",
        "_zone",
        "cron",
        "timezone",
        "wall_clock",
    )

    cron: str
    timezone: str
    wall_clock: bool

    def __init__(self, cron: str, timezone: str = "UTC") -> None:
        if not isinstance(cron, str):
            raise ValueError(
                f"cron expression {cron!r} is invalid: it is a {type(cron).__name__}, not a string; {_HINT}"
            )
        matcher, wall_clock = _parse(cron)
        zone = _zone(timezone)
        self.cron = cron
        self.timezone = timezone
        self.wall_clock = wall_clock
        self._next_wall = matcher.next_wall
        self._periodic = matcher if isinstance(matcher, _Periodic) else None
        self._zone = zone
        self._segment = (0, 0, 0, 0)
        if _FIXED_OFFSET_ZONES.fullmatch(timezone):
            self._offset: int | None = _Timeline(zone).offset(0)
            self._timeline: _Timeline | None = None
        else:
            self._offset = None
            self._timeline = _timeline(zone)

    def __repr__(self) -> str:
        return f"Schedule({self.cron!r}, timezone={self.timezone!r})"

    def next_after(self, after_ms: int) -> int:
        """The first slot strictly after ``after_ms``; on the scheduler's hot path, so kept lean."""
        after = after_ms // 1000
        offset = self._offset
        try:
            if offset is not None:
                return (self._next_wall(after + offset) - offset) * 1000
            start, end, offset, _ = self._segment
            if start <= after + 1 < end and not self.wall_clock:
                instant = self._next_wall(after + offset) - offset
                if instant < end:
                    return instant * 1000
        except _NoMatch:
            raise self._exhausted(after_ms) from None
        return self._next_zoned(after) * 1000

    def slots(self, after_ms: int | None, count: int) -> list[int]:
        if count < 0:
            raise ValueError(f"count must be 0 or more, not {count}")
        moment = time.time_ns() // 1_000_000 if after_ms is None else after_ms
        out: list[int] = []
        for _ in range(count):
            moment = self.next_after(moment)
            out.append(moment)
        return out

    def count_between(self, after_ms: int, until_ms: int, cap: int = 100_000) -> tuple[int, int | None]:
        """How many slots were missed in ``(after_ms, until_ms]`` (at most ``cap``) and the newest of them.

        Catch-up runs the newest missed slot, so it is found even when the
        count stops at ``cap``.
        """
        if cap < 0:
            raise ValueError(f"cap must be 0 or more, not {cap}")
        after, until = after_ms // 1000, until_ms // 1000
        if until <= after:
            return 0, None
        if self._periodic is not None and self._offset is not None:
            period = self._periodic.period
            phase = (self._periodic.phase - self._offset) % period
            last_index = (until - phase) // period
            total = last_index - (after - phase) // period
            return min(total, cap), (phase + last_index * period) * 1000 if total else None
        count, newest, moment = 0, None, after
        while True:
            slot = self._next_s(moment)
            if slot > until:
                break
            if count == cap:
                newest = self._newest_at_or_before(until, slot)
                break
            count, newest, moment = count + 1, slot, slot
        return count, None if newest is None else newest * 1000

    def _next_s(self, after: int) -> int:
        return self.next_after(after * 1000) // 1000

    def _exhausted(self, after_ms: int) -> ValueError:
        return ValueError(f"cron expression {self.cron!r} in {self.timezone!r} has no slot after {after_ms} ms")

    def _newest_at_or_before(self, until: int, known: int) -> int:
        """The last slot <= ``until``, given one: gallop back from ``until``, then bisect."""
        high, low, step = until, known - 1, 1
        while until - step > low:
            if self._next_s(until - step) <= until:
                low = until - step
                break
            high = until - step
            step *= 2
        while high - low > 1:
            middle = (low + high) // 2
            if self._next_s(middle) <= until:
                low = middle
            else:
                high = middle
        return self._next_s(low)

    def _next_zoned(self, after: int) -> int:
        timeline = self._timeline
        assert timeline is not None
        next_wall = self._next_wall
        moment = after
        for _ in range(_MAX_SEGMENTS):
            segment = self._segment
            if not segment[0] <= moment + 1 < segment[1]:
                segment = self._segment = timeline.segment(moment + 1)
            _, end, offset, end_offset = segment
            try:
                wall = next_wall(moment + offset)
                while wall - offset < end:
                    if not self.wall_clock or not self._repeated(wall, wall - offset):
                        return wall - offset
                    wall = next_wall(wall)
            except _NoMatch:
                break
            if self.wall_clock and end_offset > offset and wall < end + end_offset:
                return end
            moment = end - 1
        raise self._exhausted(after * 1000)

    def _repeated(self, wall: int, instant: int) -> bool:
        """Whether ``instant`` is the second occurrence of its wall time (fold=1 after a fall-back)."""
        first = (_EPOCH_NAIVE + timedelta(seconds=wall)).replace(tzinfo=self._zone)
        return round(first.timestamp()) < instant
