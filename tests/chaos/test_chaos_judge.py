"""The judge on hand-written ledgers: what breaks the promise and what the rules allow."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from chaos.judge import Timeline, Verdict, judge

S = 1_800_000_000_000
PERIOD = 6000
SLOTS = [S + n * PERIOD for n in range(4)]


def _ready(*instances: str) -> list[dict[str, Any]]:
    return [{"e": "ready", "instance": i, "t": S - 1000} for i in instances]


def _run(e: str, instance: str, t: int, slot: int, attempt: int = 1) -> dict[str, Any]:
    rec = {"e": e, "instance": instance, "t": t, "job": "job-slow", "slot": slot, "attempt": attempt}
    if e == "start":
        rec.update(catch_up=False, missed=0, manual=False)
    return rec


def _skip(instance: str, t: int, slot: int) -> dict[str, Any]:
    return {"e": "skip", "instance": instance, "t": t, "job": "job-slow", "slot": slot, "reason": "overlap"}


def _ran_later_slots() -> list[dict[str, Any]]:
    return [
        r for slot in SLOTS[2:] for r in (_run("start", "i1-s0", slot, slot), _run("end", "i1-s0", slot + 50, slot))
    ]


def _judge(
    ledger: list[dict[str, Any]], timeline: Timeline, statuses: dict[int, str], missed: dict[int, int] | None = None
) -> Verdict:
    """Judge a ledger of job-slow's four slots; ``statuses`` (and ``missed``) are its history records."""
    timeline.stopped_ms = S + 30_000
    missed = missed or {}
    history = {
        "job-slow": [
            SimpleNamespace(slot_ms=slot, status=st, manual=False, missed=missed.get(slot, 0))
            for slot, st in statuses.items()
        ]
    }
    return judge(
        backend="memory",
        lease=True,
        ledger=ledger,
        expected={"job-slow": SLOTS},
        history=history,
        timeline=timeline,
        options={"lease_ms": 8000, "jitter_ms": 0, "max_attempts": 3},
        slow_job="job-slow",
        persistent=True,
        instances=3,
        jobs=1,
    )


def test_a_dead_run_that_made_the_next_slot_skip_and_was_then_abandoned_breaks_the_promise() -> None:
    timeline = Timeline()
    timeline.instance_ended("i2-s1", S + 1000, "kill9")
    ledger = [
        *_ready("i1-s0", "i2-s1"),
        _run("start", "i2-s1", S + 100, SLOTS[0]),
        _skip("i1-s0", SLOTS[1] + 10, SLOTS[1]),
        *_ran_later_slots(),
    ]
    v = _judge(ledger, timeline, {SLOTS[0]: "abandoned", SLOTS[1]: "skipped"})
    assert v.abandoned_chains == 1
    assert any("neither ran" in line for line in v.broken)


def test_a_slot_whose_last_try_died_at_max_attempts_may_be_abandoned() -> None:
    timeline = Timeline()
    timeline.instance_ended("i2-s1", S + 3000, "term")
    timeline.instance_ended("i3-s2", S + 5000, "kill9")
    timeline.instance_ended("i4-s3", S + 8000, "kill9")
    ledger = [
        *_ready("i1-s0", "i2-s1", "i3-s2", "i4-s3"),
        _run("start", "i1-s0", S + 100, SLOTS[0], 1),
        _run("cancel", "i1-s0", S + 2000, SLOTS[0], 1),  # lease lost; i1 lives on
        _run("start", "i2-s1", S + 2500, SLOTS[0], 2),
        _run("cancel", "i2-s1", S + 3010, SLOTS[0], 2),  # cancelled by its SIGTERM: handed over
        _run("start", "i3-s2", S + 3400, SLOTS[0], 2),  # a hand-over goes on as the same attempt
        _run("start", "i4-s3", S + 7500, SLOTS[0], 3),
        _skip("i1-s0", SLOTS[1] + 10, SLOTS[1]),
        *_ran_later_slots(),
    ]
    v = _judge(ledger, timeline, {SLOTS[0]: "abandoned", SLOTS[1]: "skipped"})
    assert v.duplicates == [] and v.broken == []
    assert v.abandoned == 1 and v.abandoned_chains == 0
    assert any("attempt 3 died" in line for line in v.warnings)
    assert len(v.hand_over_ms) == 1 and len(v.take_over_ms) == 2


def test_a_lease_lost_before_the_instance_was_stopped_is_a_take_over_not_a_hand_over() -> None:
    timeline = Timeline()
    timeline.instance_ended("i1-s0", S + 9000, "term")
    ledger = [
        *_ready("i1-s0", "i2-s1"),
        _run("start", "i1-s0", S + 100, SLOTS[0], 1),
        _run("cancel", "i1-s0", S + 2000, SLOTS[0], 1),  # lease lost, long before i1's SIGTERM
        _run("start", "i2-s1", S + 2500, SLOTS[0], 2),
        _run("end", "i2-s1", S + 4000, SLOTS[0], 2),
        *[r for slot in SLOTS[1:] for r in (_run("start", "i2-s1", slot, slot), _run("end", "i2-s1", slot + 50, slot))],
    ]
    v = _judge(ledger, timeline, {SLOTS[0]: "succeeded"})
    assert v.broken == []
    assert v.take_over_ms == [500] and v.hand_over_ms == []


