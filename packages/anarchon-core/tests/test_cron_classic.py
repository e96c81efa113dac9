"""Reproducers of real classic-cron behaviour (issue 15), and the extensions anarchon accepts or refuses.

Every reproducer failed before anarchon read expressions itself: croniter's
expansion widened ``a-a`` to the whole field, ORed the day fields whenever its
expansion was not full, and the DST rule looked for ``*`` or ``/`` anywhere.
Cases marked "control" passed before too: they pin the other side of a rule.
The expected answers come from the calendar (a brute force over dates with
:mod:`datetime`), not from any cron parser.
"""

from __future__ import annotations

import calendar
import warnings
from collections.abc import Callable
from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from anarchon.cron import CronNumberingWarning, Schedule
from anarchon.job import Job

UTC = timezone.utc


def ms(*args: int, zone: str = "UTC") -> int:
    return int(datetime(*args, tzinfo=ZoneInfo(zone)).timestamp()) * 1000


def between(schedule: Schedule, start_ms: int, end_ms: int) -> list[int]:
    """Slots in (start_ms, end_ms]."""
    out, moment = [], start_ms
    while (moment := schedule.next_after(moment)) <= end_ms:
        out.append(moment)
    return out


def local_day(zone: str, day: date) -> tuple[int, int]:
    """The local calendar day as the window (start - 1 ms, end - 1 ms]."""
    nxt = day + timedelta(days=1)
    return ms(day.year, day.month, day.day, zone=zone) - 1, ms(nxt.year, nxt.month, nxt.day, zone=zone) - 1


def days_of(year: int, keep: Callable[[date], bool]) -> list[date]:
    first = date(year, 1, 1)
    return [d for d in (first + timedelta(n) for n in range(366)) if d.year == year and keep(d)]


def run_days(expr: str, year: int) -> list[date]:
    """The UTC dates a once-a-day expression runs on in ``year``."""
    s = Schedule(expr)
    return [
        datetime.fromtimestamp(t / 1000, UTC).date() for t in between(s, ms(year, 1, 1) - 1, ms(year + 1, 1, 1) - 1)
    ]


def last_day(d: date) -> int:
    return calendar.monthrange(d.year, d.month)[1]


# ---------------------------------------------------------------- an equal range is one value


@pytest.mark.parametrize(
    ("expr", "after", "expected"),
    [
        ("59-59 1 * * *", (2026, 6, 1), [(2026, 6, 1, 1, 59), (2026, 6, 2, 1, 59), (2026, 6, 3, 1, 59)]),
        ("0 0 1 JAN-JAN *", (2026, 6, 1), [(2027, 1, 1), (2028, 1, 1), (2029, 1, 1)]),
        ("0 9 * * MON-MON", (2026, 6, 2), [(2026, 6, 8, 9), (2026, 6, 15, 9), (2026, 6, 22, 9)]),
        ("0 9 * * 7-SUN", (2026, 6, 1), [(2026, 6, 7, 9), (2026, 6, 14, 9), (2026, 6, 21, 9)]),
        ("0 23-23/2 * * *", (2026, 6, 1), [(2026, 6, 1, 23), (2026, 6, 2, 23), (2026, 6, 3, 23)]),
        ("0 0 12 * * 5-5", (2026, 6, 1), [(2026, 6, 5, 12), (2026, 6, 12, 12), (2026, 6, 19, 12)]),
        # cronsim reads a-a/n as a/n (the 2nd, 7th, 12th ...); cron's loop stops at the range's end
        ("0 0 2-2/5 * *", (2026, 6, 1), [(2026, 6, 2), (2026, 7, 2), (2026, 8, 2)]),
        (
            "30 30 12 1-1 * *",
            (2026, 6, 1),
            [(2026, 6, 1, 12, 30, 30), (2026, 7, 1, 12, 30, 30), (2026, 8, 1, 12, 30, 30)],
        ),
    ],
)
def test_an_equal_range_is_one_value(expr: str, after: tuple[int, ...], expected: list[tuple[int, ...]]) -> None:
    assert Schedule(expr).slots(ms(*after), len(expected)) == [ms(*e) for e in expected]


