"""A Redis without persistence restarted empty: nothing runs twice, and fencing tokens never fall.

The machine's default Redis keeps nothing on disk. Measured with the defaults
before this was handled (3 instances x 20 every-second jobs, a 0.5 s
restart): 13 slots ran twice, and tokens fell from 8 to 1.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from pathlib import Path

import pytest
from redis.exceptions import RedisError

from anarchon.backend import Claim, ClaimResult, Outcome
from anarchon.job import Job
from anarchon_conformance.fleet import Fleet
from anarchon_redis import RedisBackend

from .conftest import RedisServer, claim, make_job

pytestmark = pytest.mark.slow


async def _answer(backend: RedisBackend, c: Claim) -> ClaimResult:
    """The claim's answer, sent again (same token, as the scheduler does) while the pool reconnects."""
    for _ in range(50):
        try:
            (result,) = await backend.claim([c])
            return result
        except (RedisError, OSError):
            await asyncio.sleep(0.05)
    raise AssertionError("no answer from the restarted server")


async def test_a_slot_claimed_after_an_empty_restart_is_not_run_again_and_tokens_go_on_growing(
    unstarted_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    server = unstarted_server
    server.start()
    a, b = RedisBackend(url=server.url), RedisBackend(url=server.url)
    job = make_job("empty", overlap="allow")
    try:
        (won,) = await a.claim([claim(job, 1000, "a")])
        (lost,) = await b.claim([claim(job, 1000, "b")])
        assert won.grant is not None and lost.outcome is Outcome.LOST  # b has had an answer about the job
        (before,) = await a.claim([claim(job, 2000, "a")])  # a wins the slot; Redis then loses it
        assert before.grant is not None
        server.stop(kill=True)
        server.start()

        with caplog.at_level(logging.WARNING, logger="anarchon.redis"):
            again = await _answer(b, claim(job, 2000, "b"))
        assert again.outcome is Outcome.LOST, "the slot won before the restart was granted again"
        assert "lost what it had decided about 1 job(s)" in caplog.text and "empty" in caplog.text
        newcomer = RedisBackend(url=server.url)  # knows nothing: the mark set by b's claim stops it
        try:
            late = await _answer(newcomer, claim(job, 2000, "c"))
            assert late.outcome is Outcome.LOST
        finally:
            await newcomer.close()
        after = await _answer(a, claim(job, 3000, "a"))
        assert after.grant is not None, "the next slot runs as usual"
        assert after.grant.fencing > before.grant.fencing, (before.grant.fencing, after.grant.fencing)
        assert after.grant.previous_mark == 2000
    finally:
        await a.close()
        await b.close()


async def test_a_slot_heard_decided_is_not_granted_again_after_an_empty_restart(unstarted_server: RedisServer) -> None:
    """Ranked claims: b only heard that a won the slot (it sent no claim); Redis then lost it.

    b's claims tell Redis the newest slot b knows of, heard ones included; without them
    b knew nothing of the job and its claim won the slot again (3 slots twice in the
    fleet test above, once in nine runs).
    """
    server = unstarted_server
    server.start()
    a, b = RedisBackend(url=server.url), RedisBackend(url=server.url)
    probe, job = make_job("probe", overlap="allow"), make_job("heard", overlap="allow")
    heard: list[tuple[str, int]] = []
    watch = asyncio.ensure_future(b.watch_decided(heard.extend))
    try:
        for slot in range(1000, 60_000, 1000):  # until b's subscription hears a's claims
            await a.claim([claim(probe, slot, "a")])
            await asyncio.sleep(0.05)
            if heard:
                break
        assert heard, "b never heard a claim"
        (won,) = await a.claim([claim(job, 2000, "a")])
        assert won.grant is not None
        for _ in range(100):
            if (job.name, 2000) in heard:
                break
            await asyncio.sleep(0.02)
        assert (job.name, 2000) in heard
        server.stop(kill=True)
        server.start()
        again = await _answer(b, claim(job, 2000, "b"))
        assert again.outcome is Outcome.LOST, "a slot b heard decided was granted again after Redis forgot it"
    finally:
        watch.cancel()
        await asyncio.gather(watch, return_exceptions=True)
        await a.close()
        await b.close()


async def test_a_restart_from_an_older_snapshot_does_not_run_a_slot_again(unstarted_server: RedisServer) -> None:
    """Snapshots only: the mark goes back to the snapshot's; the claims answered since say it went back."""
    server = unstarted_server
    server.start()
    a, b = RedisBackend(url=server.url), RedisBackend(url=server.url)
    job = make_job("snapshot", overlap="allow")
    try:
        for slot in (1000, 2000):
            (won,) = await a.claim([claim(job, slot, "a")])
            (lost,) = await b.claim([claim(job, slot, "b")])
            assert won.won and lost.outcome is Outcome.LOST
            if slot == 1000:
                assert await a._redis().save()  # the snapshot the restart comes back to: mark 1000
        (before,) = await a.claim([claim(job, 3000, "a")])
        assert before.grant is not None
        server.stop(kill=True)
        server.start()
        assert (await _marks(b, job)) == {job.name: 1000}, "the restart did not go back to the snapshot"
        again = await _answer(b, claim(job, 3000, "b"))  # b heard of 2000: the mark at 1000 is behind
        assert again.outcome is Outcome.LOST, "a slot won after the snapshot was granted again"
        after = await _answer(a, claim(job, 4000, "a"))
        assert after.grant is not None and after.grant.fencing > before.grant.fencing
    finally:
        await a.close()
        await b.close()


async def _marks(backend: RedisBackend, job: Job) -> dict[str, int | None]:
    for _ in range(50):
        try:
            return await backend.marks([job])
        except (RedisError, OSError):
            await asyncio.sleep(0.05)
    raise AssertionError("no answer from the restarted server")


def test_a_fleet_across_an_empty_restart_runs_no_slot_twice(unstarted_server: RedisServer, tmp_path: Path) -> None:
    """3 instances x 20 every-second jobs, default options, Redis killed and started empty mid-run."""
    server = unstarted_server
    server.start()
    with Fleet(tmp_path / "fleet", backend=server.url, instances=3, jobs=20) as fleet:
        fleet.start(timeout=60)
        since = (fleet.ready_ms or 0) + 1000
        fleet.wait_for(lambda r: r["e"] == "start" and r["slot"] >= since + 5000, timeout=30)
        server.stop(kill=True)
        killed_ms = time.time_ns() // 1_000_000
        server.start()
        fleet.wait_for(lambda r: r["e"] == "start" and r["slot"] >= killed_ms + 5000, timeout=30)
        fleet.stop()
        report = fleet.report(since_ms=since)
        starts = [r for r in fleet.ledger() if r["e"] == "start"]
    print(f"empty restart: {report.summary()}")
    assert report.duplicates == 0, f"run twice: {report.duplicate_slots[:10]}"
    assert report.missed <= 20 * 3, "more than one slot per job and per second of the restart was lost"
    runs = Counter(r["job"] for r in starts if r["slot"] > killed_ms + 1000)
    assert len(runs) == 20, f"jobs that never ran again after the restart: {20 - len(runs)}"
    before = max(r["fencing"] for r in starts if r["t"] < killed_ms)
    after = min(r["fencing"] for r in starts if r["slot"] > killed_ms + 1000)
    assert after > before, f"fencing tokens fell from {before} to {after} across the restart"
