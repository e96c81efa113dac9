"""Redis full (``maxmemory`` reached, ``maxmemory-policy noeviction``): one warning, nothing twice, recovery.

Three real schedulers share a private server; the test fills it with filler
keys until it refuses writes, holds the outage 4 s, deletes the filler and
checks that claims resume by themselves. A slow job with a short lease is
running when the server fills: its renewals and its finish must go through,
or the run is stopped and, once Redis has room, taken over and run again.

Measured before the fix (two runs): 28 and 37 WARNING/ERROR lines (16-24
``job …: claim failed on its Redis keys`` ERRORs, 5-6 backend warnings as
each recovery ended at once and the next claim failed again, 3 heartbeat
failures, 3 heartbeat lapses), none naming the cause or the fix, and the
slow job's run stopped by the lapse and run a second time by a take-over.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.exceptions import OutOfMemoryError

from anarchon import RunContext, RunStatus, Scheduler, hookimpl
from anarchon_conformance import eventually
from anarchon_redis import RedisBackend

from .conftest import RedisServer

pytestmark = pytest.mark.slow

INSTANCES = 3
QUICK = [f"q{i}" for i in range(8)]
#: The limit the filler reaches, and the margin it is then lowered by: the instances' own writes (a few
#: hundred bytes) would otherwise get in whenever memory moves below the limit by a few KB.
LIMIT, MARGIN = 16 * 1024 * 1024, 1024 * 1024
OUTAGE_S = 4.0
SLOW_S = 2.5
#: The scheduler's recovery probes with a back-off doubling from 0.2 s (+-20 %), from the first failure
#: (up to about 1 s after the fill): after a 4 s outage the probe that finds room comes within about 5 s
#: of the deletion, and claims resume at the next slot.
RESUME_WITHIN_MS = 7000


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class Ledger:
    """What the jobs and the schedulers' hooks saw: starts ``(job, slot, attempt, instance, catch_up, missed)``."""

    starts: list[tuple[str, int, int, str, bool, int]] = field(default_factory=list)
    ends: list[tuple[str, int, int]] = field(default_factory=list)  # job, slot, when (epoch ms)
    failed: set[str] = field(default_factory=set)
    slow_started: asyncio.Event = field(default_factory=asyncio.Event)
    all_failed: asyncio.Event = field(default_factory=asyncio.Event)

    def job(self, name: str) -> Any:
        async def run(ctx: RunContext) -> None:
            self.starts.append((name, ctx.slot_ms, ctx.attempt, ctx.instance, ctx.catch_up, ctx.missed))
            if name == "slow":
                self.slow_started.set()
                await asyncio.sleep(SLOW_S)
            self.ends.append((name, ctx.slot_ms, _now_ms()))

        return run

    @hookimpl
    def anarchon_backend_error(self, scheduler: Scheduler, operation: str, error: BaseException) -> None:
        self.failed.add(scheduler.instance_id)
        if len(self.failed) == INSTANCES:
            self.all_failed.set()


async def _fill(raw: Redis) -> int:
    """Filler keys until Redis refuses a write; then the limit goes ``MARGIN`` below what is used."""
    value = b"x" * 65_536
    n = 0
    while True:
        try:
            await raw.set(f"filler:{n}", value)
        except OutOfMemoryError:
            break
        n += 1
    used = int((await raw.info("memory"))["used_memory"])
    await raw.config_set("maxmemory", used - MARGIN)
    return n


