"""Jenkins' ``H``: values hashed from the job's name, the same in every process, spread evenly.

The hash is documented (SHA-256 of ``name + NUL + field name``, first 8 bytes,
big-endian), so the tests restate it independently and pin a few values: a
change of hash would move every job's slots in a rolling deploy.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timezone

import pytest

from anarchon import Scheduler
from anarchon.cron import Schedule
from anarchon.cron.expression import parse_expression
from anarchon.errors import InvalidJobError
from anarchon.memory import MemoryBackend

UTC = timezone.utc
NAMES = [f"job-{i:05d}" for i in range(10_000)]
DAY_MS = 86_400_000


def h(name: str, field: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{name}\x00{field}".encode()).digest()[:8], "big")


def minutes_of_day(cron: str, name: str) -> list[int]:
    """The minutes (of the day, 0-1439) at which the job runs on 2026-01-05 UTC (a Monday)."""
    start = int(datetime(2026, 1, 5, tzinfo=UTC).timestamp()) * 1000
    out, moment, schedule = [], start - 1, Schedule(cron, name=name)
    while (moment := schedule.next_after(moment)) < start + DAY_MS:
        out.append((moment - start) // 60_000)
    return out


# ---------------------------------------------------------------- the values


def test_h_is_the_documented_hash_of_the_name_and_the_field() -> None:
    name = "nightly-report"
    assert minutes_of_day("H * * * *", name) == [hour * 60 + h(name, "minute") % 60 for hour in range(24)]
    assert minutes_of_day("H H * * *", name) == [h(name, "hour") % 24 * 60 + h(name, "minute") % 60]
    # Pinned: a change to the hash would move every deployed job's slots.
    assert minutes_of_day("H H * * *", name) == [23 * 60 + 4]  # 23:04
    assert minutes_of_day("H * * * *", "sync") == [hour * 60 + 44 for hour in range(24)]


@pytest.mark.parametrize(
    ("cron", "minutes_within_hour"),
    [
        ("H/15 * * * *", lambda o: [o % 15 + k * 15 for k in range(4)]),
        ("H(0-29) * * * *", lambda o: [o % 30]),
        ("H(0-29)/10 * * * *", lambda o: [o % 10, o % 10 + 10, o % 10 + 20]),
        ("H(10-19)/4 * * * *", lambda o: [v for v in range(10 + o % 4, 20, 4)]),
        ("H(0-29),H(30-59) * * * *", lambda o: [o % 30, 30 + o % 30]),
        ("H,30 * * * *", lambda o: sorted({o % 60, 30})),
        ("h * * * *", lambda o: [o % 60]),
    ],
)
def test_minute_forms(cron: str, minutes_within_hour: Callable[[int], list[int]]) -> None:
    for name in ("a", "sync", "nightly-report", "job-00042"):
        offset = h(name, "minute")
        expected = minutes_within_hour(offset)
        assert minutes_of_day(cron, name) == [hour * 60 + m for hour in range(24) for m in expected]


def test_day_fields_pick_days_every_month_has() -> None:
    days: Counter[int] = Counter()
    weekdays: Counter[int] = Counter()
    for name in NAMES[:2000]:
        (day,) = parse_expression("0 0 H * *", name).day.values
        (weekday,) = parse_expression("0 0 * * H", name).weekday.values
        days[day] += 1
        weekdays[weekday] += 1
    assert set(days) == set(range(1, 29))  # never 29-31: the job would skip the months without them
    assert set(weekdays) == set(range(7))


def test_seconds_and_names_in_ranges() -> None:
    name = "ticker"
    start = int(datetime(2026, 1, 5, tzinfo=UTC).timestamp()) * 1000
    assert Schedule("H * * * * *", name=name).next_after(start) == start + (h(name, "second") % 60 or 60) * 1000
    weekday = 1 + h(name, "day-of-week") % 5
    slots = Schedule("0 9 * * H(MON-FRI)", name=name).slots(start, 3)
    assert {datetime.fromtimestamp(s / 1000, UTC).isoweekday() for s in slots} == {weekday}


# ---------------------------------------------------------------- the spread


def test_ten_thousand_hourly_jobs_spread_evenly_over_the_hour() -> None:
    """10,000 ``H * * * *`` jobs: each minute of the hour gets between 120 and 215 (mean 166.7).

    With these names the counts are 131 to 191 and chi-square (59 degrees of
    freedom) is 48.0, below 98, its 99.9th percentile for a uniform spread;
    the same jobs as ``@hourly`` (``0 * * * *``) all run at minute 0.
    """
    per_minute = Counter(minutes_of_day("H * * * *", name)[0] for name in NAMES)
    assert set(per_minute) == set(range(60))
    assert all(120 <= n <= 215 for n in per_minute.values()), sorted(per_minute.values())
    mean = len(NAMES) / 60
    assert sum((n - mean) ** 2 / mean for n in per_minute.values()) < 98
    assert Counter(minutes_of_day("@hourly", name)[0] for name in NAMES[:100]) == {0: 100}


def test_daily_jobs_spread_over_the_hours_and_quarter_hour_jobs_over_their_offsets() -> None:
    per_hour = Counter(minutes_of_day("H H * * *", name)[0] // 60 for name in NAMES)
    assert set(per_hour) == set(range(24))
    assert all(340 <= n <= 495 for n in per_hour.values()), sorted(per_hour.values())  # mean 416.7
    per_offset = Counter(minutes_of_day("H/15 * * * *", name)[0] for name in NAMES)
    assert set(per_offset) == set(range(15))
    assert all(560 <= n <= 780 for n in per_offset.values()), sorted(per_offset.values())  # mean 666.7


# ---------------------------------------------------------------- every instance, every restart


def test_the_same_slots_in_another_process_whatever_its_hash_seed() -> None:
    code = (
        "from anarchon.cron import Schedule;"
        "print([Schedule(c, 'Europe/Berlin', name=n).next_after(0) "
        "for c in ('H * * * *', 'H H * * *', 'H/15 H(0-5) * * H') for n in ('a', 'sync', 'job-00042')])"
    )
    here = [
        Schedule(c, "Europe/Berlin", name=n).next_after(0)
        for c in ("H * * * *", "H H * * *", "H/15 H(0-5) * * H")
        for n in ("a", "sync", "job-00042")
    ]
    for seed in ("0", "1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        assert out.stdout.strip() == str(here)


def test_jobs_of_two_schedulers_with_the_same_name_share_slots() -> None:
    first, second = Scheduler(MemoryBackend()), Scheduler(MemoryBackend())
    after = datetime(2026, 6, 1, tzinfo=UTC)
    a = first.add("report", "H H * * *", lambda: None, timezone="Europe/Berlin")
    b = second.add("report", "H H * * *", lambda: None, timezone="Europe/Berlin")
    other = second.add("other", "H H * * *", lambda: None, timezone="Europe/Berlin")
    assert a.slots(after, 5) == b.slots(after, 5)
    assert a.slots(after, 1) != other.slots(after, 1)  # different names; these two differ


# ---------------------------------------------------------------- cron's first-character rules see H as restricted


def test_dst_and_day_rules_with_h() -> None:
    assert not Schedule("H * * * *", name="x").wall_clock  # the hour field starts with *
    assert Schedule("H H * * *", name="x").wall_clock
    assert Schedule("H/15 2 * * *", name="x").wall_clock  # H/15 does not start with *
    # Both day fields restricted: cron ORs them, so H in both is "day d of the month, or weekday w".
    name = "x"
    day, weekday = 1 + h(name, "day-of-month") % 28, h(name, "day-of-week") % 7
    start = int(datetime(2026, 1, 1, tzinfo=UTC).timestamp()) * 1000
    dates = [datetime.fromtimestamp(s / 1000, UTC) for s in Schedule("0 0 H * H", name=name).slots(start - 1, 12)]
    assert all(d.day == day or d.isoweekday() % 7 == weekday for d in dates)
    assert any(d.day == day for d in dates) and any(d.isoweekday() % 7 == weekday and d.day != day for d in dates)


# ---------------------------------------------------------------- where H cannot work


@pytest.mark.parametrize(
    ("cron", "says"),
    [
        ("0 0 H(1-31) * *", "could pick day 31, which some months lack"),
        ("0 0 H(25-29) * *", "keep the range within 1-28"),
        ("H/60 * * * *", "the step 60 in 'H/60' is not shorter than its range 0-59"),
        ("H(0-29)/30 * * * *", "not shorter than its range 0-29"),
        ("H/0 * * * *", "the step in 'H/0' is 0"),
        ("H(30-10) * * * *", "wraps around"),
        ("H(0-61) * * * *", "61 is out of range 0-59"),
        ("0 0 HL * *", "an H element is written H, H/step, H(a-b) or H(a-b)/step"),
        ("0 0 * * H#2", "an H element is written"),
        ("H-5 * * * *", "an H element is written"),
        ("0 0 * H(JAN-MON) *", "'MON' is not a month name"),
        ("R * * * *", "R and ~ (random) fields are not supported"),
    ],
)
def test_h_where_it_cannot_work_is_refused_with_the_fix(cron: str, says: str) -> None:
    scheduler = Scheduler(MemoryBackend())
    with pytest.raises(InvalidJobError) as info:
        scheduler.add("spread", cron, lambda: None)
    assert info.value.option == "cron"
    assert says in str(info.value)
    assert repr(cron) in str(info.value)


def test_h_without_a_job_name_says_how_to_give_one() -> None:
    with pytest.raises(ValueError, match=r"H picks a value from the job's name, and this schedule has none"):
        Schedule("H * * * *")
    assert Schedule("0 9 * * THU").slots(0, 1)  # THU holds an H but no H element
