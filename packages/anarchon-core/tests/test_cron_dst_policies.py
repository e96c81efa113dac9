"""DST policies (``dst=``) on the two change days of Europe/Berlin and Australia/Lord_Howe.

The table below is the core README's, written out by hand from the policy
definitions: for each expression and change day, what runs between 01:00 and
03:59 local time and how many runs the whole local day has. Every policy
appears in exactly one group of every row. Each case is also checked for
catch-up counting (``count_between`` over the day and over parts of it) and
for start independence (every query inside the day, including each of the
last seconds before a change, gives the next slot of the table). A property
test compares all policies with a brute-force reference on any DST day.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import cast
from zoneinfo import ZoneInfo

import pytest
from cronsim import CronSim
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anarchon import Scheduler
from anarchon.cron import DstPolicy, Schedule
from anarchon.errors import InvalidJobError
from anarchon.memory import MemoryBackend

POLICIES = ("cron", "wall", "real", "twice", "skip")
BERLIN, LORD_HOWE = "Europe/Berlin", "Australia/Lord_Howe"
# Berlin: 02:00 CET -> 03:00 CEST, and 03:00 CEST -> 02:00 CET (one hour).
# Lord Howe: 02:00 +10:30 -> 02:30 +11:00, and 02:00 +11:00 -> 01:30 +10:30 (half an hour).
BERLIN_SPRING, BERLIN_FALL = date(2026, 3, 29), date(2026, 10, 25)
HOWE_FALL, HOWE_SPRING = date(2026, 4, 5), date(2026, 10, 4)


@dataclass(frozen=True)
class Case:
    zone: str
    day: date
    cron: str
    #: "policy policy ...": (runs in the whole local day, runs from 01:00 to 03:59 as "HH:MM+hhmm")
    outcomes: dict[str, tuple[int, str]]


TABLE = [
    # ---- Europe/Berlin, spring forward: 02:00-02:59 does not exist
    Case(BERLIN, BERLIN_SPRING, "0 * * * *", {"cron wall real twice skip": (23, "01:00+0100 03:00+0200")}),
    Case(BERLIN, BERLIN_SPRING, "30 2 * * *", {"cron wall twice": (1, "03:00+0200"), "real skip": (0, "")}),
    Case(BERLIN, BERLIN_SPRING, "0-59/30 2 * * *", {"cron wall twice": (1, "03:00+0200"), "real skip": (0, "")}),
    Case(BERLIN, BERLIN_SPRING, "0 2 * * *", {"cron wall twice": (1, "03:00+0200"), "real skip": (0, "")}),
    Case(BERLIN, BERLIN_SPRING, "30 1 * * *", {"cron wall real twice skip": (1, "01:30+0100")}),
    Case(
        BERLIN,
        BERLIN_SPRING,
        "*/15 * * * *",
        {
            "cron wall real twice skip": (
                92,
                "01:00+0100 01:15+0100 01:30+0100 01:45+0100 03:00+0200 03:15+0200 03:30+0200 03:45+0200",
            )
        },
    ),
    # ---- Europe/Berlin, fall back: 02:00-02:59 comes twice, +0200 then +0100
    Case(
        BERLIN,
        BERLIN_FALL,
        "0 * * * *",
        {
            "wall skip": (24, "01:00+0200 02:00+0200 03:00+0100"),
            "cron real twice": (25, "01:00+0200 02:00+0200 02:00+0100 03:00+0100"),
        },
    ),
    Case(
        BERLIN,
        BERLIN_FALL,
        "30 2 * * *",
        {"cron wall skip": (1, "02:30+0200"), "real twice": (2, "02:30+0200 02:30+0100")},
    ),
    Case(
        BERLIN,
        BERLIN_FALL,
        "0-59/30 2 * * *",
        {
            "cron wall skip": (2, "02:00+0200 02:30+0200"),
            "real twice": (4, "02:00+0200 02:30+0200 02:00+0100 02:30+0100"),
        },
    ),
    Case(
        BERLIN,
        BERLIN_FALL,
        "0 2 * * *",
        {"cron wall skip": (1, "02:00+0200"), "real twice": (2, "02:00+0200 02:00+0100")},
    ),
    Case(BERLIN, BERLIN_FALL, "30 1 * * *", {"cron wall real twice skip": (1, "01:30+0200")}),
    Case(
        BERLIN,
        BERLIN_FALL,
        "*/15 * * * *",
        {
            "wall skip": (
                96,
                "01:00+0200 01:15+0200 01:30+0200 01:45+0200 02:00+0200 02:15+0200 02:30+0200 02:45+0200 "
                "03:00+0100 03:15+0100 03:30+0100 03:45+0100",
            ),
            "cron real twice": (
                100,
                "01:00+0200 01:15+0200 01:30+0200 01:45+0200 02:00+0200 02:15+0200 02:30+0200 02:45+0200 "
                "02:00+0100 02:15+0100 02:30+0100 02:45+0100 03:00+0100 03:15+0100 03:30+0100 03:45+0100",
            ),
        },
    ),
    # ---- Australia/Lord_Howe, spring forward: 02:00-02:29 does not exist
    Case(
        LORD_HOWE,
        HOWE_SPRING,
        "0 * * * *",
        {
            "wall twice": (24, "01:00+1030 02:30+1100 03:00+1100"),
            "cron real skip": (23, "01:00+1030 03:00+1100"),
        },
    ),
    Case(LORD_HOWE, HOWE_SPRING, "30 2 * * *", {"cron wall real twice skip": (1, "02:30+1100")}),
    Case(LORD_HOWE, HOWE_SPRING, "0-59/30 2 * * *", {"cron wall real twice skip": (1, "02:30+1100")}),
    Case(LORD_HOWE, HOWE_SPRING, "0 2 * * *", {"cron wall twice": (1, "02:30+1100"), "real skip": (0, "")}),
    Case(LORD_HOWE, HOWE_SPRING, "30 1 * * *", {"cron wall real twice skip": (1, "01:30+1030")}),
    Case(
        LORD_HOWE,
        HOWE_SPRING,
        "*/15 * * * *",
        {
            "cron wall real twice skip": (
                94,
                "01:00+1030 01:15+1030 01:30+1030 01:45+1030 02:30+1100 02:45+1100 "
                "03:00+1100 03:15+1100 03:30+1100 03:45+1100",
            )
        },
    ),
    # ---- Australia/Lord_Howe, fall back: 01:30-01:59 comes twice, +1100 then +1030
    Case(
        LORD_HOWE,
        HOWE_FALL,
        "0 * * * *",
        {"cron wall real twice skip": (24, "01:00+1100 02:00+1030 03:00+1030")},
    ),
    Case(LORD_HOWE, HOWE_FALL, "30 2 * * *", {"cron wall real twice skip": (1, "02:30+1030")}),
    Case(LORD_HOWE, HOWE_FALL, "0-59/30 2 * * *", {"cron wall real twice skip": (2, "02:00+1030 02:30+1030")}),
    Case(LORD_HOWE, HOWE_FALL, "0 2 * * *", {"cron wall real twice skip": (1, "02:00+1030")}),
    Case(
        LORD_HOWE,
        HOWE_FALL,
        "30 1 * * *",
        {"cron wall skip": (1, "01:30+1100"), "real twice": (2, "01:30+1100 01:30+1030")},
    ),
    Case(
        LORD_HOWE,
        HOWE_FALL,
        "*/15 * * * *",
        {
            "wall skip": (
                96,
                "01:00+1100 01:15+1100 01:30+1100 01:45+1100 02:00+1030 02:15+1030 02:30+1030 02:45+1030 "
                "03:00+1030 03:15+1030 03:30+1030 03:45+1030",
            ),
            "cron real twice": (
                98,
                "01:00+1100 01:15+1100 01:30+1100 01:45+1100 01:30+1030 01:45+1030 02:00+1030 02:15+1030 "
                "02:30+1030 02:45+1030 03:00+1030 03:15+1030 03:30+1030 03:45+1030",
            ),
        },
    ),
]


def cases() -> list[tuple[Case, str, int, str]]:
    out = []
    for case in TABLE:
        groups = [group.split() for group in case.outcomes]
        assert sorted(p for group in groups for p in group) == sorted(POLICIES), case  # each policy once
        for group, (count, window) in zip(groups, case.outcomes.values(), strict=True):
            out.extend((case, policy, count, window) for policy in group)
    return out


def case_id(value: object) -> str:
    if isinstance(value, Case):
        return f"{value.zone.split('/')[1]}-{value.day}-{value.cron.replace(' ', '_')}"
    return str(value) if isinstance(value, str) else ""


def day_window(zone: str, day: date) -> tuple[int, int]:
    """The local day as (start - 1 ms, end - 1 ms], in ms, found with zoneinfo alone."""
    tz = ZoneInfo(zone)
    start = datetime(day.year, day.month, day.day, tzinfo=tz)
    nxt = day + timedelta(days=1)
    end = datetime(nxt.year, nxt.month, nxt.day, tzinfo=tz)
    return int(start.timestamp()) * 1000 - 1, int(end.timestamp()) * 1000 - 1


def slots_between(schedule: Schedule, after_ms: int, until_ms: int) -> list[int]:
    out, moment = [], after_ms
    while (moment := schedule.next_after(moment)) <= until_ms:
        out.append(moment)
    return out


def schedule_of(case: Case, policy: str) -> Schedule:
    """A fresh schedule, with no state cached from another query."""
    return Schedule(case.cron, case.zone, dst=cast(DstPolicy, policy))


def local(zone: str, slot_ms: int) -> str:
    return datetime.fromtimestamp(slot_ms / 1000, ZoneInfo(zone)).strftime("%H:%M%z")


CASES = cases()


@pytest.mark.parametrize(("case", "policy", "count", "window"), CASES, ids=case_id)
def test_change_day_runs_as_the_table_says(case: Case, policy: str, count: int, window: str) -> None:
    schedule = schedule_of(case, policy)
    start, end = day_window(case.zone, case.day)
    slots = slots_between(schedule, start, end)
    assert len(slots) == count
    times = [local(case.zone, s) for s in slots]
    assert " ".join(t for t in times if "01:00" <= t[:5] <= "03:59") == window


@pytest.mark.parametrize(("case", "policy", "count", "window"), CASES, ids=case_id)
def test_catch_up_counts_the_slots_the_table_lists(case: Case, policy: str, count: int, window: str) -> None:
    """Catch-up after an outage over the change counts exactly the slots that run, and finds the newest."""
    schedule = schedule_of(case, policy)
    start, end = day_window(case.zone, case.day)
    slots = slots_between(schedule, start, end)
    assert schedule.count_between(start, end) == (count, slots[-1] if slots else None)
    if slots:
        assert schedule.count_between(start, end, cap=1) == (1, slots[-1])
    # An outage from 01:00 to 04:00 local: the missed slots are the window's.
    tz = ZoneInfo(case.zone)
    one = int(datetime(case.day.year, case.day.month, case.day.day, 1, tzinfo=tz).timestamp()) * 1000 - 1
    four = int(datetime(case.day.year, case.day.month, case.day.day, 4, tzinfo=tz).timestamp()) * 1000 - 1
    missed = [s for s in slots if one < s <= four]
    assert [local(case.zone, s) for s in missed] == (window.split() if window else [])
    assert schedule.count_between(one, four) == (len(missed), missed[-1] if missed else None)


@pytest.mark.parametrize(("case", "policy", "count", "window"), CASES, ids=case_id)
def test_every_start_in_the_day_gives_the_same_next_slot(case: Case, policy: str, count: int, window: str) -> None:
    """Instances started at any moment agree: every 5 minutes, and every second around each change."""
    start, end = day_window(case.zone, case.day)
    expected = slots_between(schedule_of(case, policy), start, end)
    following = schedule_of(case, policy).next_after(end)
    offsets = [(t, local(case.zone, t)[-5:]) for t in range(start + 1, end, 60_000)]
    changes = [t for (t, a), (_, b) in itertools.pairwise(offsets) if a != b]
    starts = list(range(start, end, 300_000))
    for change in changes:
        starts += range(change - 10_000, change + 70_000, 500)
    for moment in sorted(starts):
        fresh = schedule_of(case, policy)
        want = next((s for s in expected if s > moment), following)
        assert fresh.next_after(moment) == want, (local(case.zone, moment), moment)


def test_a_query_from_the_last_second_before_a_gap_sees_the_moved_slot() -> None:
    """Regression: from 01:59:59.5 CET the next slot of ``30 2 * * *`` was the next day's, not 03:00 CEST."""
    schedule = Schedule("30 2 * * *", BERLIN)
    gap_end = int(datetime(2026, 3, 29, 3, tzinfo=ZoneInfo(BERLIN)).timestamp()) * 1000
    for before in (1, 500, 999, 1000, 1001, 2000):
        assert Schedule("30 2 * * *", BERLIN).next_after(gap_end - before) == gap_end
        assert schedule.next_after(gap_end - before) == gap_end