def test_equal_range_counts_one_missed_slot_a_day() -> None:
    """Catch-up counts go through the same slot math: one a day, not the 60 croniter's expansion gave."""
    s = Schedule("59-59 1 * * *")
    assert s.count_between(ms(2026, 6, 1), ms(2026, 6, 4)) == (3, ms(2026, 6, 3, 1, 59))
    assert s.count_between(ms(2026, 6, 1, 1, 59), ms(2026, 6, 2, 1, 58)) == (0, None)


# ---------------------------------------------------------------- the day rule: * first means AND


@pytest.mark.parametrize(
    ("expr", "keep"),
    [
        ("0 0 */2 * 1", lambda d: d.day % 2 == 1 and d.weekday() == 0),  # odd-numbered Mondays
        ("0 0 1 * */1", lambda d: d.day == 1),  # the 1st (*/1 starts with *)
        ("0 0 *,15 * 1", lambda d: d.weekday() == 0),  # "*,15" starts with *: AND with every day
        ("0 0 1,15 * 1", lambda d: d.day in (1, 15) or d.weekday() == 0),  # control; both restricted: OR
        ("0 0 1-31 * 1", lambda d: True),  # control; 1-31 is restricted by its first character: OR
        ("0 0 * * 1#2", lambda d: d.weekday() == 0 and 8 <= d.day <= 14),  # control; second Mondays
        ("0 0 13 * 1#2", lambda d: d.day == 13 or (d.weekday() == 0 and 8 <= d.day <= 14)),
        ("0 0 15 * 1#1", lambda d: d.day == 15 or (d.weekday() == 0 and d.day <= 7)),
        ("0 0 15W * 1", lambda d: d.weekday() == 0 or d == nearest_weekday(d.replace(day=15))),
        ("0 0 L * 5", lambda d: d.day == last_day(d) or d.weekday() == 4),  # control
        ("0 0 */10 * 5L", lambda d: d.day in (1, 11, 21, 31) and d.weekday() == 4 and d.day + 7 > last_day(d)),
    ],
)
def test_day_fields_are_anded_when_either_starts_with_a_star(expr: str, keep: Callable[[date], bool]) -> None:
    for year in (2026, 2028):
        assert run_days(expr, year) == days_of(year, keep), expr


def nearest_weekday(d: date) -> date:
    if d.weekday() == 5:
        return d - timedelta(1) if d.day > 1 else d + timedelta(2)
    if d.weekday() == 6:
        return d + timedelta(1) if d.day < last_day(d) else d - timedelta(2)
    return d


# ---------------------------------------------------------------- DST: the first-character rule


def local(t: int, zone: str) -> str:
    return datetime.fromtimestamp(t / 1000, ZoneInfo(zone)).strftime("%H:%M%z")


@pytest.mark.parametrize(
    ("expr", "zone", "day", "expected"),
    [
        # fall back: 02:00-02:59 happens twice; a wall-clock job runs each wall time once
        ("0-59/30 2 * * *", "Europe/Berlin", date(2026, 10, 25), ["02:00+0200", "02:30+0200"]),
        # spring forward: 02:00-02:59 never happens; the skipped times run once, when the gap ends
        ("0-59/30 2 * * *", "Europe/Berlin", date(2026, 3, 29), ["03:00+0200"]),
        ("30 2 * * *", "America/New_York", date(2026, 3, 8), ["03:00-0400"]),  # control
        ("0 */30 2 * * *", "Europe/Berlin", date(2026, 3, 29), []),  # control; minute starts with *: real time
    ],
)
def test_wall_clock_unless_minute_or_hour_starts_with_a_star(
    expr: str, zone: str, day: date, expected: list[str]
) -> None:
    assert [local(t, zone) for t in between(Schedule(expr, zone), *local_day(zone, day))] == expected


