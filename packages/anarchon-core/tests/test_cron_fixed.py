"""``@every`` and ``@at`` schedules: slots fixed in real time, alike on every instance, whatever the zone."""

from __future__ import annotations

import calendar
import itertools

import pytest

from anarchon import InvalidJobError, MemoryBackend, Scheduler
from anarchon.cron import Schedule

DAY_MS = 86_400_000


@pytest.mark.parametrize(
    ("text", "period_s"), [("@every 90s", 90), ("@every 1h30m", 5400), ("@EVERY 2d", 172_800), ("@every\t30s", 30)]
)
def test_every_is_a_grid_from_the_epoch_that_does_not_depend_on_where_a_query_starts(text: str, period_s: int) -> None:
    schedule = Schedule(text)
    period = period_s * 1000
    for after in (0, 1, 1_790_000_012_345, 1_790_000_000_000 + period - 1):
        slots = schedule.slots(after, 5)
        assert all(s % period == 0 for s in slots), slots
        assert slots[0] == (after // period + 1) * period
        assert [b - a for a, b in itertools.pairwise(slots)] == [period] * 4
    later = Schedule(text)  # an instance started later derives the same slots
    assert later.slots(1_790_000_000_000, 3) == schedule.slots(1_790_000_000_000, 3)


def test_every_is_real_time_so_the_zone_and_a_dst_change_do_not_move_it() -> None:
    spring_forward = calendar.timegm((2026, 3, 29, 0, 0, 0)) * 1000  # Europe/Paris skips 02:00-03:00 local
    paris = Schedule("@every 1h", "Europe/Paris").slots(spring_forward, 6)
    utc = Schedule("@every 1h").slots(spring_forward, 6)
    assert paris == utc
    assert [b - a for a, b in itertools.pairwise(paris)] == [3_600_000] * 5


def test_every_counts_missed_slots_arithmetically() -> None:
    schedule = Schedule("@every 7s")
    assert schedule.count_between(0, 70_000) == (10, 70_000)
    assert schedule.count_between(1_000, 13_999) == (1, 7_000)
    assert schedule.count_between(0, 6_999) == (0, None)


def test_at_is_one_slot_read_with_its_offset_or_in_the_zone() -> None:
    instant = calendar.timegm((2026, 12, 24, 17, 0, 0)) * 1000
    assert Schedule("@at 2026-12-24T18:00:00+01:00").slots(0, 3) == [instant]
    assert Schedule("@at 2026-12-24T17:00:00Z").slots(0, 3) == [instant]
    assert Schedule("@at 2026-12-24T18:00:00", "Europe/Paris").slots(0, 3) == [instant]
    once = Schedule("@at 2026-12-24T17:00:00Z")
    assert once.next_or_none(instant - 1) == instant
    assert once.next_or_none(instant) is None, "an @at has no slot after its time"
    assert once.count_between(0, instant + DAY_MS) == (1, instant)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("@every", "'' is not a duration"),
        ("@every 0s", "the interval is 0"),
        ("@every 1.5s", "'1.5s' is not a duration"),
        ("@every 90", "'90' is not a duration"),
        ("@every 5x", "'5x' is not a duration"),
        ("@at yesterday", "'yesterday' is not an ISO 8601 time"),
        ("@at 2026-12-24T18:00:00.250Z", "slots are whole seconds"),
        ("@at 1969-12-31T23:59:59Z", "outside 1970 to 9999"),
    ],
)
def test_a_bad_interval_or_time_names_the_text_and_the_fix(text: str, says: str) -> None:
    with pytest.raises(ValueError, match="is invalid") as caught:
        Schedule(text)
    message = str(caught.value)
    assert repr(text) in message and says in message
    assert "such as @" in message or "drop the fraction" in message, "the error shows how to write it"


def test_a_jobs_default_jitter_fits_inside_a_short_interval_and_a_longer_explicit_one_is_refused() -> None:
    s = Scheduler(MemoryBackend())
    job = s.add("tick", "@every 2s", lambda: None)
    assert job.options.jitter_ms == 500, "the default 2 s jitter would let a claim pass the next slot's"
    with pytest.raises(InvalidJobError, match="jitter_ms=3000 is not shorter than the 2000 ms"):
        s.add("tock", "@every 2s", lambda: None, jitter_ms=3000)
    assert s.add("once", "@at 2020-01-01T00:00:00Z", lambda: None).next_slot_ms(0) is not None
    assert s.next_slot("once") is None, "a code job whose @at passed is idle, not an error"