async def test_a_full_redis_gives_one_warning_runs_nothing_twice_and_recovers_by_itself(
    unstarted_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    server = unstarted_server
    server.args = ("--maxmemory", str(LIMIT), "--maxmemory-policy", "noeviction")
    server.start()
    caplog.set_level(logging.INFO)
    ledger = Ledger()
    raw = Redis.from_url(server.url)
    reader = RedisBackend(url=server.url)
    schedulers = [
        Scheduler(RedisBackend(url=server.url), instance_id=f"i-{n}", plugins=[ledger]) for n in range(INSTANCES)
    ]
    for s in schedulers:
        for name in QUICK:
            s.add(name, "* * * * * *", ledger.job(name), jitter_ms=0)
        s.add("slow", "*/3 * * * * *", ledger.job("slow"), jitter_ms=0, lease_ms=1500)  # renewed every 0.5 s
    began = time.monotonic()
    try:
        await asyncio.gather(*(s.start() for s in schedulers))
        started_ms = _now_ms()
        await asyncio.wait_for(ledger.slow_started.wait(), 10)
        full_ms = _now_ms()
        fillers = await _fill(raw)
        await asyncio.wait_for(ledger.all_failed.wait(), 10)  # every instance has met the full server
        slow_slot = next(s for j, s, *_ in ledger.starts if j == "slow")

        async def slow_recorded() -> bool:
            history = await reader.history("slow")  # a read: a full Redis still answers it
            return any(r.slot_ms == slow_slot and r.status is RunStatus.SUCCEEDED for r in history)

        await eventually(slow_recorded, SLOW_S + 1, what="the slow run's finish recorded while Redis is full")
        await asyncio.sleep(max(0.0, OUTAGE_S - (_now_ms() - full_ms) / 1000))  # the outage's length
        freed_ms = _now_ms()
        await raw.delete(*(f"filler:{i}" for i in range(fillers)))
        await raw.config_set("maxmemory", LIMIT)

        def resumed_at(after_ms: int) -> int | None:
            """The slot from which every quick job had started a scheduled slot due after ``after_ms``."""
            firsts = [min((s for j, s, _, _, c, _ in ledger.starts if j == n and s > after_ms and not c), default=0)
                      for n in QUICK]  # fmt: skip
            return max(firsts) if all(firsts) else None

        resumed = await eventually(lambda: resumed_at(freed_ms), 15, what="claims resume after the filler is deleted")
        await eventually(lambda: resumed_at(resumed + 1000), 5, what="a second slot after the outage")
        settled_ms = _now_ms()
        slow_history = await reader.history("slow")
    finally:
        stopping_ms = _now_ms()
        await asyncio.gather(*(s.stop(grace_ms=int(SLOW_S * 1000) + 1000) for s in schedulers), return_exceptions=True)
        await raw.aclose()
        await reader.close()
    runtime = time.monotonic() - began

    first_slot, last_slot = (started_ms // 1000 + 1) * 1000, (stopping_ms // 1000 - 1) * 1000
    due = {(n, s) for n in QUICK for s in range(first_slot, last_slot + 1, 1000)}
    runs = Counter((j, s) for j, s, *_ in ledger.starts)
    twice = sorted(k for k, count in runs.items() if count > 1)
    not_run = sorted(due - set(runs))
    in_outage = [k for k in due if full_ms <= k[1] < resumed]
    catch_ups = {j: (s, m) for j, s, _, _, c, m in ledger.starts if c and j in QUICK}
    loud = [r for r in caplog.records if r.levelno >= logging.WARNING and full_ms <= r.created * 1000 <= settled_ms]
    kinds = Counter(f"{r.levelname} {r.name}: {r.msg}"[:100] for r in loud)
    print(
        f"\nfull Redis: {fillers} filler keys of 64 KiB; outage {(freed_ms - full_ms) / 1000:.1f} s; claims resumed "
        f"{(resumed - freed_ms) / 1000:.1f} s after the filler was deleted; test {runtime:.1f} s\n"
        f"quick slots due {len(due)}, {len(in_outage)} of them from the fill to the resumption; runs "
        f"{sum(runs.values())}; not run {len(not_run)}; catch-up runs {len(catch_ups)} stating "
        f"{sum(m for _, m in catch_ups.values())} missed; run twice {len(twice)}\n"
        f"WARNING/ERROR records from the fill to a slot after the resumption: {len(loud)}"
    )
    for kind, count in kinds.most_common():
        print(f"  {count:4d} x {kind}")
    if loud:
        print(f"  first: {loud[0].getMessage()}")

    assert twice == [], f"slots run twice: {twice}"
    recorded = [(r.status, r.attempt) for r in slow_history if r.slot_ms == slow_slot]
    assert recorded == [(RunStatus.SUCCEEDED, 1)], f"the run that ended while Redis was full: {recorded}"
    assert len(loud) <= INSTANCES, f"{len(loud)} warnings for one outage (one per instance at most): {kinds}"
    text = "\n".join(r.getMessage() for r in loud)
    assert "out of memory" in text and "maxmemory" in text and "free memory or raise maxmemory" in text, text
    assert resumed - freed_ms < RESUME_WITHIN_MS, "claims did not resume within a few seconds of the deletion"
    caught_up = Counter(j for j, _, _, _, c, _ in ledger.starts if c and j in QUICK)
    assert caught_up == Counter(QUICK), f"one catch-up run per job: {caught_up}"
    for name in QUICK:  # what was lost is counted: the catch-up run states every slot missed, itself included
        slot, missed = catch_ups[name]
        gap = [s for j, s in not_run if j == name and s < slot]
        assert missed == len(gap) + 1, (name, slot, missed, gap)