@pytest.mark.parametrize("day", [date(2026, 11, 1), date(2026, 3, 8)])  # the spring day is a control
def test_odd_hours_in_new_york_run_once_each_on_both_change_days(day: date) -> None:
    zone = "America/New_York"
    got = [local(t, zone)[:5] for t in between(Schedule("0 1-23/2 * * *", zone), *local_day(zone, day))]
    assert got == [f"{h:02d}:00" for h in range(1, 24, 2)]


@pytest.mark.parametrize("zone", ["Europe/Berlin", "America/New_York"])
def test_a_step_of_one_names_the_same_hours_across_dst(zone: str) -> None:
    fall, spring = {"Europe/Berlin": (date(2026, 10, 25), date(2026, 3, 29))}.get(
        zone, (date(2026, 11, 1), date(2026, 3, 8))
    )
    for day in (fall, spring):
        stepped = between(Schedule("45 0-19/1 * * *", zone), *local_day(zone, day))
        plain = between(Schedule("45 0-19 * * *", zone), *local_day(zone, day))
        assert stepped == plain
        assert len(plain) == 20  # each wall time once; the one in the gap at the gap's end
    assert local(between(Schedule("45 0-19/1 * * *", zone), *local_day(zone, spring))[2], zone)[:5] == "03:00"


# ---------------------------------------------------------------- the far future


def test_slots_far_in_the_future_end_with_the_year_9999() -> None:
    job = Job("leap", "0 0 29 2 *", lambda: None)
    got = job.slots(datetime(2026, 1, 1, tzinfo=UTC), count=2000)
    leap_years = [y for y in range(2026, 10000) if calendar.isleap(y)]
    assert [(s.year, s.month, s.day) for s in got] == [(y, 2, 29) for y in leap_years]
    assert Schedule("0 0 29 2 *", "Pacific/Kiritimati").slots(ms(9990, 1, 1), 5)[-1] == ms(
        9996, 2, 29, zone="Pacific/Kiritimati"
    )
    with pytest.raises(ValueError, match="has no slot after .* slots end with the year 9999"):
        Schedule("* * * * *", "America/Los_Angeles").next_after(ms(9999, 12, 31))


# ---------------------------------------------------------------- what other implementations read


@pytest.mark.parametrize(
    ("expr", "after", "expected"),
    [
        (
            "5/15 * * * *",
            (2026, 6, 1),
            [(2026, 6, 1, 0, 5), (2026, 6, 1, 0, 20), (2026, 6, 1, 0, 35), (2026, 6, 1, 0, 50)],
        ),
        ("0 0 * * 5L", (2026, 6, 1), [(2026, 6, 26), (2026, 7, 31), (2026, 8, 28)]),
        ("0 0 * * FRIL", (2026, 6, 1), [(2026, 6, 26), (2026, 7, 31), (2026, 8, 28)]),
        ("0 0 LW * *", (2026, 1, 1), [(2026, 1, 30), (2026, 2, 27), (2026, 3, 31), (2026, 4, 30), (2026, 5, 29)]),
        ("0 0 L-3 * *", (2026, 1, 1), [(2026, 1, 28), (2026, 2, 25), (2026, 3, 28)]),
        ("0 0 15W * *", (2026, 2, 1), [(2026, 2, 16), (2026, 3, 16), (2026, 4, 15)]),  # Sun 15th, Sun 15th, Wed
        ("0 0 1W * *", (2026, 7, 31), [(2026, 8, 3), (2026, 9, 1)]),  # Sat 1 Aug: Monday the 3rd, not July
        ("0 0 * * FRI-SUN", (2026, 6, 1), [(2026, 6, 5), (2026, 6, 6), (2026, 6, 7), (2026, 6, 12)]),
        ("0 0 * * */7", (2026, 6, 1), [(2026, 6, 7), (2026, 6, 14)]),  # 0 and 7: Sunday
        ("@DAILY", (2026, 6, 1), [(2026, 6, 2), (2026, 6, 3)]),
        ("0 0 1 jan *", (2026, 6, 1), [(2027, 1, 1)]),
    ],
)
def test_extensions_anarchon_accepts(expr: str, after: tuple[int, ...], expected: list[tuple[int, ...]]) -> None:
    assert Schedule(expr).slots(ms(*after), len(expected)) == [ms(*e) for e in expected]


