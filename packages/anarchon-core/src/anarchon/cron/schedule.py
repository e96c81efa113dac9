"""Slots of a schedule: the DST engine that maps matching wall times to instants.

Wall times come from :mod:`anarchon.cron.matcher` on a naive clock; they are
mapped to instants one stretch of constant UTC offset at a time. Two rules
decide the change days (:mod:`anarchon.cron.dst` has the policies): whether a
repeated wall time runs once, at its first occurrence, or at each; and
whether a wall time skipped by a spring-forward gap runs at the first instant
after the gap (several skipped ones run once) or not at all. Classic cron,
the default, runs a *wall-clock* job (its minute and hour fields do not start
with ``*``) once per wall time and moves skipped ones; any other job runs at
every instant whose local time it matches. The answers depend on the
expression, the zone, the policy and (for ``H``) the job name alone, never on
where a query started.
"""

from __future__ import annotations

import calendar
import functools
import time
import warnings
from datetime import datetime, timedelta

from .dst import DstPolicy, dst_rules
from .expression import HINT, CronNumberingWarning, parse_expression
from .fixed import fixed_matcher, is_fixed
from .matcher import LAST_WALL, Matcher, NoMatch, Periodic, matcher
from .spread import mentions_hash
from .timeline import FIXED_OFFSET_ZONES, Timeline, timeline, zone

__all__ = ["Schedule"]

_EPOCH_NAIVE = datetime(1970, 1, 1)
_MAX_SEGMENTS = 1_000
_LAST_AFTER = LAST_WALL + 2 * 86_400  # no slot is later than this, whatever the zone


class _Exhausted(ValueError):
    """No slot after the asked instant: the schedule ran past the end of anarchon's calendar (year 9999)."""


@functools.lru_cache(maxsize=4096)
def _parse(cron: str, name: str | None) -> tuple[Matcher, bool, str | None]:
    """The matcher, the wall_clock flag and a warning to give; cached, as every job's instances ask alike.

    ``name`` is None unless the expression may hold ``H``, so jobs that share
    an expression share one entry.
    """
    expression = parse_expression(cron, name)
    found = matcher(expression)
    try:
        found.next_wall(calendar.timegm((2000, 1, 1, 0, 0, 0)))  # 400 years: the whole Gregorian cycle
    except NoMatch:
        raise ValueError(
            f"cron expression {cron!r} is invalid: it never matches a date (such as the 30th of February); {HINT}"
        ) from None
    return found, expression.wall_clock, expression.warning


