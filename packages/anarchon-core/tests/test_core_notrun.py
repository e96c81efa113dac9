"""Slots no run ran, told once by the winner of the next slot (anarchon._notrun)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest

from anarchon._notrun import report_not_run
from anarchon.claims import Grant
from anarchon.hookspecs import anarchon_slots_not_run
from anarchon.job import Job
from anarchon.observers import Observers
from anarchon.options import JobOptions

T0 = 1_800_000_000_000


class Heard:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int, int, int, int | None]] = []

    def notify(self, hook: Callable[..., None], **kw: Any) -> None:
        assert hook is anarchon_slots_not_run
        self.calls.append((kw["outcome"], kw["first_ms"], kw["last_ms"], kw["count"], kw["covered_by"]))


def job(**options: Any) -> Job:
    return Job("tick", "* * * * * *", print, JobOptions(**options))


def grant(second: int, **fields: Any) -> Grant:
    return Grant(job="tick", slot_ms=T0 + second * 1000, instance="i", token="t", **fields)


def told(j: Job, g: Grant) -> list[tuple[str, int, int, int, int | None]]:
    heard = Heard()
    report_not_run(j, g, Observers(heard, None))  # type: ignore[arg-type]
    return heard.calls


def test_slots_between_the_mark_and_the_slot_were_missed(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, "anarchon.runs"):
        calls = told(job(catch_up="none"), grant(10, previous_mark=T0 + 6000))
    assert calls == [("missed", T0 + 7000, T0 + 9000, 3, None)]
    (record,) = caplog.records
    assert record.levelno == logging.WARNING and "3 slot(s)" in record.getMessage()
    assert "nothing runs for them" in record.getMessage()


def test_missed_slots_a_catch_up_covers_are_told_at_info(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, "anarchon.runs"):
        calls = told(job(catch_up="coalesce"), grant(10, previous_mark=T0 + 8000))
    assert calls == [("missed", T0 + 9000, T0 + 9000, 1, T0 + 10_000)]
    assert [r.levelno for r in caplog.records] == [logging.INFO]


def test_a_superseded_dead_run_was_lost() -> None:
    calls = told(job(), grant(10, previous_mark=T0 + 9000, supersedes=T0 + 7000))
    assert calls == [("lost", T0 + 7000, T0 + 7000, 1, T0 + 10_000)]


def test_nothing_is_told_without_a_gap_or_for_a_manual_run() -> None:
    assert told(job(), grant(10, previous_mark=T0 + 9000)) == []
    assert told(job(), grant(10)) == []
    assert told(job(), grant(10, previous_mark=T0 + 2000, manual=True)) == []