@pytest.mark.parametrize(
    ("expr", "says"),
    [
        ("0 22-2 * * *", "wraps around; write it as two ranges, 22-23,0-2"),
        ("0 0 * NOV-FEB *", "wraps around; write it as two ranges, NOV-12,1-FEB"),
        ("*/90 * * * *", "longer than the whole minute field"),
        ("0 */24 * * *", "longer than the whole hour field"),
        ("0 0\n* * *", "newline"),
        ("0 0 * * *\n0 1 * * *", "newline"),
        ("0 0 ? * MON", "'?' is Quartz syntax"),
        ("0 0 12 ? * 6#3", "0 or 7 = Sunday"),
        ("0 0 * * L", "Quartz's Saturday"),
        ("0 0 * * 1#6", "1 to 5"),
        ("0 0 15 * 1#1,L", "Quartz's Saturday"),
        ("0 0 * * 1-5/0", "is 0"),
        ("H 0 * * *", "H picks a value from the job's name, and this schedule has none"),
        ("0 ~ * * *", "R and ~ (random) fields are not supported"),
        ("R 0 * * *", "R and ~ (random) fields are not supported"),
        ("0 0 * * MONDAY", "not a day-of-week name"),
        ("0 JAN * * *", "names are allowed only in the month and day-of-week fields"),
        ("0 0 1W-5 * *", "not understood"),
        ("5L * * * *", "belong to the day-of-month and day-of-week fields"),
        ("0 0 31 4,6,9,11 *", "never matches"),
        ("0 0 * 2 1#5,2#5,3#5 ", None),  # accepted: some Februaries have five Mondays
    ],
)
def test_extensions_anarchon_refuses_say_why_and_how(expr: str, says: str | None) -> None:
    if says is None:
        assert Schedule(expr).slots(ms(2026, 1, 1), 1)
        return
    with pytest.raises(ValueError, match="is invalid") as info:
        Schedule(expr)
    assert says in str(info.value)
    assert repr(expr) in str(info.value)


# ---------------------------------------------------------------- six fields: cron's weekday numbering


def test_a_quartz_third_friday_pasted_as_it_is_means_the_third_saturday_and_warns() -> None:
    with pytest.warns(CronNumberingWarning, match=r"0 or 7 = Sunday.*FRI#3"):
        pasted = Schedule("0 0 12 * * 6#3")
    assert pasted.slots(ms(2026, 6, 1), 2) == [ms(2026, 6, 20, 12), ms(2026, 7, 18, 12)]  # Saturdays
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        named = Schedule("0 0 12 * * FRI#3")  # a name says which day is meant: no warning
        Schedule("0 12 * * 5#3")  # five fields are cron's own: no warning
    assert named.slots(ms(2026, 6, 1), 2) == [ms(2026, 6, 19, 12), ms(2026, 7, 17, 12)]  # Fridays
    with pytest.warns(CronNumberingWarning):
        Schedule("0 0 12 * * 6L")


# ---------------------------------------------------------------- where cronsim errs (see test_cron_cronsim.py)


def test_a_thirty_minute_dst_shift_keeps_whole_real_time_hours() -> None:
    """Lord Howe goes back from 02:00 to 01:30; 06:00 that day exists and "*/30 6" runs there."""
    zone = "Australia/Lord_Howe"
    got = between(Schedule("*/30 6 * * *", zone), *local_day(zone, date(2026, 4, 5)))
    assert [local(t, zone) for t in got] == ["06:00+1030", "06:30+1030"]