# ---------------------------------------------------------------- the option


def test_the_policy_reaches_the_jobs_slots() -> None:
    scheduler = Scheduler(MemoryBackend())
    default = scheduler.add("default", "30 2 * * *", lambda: None, timezone=BERLIN)
    skip = scheduler.add("skip", "30 2 * * *", lambda: None, timezone=BERLIN, dst="skip")
    after = datetime(2026, 3, 28, 12, tzinfo=ZoneInfo(BERLIN))
    assert default.options.dst == "cron" and skip.options.dst == "skip"
    assert [s.astimezone(ZoneInfo(BERLIN)).strftime("%d %H:%M") for s in default.slots(after, 2)] == [
        "29 03:00",
        "30 02:30",
    ]
    assert [s.astimezone(ZoneInfo(BERLIN)).strftime("%d %H:%M") for s in skip.slots(after, 2)] == [
        "30 02:30",
        "31 02:30",
    ]


@pytest.mark.parametrize("value", ["Twice", "twice,skip", "", None, 1, True, "utc"])
def test_a_bad_policy_names_the_option_the_value_and_the_choices(value: object) -> None:
    scheduler = Scheduler(MemoryBackend())
    with pytest.raises(InvalidJobError) as info:
        scheduler.add("nightly", "30 2 * * *", lambda: None, dst=value)
    message = str(info.value)
    assert info.value.option == "dst"
    assert f"dst={value!r} is not a DST policy" in message
    assert "job 'nightly'" in message
    for policy in POLICIES:
        assert repr(policy) in message
    with pytest.raises(ValueError, match="is not a DST policy; use one of 'cron'"):
        Schedule("30 2 * * *", BERLIN, dst=value)  # type: ignore[arg-type]


