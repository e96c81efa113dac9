"""Which slots skipped for a dead run are revived: by the catch-up policy, within max_late_ms, in time."""

from __future__ import annotations

from dataclasses import replace

from anarchon._revive import dead_slot, revival_plan
from anarchon.backend import Grant
from anarchon.memory import MemoryBackend
from anarchon_conformance import make_job

S = 1_800_000_000_000  # a whole minute


def test_coalesce_revives_the_newest_slot_counting_the_others() -> None:
    job = make_job(MemoryBackend(), "every-second")
    assert revival_plan(job, S, S + 1500, S + 2000) == [(S + 1000, 1)]
    assert revival_plan(job, S, S + 3500, S + 4000) == [(S + 3000, 3)]
    assert revival_plan(job, S, S + 1000, S + 2000) == [], "the slot the death was known at is not revived"


def test_nothing_older_than_max_late_and_nothing_without_catch_up_or_overlap_skip() -> None:
    job = make_job(MemoryBackend(), "late", max_late_ms=2500)
    assert revival_plan(job, S, S + 10_500, S + 11_000) == [(S + 10_000, 2)]  # 9 s and 10 s: 8 s is too old
    assert revival_plan(make_job(MemoryBackend(), "none", catch_up="none"), S, S + 3500, S + 4000) == []
    assert revival_plan(make_job(MemoryBackend(), "allow", overlap="allow"), S, S + 3500, S + 4000) == []


def test_the_dead_slot_is_the_taken_over_run_or_the_superseded_one() -> None:
    base = Grant(job="j", slot_ms=S + 2000, token="t", instance="i", attempt=1, fencing=1, lease_ms=30_000)
    assert dead_slot(base) is None
    assert dead_slot(replace(base, attempt=2)) == S + 2000
    assert dead_slot(replace(base, supersedes=S)) == S
    assert dead_slot(replace(base, attempt=2, manual=True)) is None
