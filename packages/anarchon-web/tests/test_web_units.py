"""The strip's rules and the figures, on records built by hand where a rule needs an exact case."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta, timezone

from anarchon import Job, MemoryBackend, Run, RunStatus
from anarchon.run import ms_to_datetime
from anarchon_web import due_slots, strip
from anarchon_web._figures import figures, percentile

MIN = 60_000


def job(cron: str = "* * * * *", **options: object) -> Job:
    return Job("j", cron, lambda: None, MemoryBackend().job_options("j", dict(options)))


def run(slot_ms: int, status: RunStatus = RunStatus.SUCCEEDED, **kw: object) -> Run:
    return Run(job="j", slot_ms=slot_ms, status=status, instance=str(kw.pop("instance", "a")), **kw)  # type: ignore[arg-type]


def test_due_slots_are_the_job_s_own_slots_across_a_dst_change() -> None:
    # 02:30 daily in Athens: on 2026-10-25 (fall back) it runs once, at the first 02:30 (EEST, 23:30Z)
    daily = job("30 2 * * *", timezone="Europe/Athens")
    until = int(datetime(2026, 10, 27, 12, tzinfo=timezone.utc).timestamp() * 1000)
    got = [ms_to_datetime(ms) for ms in due_slots(daily, until, 4)]
    assert got == [
        datetime(2026, 10, 23, 23, 30, tzinfo=timezone.utc),
        datetime(2026, 10, 24, 23, 30, tzinfo=timezone.utc),
        datetime(2026, 10, 26, 0, 30, tzinfo=timezone.utc),
        datetime(2026, 10, 27, 0, 30, tzinfo=timezone.utc),
    ]
    # and the same as the job's own next slots from before the first of them
    assert [ms_to_datetime(ms) for ms in due_slots(daily, until, 4)] == daily.slots(got[0] - timedelta(seconds=1), 4)


def test_sparse_and_dense_jobs_give_exactly_count_slots() -> None:
    now = 1_796_000_000_000
    every_second = due_slots(job("* * * * * *"), now, 30)
    assert len(every_second) == 30 and every_second[-1] == now and every_second[0] == now - 29_000
    weekly = due_slots(job("0 9 * * 1"), now, 5)
    assert len(weekly) == 5 and all(b - a == 7 * 86_400_000 for a, b in itertools.pairwise(weekly))


def test_missed_pending_and_covered_slots() -> None:
    j = job(jitter_ms=1000, max_late_ms=30_000)
    base = 1_796_000_000_000 // MIN * MIN
    runs = [
        run(base),
        run(base + 4 * MIN, catch_up=True, missed=3),  # covers +2, +3 and itself
        run(base + 5 * MIN, status=RunStatus.FAILED, attempt=2),
        run(base + 5 * MIN + 7000, manual=True),  # a manual run is no slot
    ]
    now = base + 6 * MIN + 20_000  # +6 was due 20 s ago: still claimable (30 s + 1 s)
    got = [(s.slot_ms - base) // MIN for s in strip(j, runs, now, 50)], [s.outcome for s in strip(j, runs, now, 50)]
    assert got == (
        [0, 1, 2, 3, 4, 5, 6],
        ["succeeded", "missed", "caught-up", "caught-up", "caught-up", "failed", "pending"],
    )
    assert strip(j, [], now, 50) == []
    assert [s.outcome for s in strip(j, runs, now + 20_000, 50)][-1] == "missed"


def test_percentiles_are_nearest_rank_values_of_real_runs() -> None:
    values = list(range(1, 101))
    assert [percentile(values, p) for p in (50, 90, 99, 100)] == [50, 90, 99, 100]
    assert percentile([7], 99) == 7 and percentile([], 50) is None


def test_start_delay_leaves_out_take_overs_catch_ups_and_manual_runs() -> None:
    base = 1_796_000_000_000
    at = ms_to_datetime
    runs = [
        run(base, started_at=at(base + 120), duration_ms=10),
        run(base + MIN, started_at=at(base + MIN + 80), duration_ms=30),
        run(base + 2 * MIN, attempt=2, started_at=at(base + 2 * MIN + 9000), duration_ms=20),
        run(base + 3 * MIN, catch_up=True, missed=5, started_at=at(base + 3 * MIN + 50_000)),
        run(base + 4 * MIN, manual=True, started_at=at(base + 4 * MIN)),
        run(base + 5 * MIN, status=RunStatus.SKIPPED, started_at=at(base + 5 * MIN + 1)),
        run(base + 6 * MIN, status=RunStatus.FAILED, started_at=at(base + 6 * MIN + 300), duration_ms=5),
    ]
    f = figures(runs)
    assert f.start_delay_ms == {"p50": 120, "p90": 300, "p99": 300, "max": 300}
    assert f.ended == 6 and f.succeeded == 5 and f.duration_ms == {"p50": 10, "p90": 30, "p99": 30, "max": 30}
    assert f.statuses == {"succeeded": 5, "skipped": 1, "failed": 1}


def test_strip_cells_escape_what_a_record_holds() -> None:
    from anarchon_web._cells import cells

    evil = '"><img src=x onerror=alert(1)>'
    html = str(cells('/jobs/j"', [{"slot_ms": 1000, "outcome": "succeeded", "instance": evil, "attempt": 2}, None]))
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html and "&#34;&gt;" in html
    assert 'href="/jobs/j&#34;/runs/1000"' in html and html.endswith('<span class="cell blank"></span>')
    assert "again" in html  # attempt 2 gets the take-over band
