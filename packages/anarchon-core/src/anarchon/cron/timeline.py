"""Where a zone's UTC offset changes, found lazily per UTC year and shared by all its schedules."""

from __future__ import annotations

import calendar
import re
import threading
import time
from bisect import bisect_right
from datetime import datetime
from zoneinfo import ZoneInfo

__all__ = ["FIXED_OFFSET_ZONES", "Timeline", "timeline", "zone"]

FIXED_OFFSET_ZONES = re.compile(
    r"(Etc/)?(UTC|UCT|Universal|Zulu|Greenwich|GMT([+-]?0)?)|Etc/GMT[+-]\d{1,2}",
)

# A zone's offset is sampled this often to find its changes; two changes within
# one step would go unseen. The closest two in the tz database are four days
# apart (Africa/Freetown, 1939).
_SAMPLE_STEP = 6 * 3_600
# Offsets are asked for no later than this instant: past it a zone's local
# time could fall outside Python's dates (year 10000). Slots end before it.
_LAST_INSTANT = calendar.timegm((9999, 12, 31, 0, 0, 0))


class Timeline:
    """The stretches of constant offset of one zone.

    zoneinfo answers "offset at instant t" but does not list its transitions;
    sampling each year every six hours and bisecting to the second finds them
    (about 3 ms per zone and year, once per process).
    """

    def __init__(self, zone: ZoneInfo) -> None:
        self._zone = zone
        self._years: dict[int, tuple[int, int, list[int]]] = {}

    def offset(self, instant: int) -> int:
        delta = datetime.fromtimestamp(min(instant, _LAST_INSTANT), self._zone).utcoffset()
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
        end = start + (366 if calendar.isleap(year) else 365) * 86_400  # timegm has no year 10000
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


_timelines: dict[str, Timeline] = {}
_timelines_lock = threading.Lock()


def timeline(zone: ZoneInfo) -> Timeline:
    """The process-wide timeline of ``zone``."""
    with _timelines_lock:
        found = _timelines.get(zone.key)
        if found is None:
            found = _timelines[zone.key] = Timeline(zone)
        return found


def zone(name: str) -> ZoneInfo:
    """The IANA zone ``name``, or a ValueError that says what to pass instead."""

    def invalid() -> ValueError:
        return ValueError(f"unknown timezone {name!r}: use an IANA name such as 'UTC' or 'Europe/Berlin'")

    if not isinstance(name, str) or not name or name == "localtime":
        raise invalid()
    try:
        return ZoneInfo(name)
    except (ValueError, KeyError, OSError) as exc:  # ZoneInfoNotFoundError is a KeyError
        raise invalid() from exc