def test_slots_covered_by_a_run_that_superseded_the_dead_run_are_coalesced_not_lost() -> None:
    timeline = Timeline()
    timeline.instance_ended("i2-s1", S + 1000, "kill9")
    later = [
        {**_run("start", "i1-s0", SLOTS[2], SLOTS[2]), "missed": 3},
        _run("end", "i1-s0", SLOTS[2] + 50, SLOTS[2]),
        _run("start", "i1-s0", SLOTS[3], SLOTS[3]),
        _run("end", "i1-s0", SLOTS[3] + 50, SLOTS[3]),
    ]
    ledger = [
        *_ready("i1-s0", "i2-s1"),
        _run("start", "i2-s1", S + 100, SLOTS[0]),
        _skip("i1-s0", SLOTS[1] + 10, SLOTS[1]),
        *later,
    ]
    v = _judge(ledger, timeline, {SLOTS[0]: "abandoned", SLOTS[1]: "skipped"})
    assert v.broken == [] and v.abandoned_chains == 0


def _handed_over_ledger(second_fencing: int) -> list[dict[str, Any]]:
    return [
        *_ready("i1-s0", "i2-s1"),
        {**_run("start", "i1-s0", S + 100, SLOTS[0], 1), "fencing": 1},
        {**_run("cancel", "i1-s0", S + 2010, SLOTS[0], 1), "fencing": 1},  # cancelled by its SIGTERM
        {**_run("start", "i2-s1", S + 2500, SLOTS[0], 1), "fencing": second_fencing},
        {**_run("end", "i2-s1", S + 4000, SLOTS[0], 1), "fencing": second_fencing},
        *[r for slot in SLOTS[1:] for r in (_run("start", "i2-s1", slot, slot), _run("end", "i2-s1", slot + 50, slot))],
    ]


def test_a_run_handed_over_goes_on_as_the_same_attempt_and_is_no_duplicate() -> None:
    timeline = Timeline()
    timeline.instance_ended("i1-s0", S + 2000, "term")
    v = _judge(_handed_over_ledger(second_fencing=2), timeline, {SLOTS[0]: "succeeded"})
    assert v.duplicates == [] and v.broken == []
    assert v.hand_over_ms == [490] and v.take_over_ms == []


def test_one_grant_started_twice_is_a_duplicate_even_when_the_runs_do_not_overlap() -> None:
    timeline = Timeline()
    timeline.instance_ended("i1-s0", S + 2000, "term")
    ledger = _handed_over_ledger(second_fencing=1)
    for rec in ledger[3:5]:
        rec["instance"] = "i1-s0"  # the same instance, attempt and fencing token: one grant run twice
    v = _judge(ledger, timeline, {SLOTS[0]: "succeeded"})
    assert len(v.duplicates) == 1


def _taken_back_ledger(first_cancel: int) -> list[dict[str, Any]]:
    """i1 runs slot 0 under fencing 1, gives it up (its heartbeat lapsed: handed over, attempt
    kept) and takes it back under fencing 2, then runs it to its end (a chaos run on SQLite)."""
    return [
        *_ready("i1-s0"),
        {**_run("start", "i1-s0", S + 100, SLOTS[0], 1), "fencing": 1},
        {**_run("cancel", "i1-s0", first_cancel, SLOTS[0], 1), "fencing": 1},
        {**_run("start", "i1-s0", S + 3000, SLOTS[0], 1), "fencing": 2},
        {**_run("end", "i1-s0", S + 5000, SLOTS[0], 1), "fencing": 2},
        *[r for slot in SLOTS[1:] for r in (_run("start", "i1-s0", slot, slot), _run("end", "i1-s0", slot + 50, slot))],
    ]


def test_one_instance_running_one_attempt_under_two_fencing_tokens_in_turn_is_no_duplicate() -> None:
    # Keyed by instance and attempt alone, the first run's interval ended at the second's stop.
    v = _judge(_taken_back_ledger(first_cancel=S + 2000), Timeline(), {SLOTS[0]: "succeeded"})
    assert v.duplicates == [] and v.broken == []
    overlapping = _judge(_taken_back_ledger(first_cancel=S + 3500), Timeline(), {SLOTS[0]: "succeeded"})
    assert len(overlapping.duplicates) == 1


def test_slots_coalesced_into_a_catch_up_that_was_skipped_for_overlap_are_skipped_not_lost() -> None:
    # SLOTS[1]'s claims got no answer (the store's lock held); the catch-up coalesced it into
    # SLOTS[2], which was skipped for overlap with a run still going (a chaos run on SQLite).
    ledger = [
        *_ready("i1-s0"),
        _run("start", "i1-s0", SLOTS[0], SLOTS[0]),
        _run("end", "i1-s0", SLOTS[0] + 50, SLOTS[0]),
        {
            "e": "lost",
            "instance": "i1-s0",
            "t": SLOTS[1] + 10,
            "job": "job-slow",
            "slot": SLOTS[1],
            "reason": "unknown",
        },
        _skip("i1-s0", SLOTS[2] + 10, SLOTS[2]),
        _run("start", "i1-s0", SLOTS[3], SLOTS[3]),
        _run("end", "i1-s0", SLOTS[3] + 50, SLOTS[3]),
    ]

    def judged(missed: int) -> Verdict:
        return _judge(ledger, Timeline(), {SLOTS[2]: "skipped"}, {SLOTS[2]: missed})

    assert judged(missed=2).broken == [] and judged(missed=2).skipped_overlap == 2
    assert len(judged(missed=0).broken) == 1  # a skip that covered nothing leaves SLOTS[1] lost
