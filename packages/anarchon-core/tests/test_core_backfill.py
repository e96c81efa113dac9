"""Backfill on the memory backend: the API's checks and counts, and the ``anarchon backfill`` command."""

from __future__ import annotations

import json
import sys
import textwrap
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from anarchon import BackfillError, MemoryBackend, MemoryStore, RunContext, RunStatus, Scheduler
from anarchon.cli import main
from anarchon.errors import JobNotFoundError

UTC = timezone.utc


def _hour_ago() -> datetime:
    """A whole UTC hour at least an hour in the past: every slot of a range ending there is due."""
    return datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)


def _scheduler(store: MemoryStore, ledger: Counter[int], **options: object) -> Scheduler:
    scheduler = Scheduler(MemoryBackend(store))

    def job(ctx: RunContext) -> None:
        ledger[ctx.slot_ms] += 1

    scheduler.add("tick", "*/10 * * * *", job, **options)
    return scheduler


async def test_dry_run_lists_the_slots_and_changes_nothing() -> None:
    ledger: Counter[int] = Counter()
    store = MemoryStore()
    scheduler = _scheduler(store, ledger)
    end = _hour_ago()
    summary = await scheduler.backfill("tick", end - timedelta(hours=1), end, dry_run=True)
    assert summary.dry_run and len(summary.would_run) == 7 and summary.ran == []
    assert await scheduler.history("tick") == [] and not ledger


async def test_the_second_backfill_finds_every_slot_already_run() -> None:
    ledger: Counter[int] = Counter()
    store = MemoryStore()
    a, b = _scheduler(store, ledger), _scheduler(store, ledger)
    end = _hour_ago()
    first = await a.backfill("tick", end - timedelta(hours=1), end, concurrency=3)
    second = await b.backfill("tick", end - timedelta(minutes=30), end + timedelta(minutes=20))
    assert (len(first.ran), first.already_run) == (7, [])
    assert (len(second.ran), len(second.already_run)) == (2, 4)
    assert set(ledger.values()) == {1} and len(ledger) == 9
    runs = await a.history("tick")
    assert all(r.status is RunStatus.SUCCEEDED and not r.manual and r.attempt == 1 for r in runs)


async def test_a_failing_slot_is_counted_failed_and_recorded() -> None:
    scheduler = Scheduler(MemoryBackend())

    def job(ctx: RunContext) -> None:
        if ctx.slot.minute == 40:
            raise ValueError("no data for 40")

    scheduler.add("tick", "*/10 * * * *", job)
    end = _hour_ago()
    summary = await scheduler.backfill("tick", end - timedelta(minutes=30), end)
    assert [datetime.fromtimestamp(s / 1000, UTC).minute for s in summary.failed] == [40]
    assert len(summary.ran) == 3
    (failed,) = [r for r in await scheduler.history("tick") if r.status is RunStatus.FAILED]
    assert failed.error == "ValueError: no data for 40"


async def test_naive_times_are_the_jobs_zone() -> None:
    scheduler = Scheduler(MemoryBackend())
    scheduler.add("tick", "0 * * * *", lambda: None, timezone="Asia/Kolkata")  # UTC+05:30: slots at :30 UTC
    end = _hour_ago().astimezone(ZoneInfo("Asia/Kolkata")).replace(minute=0, tzinfo=None)
    summary = await scheduler.backfill("tick", end - timedelta(hours=2), end, dry_run=True)
    wanted = [(end - timedelta(hours=h)).replace(tzinfo=ZoneInfo("Asia/Kolkata")) for h in (2, 1, 0)]
    assert summary.would_run == [int(w.timestamp()) * 1000 for w in wanted]