# ---------------------------------------------------------------- property: any DST day, any policy


def reference(cron: str, zone: str, once: bool, move: bool, start_s: int, end_s: int) -> list[int]:
    """Every minute in (start_s, end_s]: cronsim (naive) says which wall times match, the rules here the rest."""
    tz = ZoneInfo(zone)

    def wall(t: int) -> datetime:
        return datetime.fromtimestamp(t, tz).replace(tzinfo=None)

    it = CronSim(cron, wall(start_s) - timedelta(days=1))
    matches, last = set(), wall(end_s) + timedelta(days=1)
    while (found := next(it)) <= last:
        matches.add(found)
    out, seen, previous = [], set(), wall(start_s)
    for t in range(start_s + 60, end_s + 1, 60):
        w = wall(t)
        skipped = (previous + timedelta(minutes=k) for k in range(1, int((w - previous).total_seconds()) // 60))
        if (move and any(s in matches for s in skipped)) or (w in matches and not (once and w in seen)):
            out.append(t * 1000)
        seen.add(w)
        previous = w
    return out


def change_days(zone: str, year: int) -> list[date]:
    """The days whose noon offset differs from the day before's, found with zoneinfo alone."""
    tz = ZoneInfo(zone)
    day, changes = date(year, 1, 1), []
    while day.year == year:
        noon = datetime(day.year, day.month, day.day, 12, tzinfo=tz)
        if noon.utcoffset() != (noon - timedelta(days=1)).utcoffset():
            changes.append(day)
        day += timedelta(days=1)
    return changes


RULES = {"wall": (True, True), "real": (False, False), "twice": (False, True), "skip": (True, False)}


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=150)
@given(
    minute=st.sampled_from(["0", "30", "*/15", "*/7", "0-59/20", "5,35", "*"]),
    hour=st.sampled_from(["*", "1", "2", "1-3", "*/2", "0-23/2", "2,3"]),
    policy=st.sampled_from(POLICIES),
    zone=st.sampled_from([BERLIN, LORD_HOWE, "America/New_York"]),
    year=st.integers(2020, 2035),
    which=st.integers(0, 1),
)
def test_any_policy_on_any_change_day_matches_a_brute_force_reference(
    minute: str, hour: str, policy: str, zone: str, year: int, which: int
) -> None:
    cron = f"{minute} {hour} * * *"
    schedule = Schedule(cron, zone, dst=cast(DstPolicy, policy))
    wall_clock = not (minute.startswith("*") or hour.startswith("*"))
    once, move = RULES.get(policy, (wall_clock, wall_clock))
    tz = ZoneInfo(zone)
    day = change_days(zone, year)[which]
    start = int(datetime(day.year, day.month, day.day, 12, tzinfo=tz).timestamp()) - 86_400
    end = start + 2 * 86_400
    assert slots_between(schedule, start * 1000, end * 1000) == reference(cron, zone, once, move, start, end)


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=150)
@given(
    cron=st.sampled_from(
        ["30 2 * * *", "0 * * * *", "*/15 * * * *", "0-59/30 2 * * *", "H H * * *", "H/20 1-3 * * *", "0 2 * * 0"]
    ),
    policy=st.sampled_from(POLICIES),
    zone=st.sampled_from([BERLIN, LORD_HOWE, "America/New_York", "America/Santiago"]),
    year=st.integers(2020, 2035),
    which=st.integers(0, 1),
    shift=st.integers(-2 * 86_400_000, 86_400_000),
    earlier_by=st.integers(0, 3 * 86_400_000),
    span=st.integers(0, 3 * 86_400_000),
    cap=st.integers(0, 30),
)
def test_any_policy_gives_the_same_slots_from_any_start_and_counts_them_alike(
    cron: str, policy: str, zone: str, year: int, which: int, shift: int, earlier_by: int, span: int, cap: int
) -> None:
    """Two instances started at different moments near a change agree on every slot; catch-up counts them."""
    dst = cast(DstPolicy, policy)
    day = change_days(zone, year)[which]
    later = int(datetime(day.year, day.month, day.day, tzinfo=ZoneInfo(zone)).timestamp()) * 1000 + shift
    from_later = Schedule(cron, zone, dst=dst, name="job-7").slots(later, 10)
    from_earlier = slots_between(Schedule(cron, zone, dst=dst, name="job-7"), later - earlier_by, from_later[-1])
    assert [s for s in from_earlier if s > later] == from_later
    listed = slots_between(Schedule(cron, zone, dst=dst, name="job-7"), later, later + span)
    counted = Schedule(cron, zone, dst=dst, name="job-7").count_between(later, later + span, cap)
    assert counted == (min(len(listed), cap), listed[-1] if listed else None)