class Schedule:
    """A cron expression in a time zone, as the set of slots it names.

    The expression is read as classic cron reads it (:mod:`anarchon.cron`);
    ``name`` is the job's, which ``H`` fields hash (:mod:`anarchon.cron.spread`).
    With ``dst="cron"`` slots follow classic cron across DST changes: a
    ``wall_clock`` job (its minute and hour fields do not start with ``*``)
    runs a wall time once, at its first occurrence, and a wall time skipped by
    a spring-forward gap at the first instant after the gap (several skipped
    ones run once); any other job runs at every instant whose local time it
    matches (an hourly job runs 25 times on a fall-back day, 23 on a
    spring-forward day). The other policies (:mod:`anarchon.cron.dst`) apply
    one rule to every expression. Slots end with the year 9999, where
    Python's dates do.
    """

    __slots__ = (
        "_move",
        "_next_wall",
        "_offset",
        "_once",
        "_periodic",
        "_segment",
        "_timeline",
        "_zone",
        "cron",
        "dst",
        "fixed",
        "name",
        "timezone",
        "wall_clock",
    )

    cron: str
    timezone: str
    dst: DstPolicy
    name: str | None
    #: Cron's first-character rule for the expression, whatever the policy.
    wall_clock: bool
    #: An ``@every`` or ``@at`` schedule (:mod:`anarchon.cron.fixed`): real time, whatever the zone.
    fixed: bool

    def __init__(self, cron: str, timezone: str = "UTC", *, dst: DstPolicy = "cron", name: str | None = None) -> None:
        if not isinstance(cron, str):
            kind = type(cron).__name__
            raise ValueError(f"cron expression {cron!r} is invalid: it is a {kind}, not a string; {HINT}")
        if name is not None and not isinstance(name, str):
            raise ValueError(f"name={name!r} must be the job's name, a string")
        fixed = is_fixed(cron)
        if fixed:
            zone_info = zone(timezone)
            found, wall_clock, warning = fixed_matcher(cron, timezone), False, None
        else:
            found, wall_clock, warning = _parse(cron, name if name is not None and mentions_hash(cron) else None)
            zone_info = zone(timezone)
        if warning is not None:
            warnings.warn(warning, CronNumberingWarning, stacklevel=2)
        self._once, self._move = dst_rules(dst, wall_clock)
        self.cron = cron
        self.timezone = timezone
        self.dst = dst
        self.name = name
        self.wall_clock = wall_clock
        self._next_wall = found.next_wall
        self._periodic = found if isinstance(found, Periodic) else None
        self._zone = zone_info
        self._segment = (0, 0, 0, 0)
        self.fixed = fixed
        if fixed or FIXED_OFFSET_ZONES.fullmatch(timezone):
            self._offset: int | None = 0 if fixed else Timeline(zone_info).offset(0)
            self._timeline: Timeline | None = None
        else:
            self._offset = None
            self._timeline = timeline(zone_info)

    def __repr__(self) -> str:
        extra = "" if self.dst == "cron" else f", dst={self.dst!r}"
        extra += "" if self.name is None else f", name={self.name!r}"
        return f"Schedule({self.cron!r}, timezone={self.timezone!r}{extra})"

    def next_after(self, after_ms: int) -> int:
        """The first slot strictly after ``after_ms``; on the scheduler's hot path, so kept lean."""
        after = after_ms // 1000
        offset = self._offset
        if after >= _LAST_AFTER:
            raise self._exhausted(after_ms)
        try:
            if offset is not None:
                return (self._next_wall(after + offset) - offset) * 1000
            start, end, offset, _ = self._segment
            # Within the stretch holding ``after`` no repeat is dropped when
            # repeats run twice, and a moved slot is at ``end``, never before.
            if start <= after < end and not self._once:
                instant = self._next_wall(after + offset) - offset
                if instant < end:
                    return instant * 1000
        except NoMatch:
            raise self._exhausted(after_ms) from None
        return self._next_zoned(after) * 1000

    def next_or_none(self, after_ms: int) -> int | None:
        """The first slot strictly after ``after_ms``, or None when there is none (an ``@at`` that has passed)."""
        try:
            return self.next_after(after_ms)
        except _Exhausted:
            return None

    def slots(self, after_ms: int | None, count: int) -> list[int]:
        """The next ``count`` slots after ``after_ms`` (now by default); fewer if the year 9999 ends first."""
        if count < 0:
            raise ValueError(f"count must be 0 or more, not {count}")
        moment = time.time_ns() // 1_000_000 if after_ms is None else after_ms
        out: list[int] = []
        for _ in range(count):
            try:
                moment = self.next_after(moment)
            except _Exhausted:
                break
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
            try:
                slot = self._next_s(moment)
            except _Exhausted:
                break
            if slot > until:
                break
            if count == cap:
                newest = self._newest_at_or_before(until, slot)
                break
            count, newest, moment = count + 1, slot, slot
        return count, None if newest is None else newest * 1000

    def _next_s(self, after: int) -> int:
        return self.next_after(after * 1000) // 1000

    def _exhausted(self, after_ms: int) -> _Exhausted:
        return _Exhausted(
            f"cron expression {self.cron!r} in {self.timezone!r} has no slot after {after_ms} ms: "
            "slots end with the year 9999"
        )

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
        """The first slot after ``after``, walking the stretches of constant offset from the one holding it.

        The walk starts in the stretch holding ``after`` itself, not the
        instant after it: a query from the last second before a gap's end
        must still see the slot moved to that end, which that stretch decides.
        """
        timeline = self._timeline
        assert timeline is not None
        next_wall = self._next_wall
        once, move = self._once, self._move
        moment = after
        segment = self._segment
        if not segment[0] <= moment < segment[1]:
            segment = self._segment = timeline.segment(moment)
        for _ in range(_MAX_SEGMENTS):
            _, end, offset, end_offset = segment
            try:
                wall = next_wall(moment + offset)
                while wall - offset < end:
                    if not once or not self._repeated(wall, wall - offset):
                        return wall - offset
                    wall = next_wall(wall)
            except NoMatch:
                break
            if move and end_offset > offset and wall < end + end_offset:
                return end
            moment = end - 1
            segment = self._segment = timeline.segment(end)
        raise self._exhausted(after * 1000)

    def _repeated(self, wall: int, instant: int) -> bool:
        """Whether ``instant`` is the second occurrence of its wall time (fold=1 after a fall-back)."""
        first = (_EPOCH_NAIVE + timedelta(seconds=wall)).replace(tzinfo=self._zone)
        return round(first.timestamp()) < instant
