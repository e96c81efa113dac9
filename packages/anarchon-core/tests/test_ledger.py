"""The ledger: every slot's outcome from the records and the schedule (anarchon.ledger)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from anarchon.cron import Schedule
from anarchon.ledger import MAX_MISSED, Entry, SlotOutcome, ledger, outcome_of
from anarchon.run import Attempt, Run, RunStatus

T0 = 1_800_000_000_000  # a whole second
EVERY_SECOND = Schedule("* * * * * *")


def run(second: int, status: RunStatus = RunStatus.SUCCEEDED, **fields: Any) -> Run:
    return Run(**{"job": "j", "slot_ms": T0 + second * 1000, "status": status, "instance": "i-1", **fields})


def rows(entries: list[Entry]) -> list[tuple[int, str, str]]:
    return [((e.slot_ms - T0) // 1000, e.outcome.value, e.reason) for e in entries]


def test_each_status_has_its_outcome_and_reason() -> None:
    assert outcome_of(run(0)) == (SlotOutcome.RAN, "")
    assert outcome_of(run(0, RunStatus.TIMED_OUT)) == (SlotOutcome.FAILED, "timed-out")
    assert outcome_of(run(0, RunStatus.SKIPPED)) == (SlotOutcome.SKIPPED, "overlap")
    assert outcome_of(run(0, RunStatus.PAUSED)) == (SlotOutcome.SKIPPED, "paused")
    assert outcome_of(run(0, RunStatus.ABANDONED))[0] is SlotOutcome.LOST
    assert {outcome_of(run(0, s))[0] for s in RunStatus} <= set(SlotOutcome)


def test_a_slot_between_records_with_no_record_is_missed() -> None:
    entries = ledger([run(3), run(0), run(1)], EVERY_SECOND)
    assert rows(entries) == [(3, "ran", ""), (2, "missed", "nobody claimed it"), (1, "ran", ""), (0, "ran", "")]
    assert entries[1].run is None and entries[1].covered_by is None


def test_without_the_schedule_nothing_is_made_up() -> None:
    assert rows(ledger([run(3), run(0)])) == [(3, "ran", ""), (0, "ran", "")]


def test_slots_a_catch_up_covered_name_it() -> None:
    # slot 4 ran as a catch-up of 3 slots: its own and the 2 before it (2 and 3); slot 1 stays uncovered.
    entries = ledger([run(0), run(4, missed=3, catch_up=True)], EVERY_SECOND)
    covered = {(e.slot_ms - T0) // 1000: e.covered_by for e in entries if e.outcome is SlotOutcome.MISSED}
    assert covered == {3: T0 + 4000, 2: T0 + 4000, 1: None}


def test_a_lost_slot_superseded_by_a_covering_run_names_it() -> None:
    entries = ledger([run(0, RunStatus.ABANDONED), run(1, missed=2)], EVERY_SECOND)
    (lost,) = [e for e in entries if e.outcome is SlotOutcome.LOST]
    assert lost.covered_by == T0 + 1000


def test_due_slots_after_the_newest_record_are_missed_once_too_late() -> None:
    entries = ledger([run(0)], EVERY_SECOND, due_before_ms=T0 + 2500)
    assert rows(entries) == [(2, "missed", "nobody claimed it"), (1, "missed", "nobody claimed it"), (0, "ran", "")]
    assert rows(ledger([run(0)], EVERY_SECOND, due_before_ms=T0 - 5000)) == [(0, "ran", "")]


def test_every_attempt_of_a_taken_over_slot_is_listed_under_the_one_that_followed() -> None:
    started = datetime.fromtimestamp(T0 / 1000, tz=timezone.utc)
    taken = run(
        1,
        attempt=3,
        instance="i-3",
        earlier=(Attempt(1, "i-1", 7, started), Attempt(2, "i-2", 8, started)),
    )
    entries = ledger([taken, run(0)], EVERY_SECOND)
    assert [(e.outcome.value, e.attempt, e.instance) for e in entries] == [
        ("ran", 3, "i-3"),
        ("died", 2, "i-2"),
        ("died", 1, "i-1"),
        ("ran", 1, "i-1"),
    ]
    assert entries[1].reason == "its runner died; attempt 3 took the slot over"


def test_manual_runs_neither_bound_gaps_nor_hide_missed_slots() -> None:
    manual = run(2, manual=True)
    assert rows(ledger([run(0), manual, run(3)], EVERY_SECOND))[1:3] == [
        (2, "missed", "nobody claimed it"),
        (2, "ran", ""),
    ]


def test_a_gap_too_long_to_list_is_one_entry_with_its_count() -> None:
    day = 86_400
    entries = ledger([run(0), run(day)], EVERY_SECOND)
    (gap,) = [e for e in entries if e.outcome is SlotOutcome.MISSED]
    assert gap.count > MAX_MISSED and gap.slot_ms == T0 + (day - 1) * 1000
    assert "nobody claimed it" in gap.reason
    assert gap.to_dict()["count"] == gap.count