@pytest.mark.parametrize(
    ("shift_from", "shift_to", "options", "message"),
    [
        (timedelta(0), timedelta(hours=-1), {}, "is after --to"),
        (timedelta(0), timedelta(hours=3), {}, "is in the future"),
        (timedelta(hours=-24), timedelta(0), {"history_size": 50}, "raise history_size to at least 145"),
        (timedelta(hours=-3), timedelta(0), {"history_ttl_ms": 3_600_000}, "older than job 'tick'"),
    ],
)
async def test_a_range_history_cannot_tell_or_that_cannot_run_is_refused(
    shift_from: timedelta, shift_to: timedelta, options: dict[str, object], message: str
) -> None:
    ledger: Counter[int] = Counter()
    scheduler = _scheduler(MemoryStore(), ledger, **options)
    end = _hour_ago()
    with pytest.raises(BackfillError, match=message):
        await scheduler.backfill("tick", end + shift_from, end + shift_to)
    assert not ledger and await scheduler.history("tick") == []


async def test_unknown_job_and_bad_concurrency_are_refused() -> None:
    scheduler = _scheduler(MemoryStore(), Counter())
    end = _hour_ago()
    with pytest.raises(JobNotFoundError):
        await scheduler.backfill("nope", end - timedelta(hours=1), end)
    with pytest.raises(BackfillError, match="concurrency=0"):
        await scheduler.backfill("tick", end - timedelta(hours=1), end, concurrency=0)


APP = """
from anarchon import Scheduler, MemoryBackend

scheduler = Scheduler(MemoryBackend(), instance_id="cli")

@scheduler.job("*/10 * * * *", timezone="Europe/Berlin")
def tick():
    pass

@scheduler.job("* * * * * *", history_size=100_000)
def every_second():
    pass
"""


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "bfcliapp.py").write_text(textwrap.dedent(APP))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("bfcliapp", None)
    return "bfcliapp:scheduler"


def _berlin(moment: datetime) -> str:
    return moment.astimezone(ZoneInfo("Europe/Berlin")).replace(tzinfo=None).isoformat(timespec="minutes")


def test_cli_dry_run_and_json_summary(app: str, capsys: pytest.CaptureFixture[str]) -> None:
    end = _hour_ago()
    args = ["backfill", app, "tick", "--from", _berlin(end - timedelta(minutes=30)), "--to", _berlin(end)]
    assert main([*args, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.count("would run ") == 4 and "dry run: 4 slots would run, 0 already run" in out
    assert main([*args, "--json", "--concurrency", "2"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["counts"] == {"ran": 4, "already_run": 0, "skipped": 0, "failed": 0}
    assert summary["ran"][0] == (end - timedelta(minutes=30)).isoformat()


def test_cli_prints_progress_lines_without_a_terminal(app: str, capsys: pytest.CaptureFixture[str]) -> None:
    end = _hour_ago()
    assert main(["backfill", app, "tick", "--from", _berlin(end - timedelta(minutes=90)), "--to", _berlin(end)]) == 0
    captured = capsys.readouterr()
    assert "backfill: 10/10 slots decided" in captured.err
    assert "ran 10, already run 0, skipped 0, failed 0" in captured.out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["nope", "--from", "2026-01-01T00:00", "--to", "2026-01-01T01:00"], "has no job 'nope'; its jobs: "),
        (["every_second", "--from", "@FROM", "--to", "@TO"], "pass --yes to run them all"),
        (["tick", "--from", "2026-01-01T02:00", "--to", "2026-01-01T01:00"], "is after --to"),
    ],
)
def test_cli_bad_input_exits_2_with_the_fix(
    app: str, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    end = _hour_ago()
    extra = [
        {"@FROM": (end - timedelta(hours=1)).isoformat(), "@TO": end.isoformat()}.get(word, word) for word in extra
    ]
    assert main(["backfill", app, *extra]) == 2
    assert message in capsys.readouterr().err


def test_cli_refuses_a_time_that_is_no_iso_8601(app: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["backfill", app, "tick", "--from", "yesterday", "--to", "2026-01-01T01:00"])
    assert exited.value.code == 2
    assert "'yesterday' is not an ISO 8601 time" in capsys.readouterr().err
