"""Claim cost: anarchon's ``Backend.claim`` against the raw primitive, and a contended race.

Sequential figures time one claim of one job per call, taking turns with the
raw primitive call by call; on a lease backend the run is then finished
(untimed), so each claim meets the steady state a scheduler leaves: the job's
previous run done. Concurrent figures run 16 instances (16 backend objects,
16 raw clients) at once, each on its own jobs; there runs are left open, so
on lease backends jobs allow overlap with the shortest lease (100 ms), and
each claim also marks the previous, expired run abandoned: one write more
than the steady state, where a long lease would grow the live set instead.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from anarchon.backend import Backend, Claim, ClaimResult, Grant
from anarchon.job import Job
from anarchon.run import Run, RunStatus

from ._stats import Latency, interleaved, throughput
from ._target import RawClient, Target

__all__ = ["ClaimFigures", "ContendedFigures", "contended", "overhead"]

WORKERS = 16
BATCH = 100
JOBS_PER_WORKER = 20
RACERS = 5


@dataclass(frozen=True)
class ClaimFigures:
    primitive: str
    raw: Latency
    claim: Latency
    raw_per_s: float
    claim_per_s: float
    #: Median ms of one ``claim()`` of ``BATCH`` jobs due together, and of ``BATCH`` calls of one claim each.
    batch_ms: float
    singles_ms: float

    @property
    def ratio_p50(self) -> float:
        return self.claim.p50 / self.raw.p50

    @property
    def ratio_throughput(self) -> float:
        """Time per claim against time per raw operation, under 16-way load."""
        return self.raw_per_s / self.claim_per_s


@dataclass(frozen=True)
class ContendedFigures:
    slots: int
    racers: int
    latency: Latency
    double_wins: int
    no_winner: int


def _job(backend: Backend, name: str, **options: Any) -> Job:
    return Job(name, "* * * * * *", _noop, options=backend.job_options(name, options))


def _noop() -> None:
    return None


def _first_slot() -> int:
    return (time.time_ns() // 1_000_000 // 1000) * 1000


def _finisher(backend: Backend, grant: Grant | None) -> Callable[[], Coroutine[Any, Any, bool]] | None:
    """Finish a lease backend's run as the scheduler would (untimed), so the next claim is not an overlap."""
    if grant is None or not backend.capabilities.lease:
        return None
    run = Run(
        grant.job,
        grant.slot_ms,
        RunStatus.SUCCEEDED,
        grant.instance,
        attempt=grant.attempt,
        fencing=grant.fencing,
        duration_ms=0,
    )
    return lambda: backend.finish(grant, run)


async def _start_all(backends: list[Backend]) -> None:
    for backend in backends:  # one at a time: schema and stream creation race politely
        await backend.start()


async def overhead(target: Target, ns: str, calls: int, seconds: float) -> ClaimFigures:
    (backend,) = target.instances(ns, 1)
    raw = target.raw(ns)
    await backend.start()
    await raw.open()
    try:
        job = _job(backend, "seq")
        await backend.prepare([job])
        slots = iter(range(_first_slot(), 2**62, 1000))
        keys = iter(range(2**62))

        async def via_claim(_: int) -> object:
            slot = next(slots)
            (result,) = await backend.claim([Claim(job, slot, "bench", uuid.uuid4().hex, slot)])
            if not result.won:
                raise RuntimeError(f"{target.name}: sequential claim of a new slot was not won: {result}")
            return _finisher(backend, result.grant)

        async def via_raw(_: int) -> object:
            if not await raw.once(f"seq-{next(keys)}"):
                raise RuntimeError(f"{target.name}: the raw primitive lost a key nobody else took")
            return None

        raw_ms, claim_ms = await interleaved(calls, [via_raw, via_claim])
        batch_ms, singles_ms = await _batch(backend, max(3, calls // 200))
    finally:
        await raw.close()
        await backend.close()
    raw_rate, claim_rate = await _concurrent(target, ns, seconds)
    return ClaimFigures(
        raw.description, Latency.of(raw_ms), Latency.of(claim_ms), raw_rate, claim_rate, batch_ms, singles_ms
    )


async def _batch(backend: Backend, rounds: int) -> tuple[float, float]:
    """The claims due at one instant in one call (the scheduler's way) against one call each."""
    jobs = [_job(backend, f"batch-{k:03d}") for k in range(BATCH)]
    await backend.prepare(jobs)
    slot = _first_slot() + 7_200_000
    together: list[float] = []
    apart: list[float] = []
    for _ in range(rounds):
        for timings, grouped in ((together, True), (apart, False)):
            slot += 1000
            claims = [Claim(j, slot, "bench", uuid.uuid4().hex, slot) for j in jobs]
            t = time.perf_counter()
            if grouped:
                results = await backend.claim(claims)
            else:
                results = [(await backend.claim([c]))[0] for c in claims]
            timings.append((time.perf_counter() - t) * 1000)
            for r in results:
                finish = _finisher(backend, r.grant)
                if finish is not None:
                    await finish()
    return Latency.of(together).p50, Latency.of(apart).p50


async def _concurrent(target: Target, ns: str, seconds: float) -> tuple[float, float]:
    backends = target.instances(ns, WORKERS)
    raws: list[RawClient] = [target.raw(ns) for _ in range(WORKERS)]
    await _start_all(backends)
    for r in raws:
        await r.open()
    try:
        # Runs stay open here; a short lease keeps each job's live runs to one or two (the next claim marks
        # the expired one abandoned), where a long one would grow the set every claim looks at.
        short = {"overlap": "allow", "lease_ms": 100} if backends[0].capabilities.lease else {}
        jobs = [[_job(b, f"tp-{w}-{k}", **short) for k in range(JOBS_PER_WORKER)] for w, b in enumerate(backends)]
        for b, js in zip(backends, jobs, strict=True):
            await b.prepare(js)
        base = _first_slot()

        async def claim_op(w: int, i: int) -> None:
            job = jobs[w][i % JOBS_PER_WORKER]
            slot = base + (i // JOBS_PER_WORKER) * 1000
            (result,) = await backends[w].claim([Claim(job, slot, f"i{w}", uuid.uuid4().hex, slot)])
            if not result.won:
                raise RuntimeError(f"{target.name}: concurrent claim of a new slot was not won: {result}")

        async def raw_op(w: int, i: int) -> None:
            await raws[w].once(f"tp-{w}-{i}")

        # Warm both (connections, statement and script caches), then measure each in turn.
        await throughput(WORKERS, min(0.5, seconds), raw_op)
        raw_rate = await throughput(WORKERS, seconds, lambda w, i: raw_op(w, 1_000_000 + i))
        claim_rate = await throughput(WORKERS, seconds, claim_op)
    finally:
        for r in raws:
            await r.close()
        for b in backends:
            await b.close()
    return raw_rate, claim_rate


async def contended(target: Target, ns: str, slots: int) -> ContendedFigures:
    """``RACERS`` instances claim each slot at once; every racer's answer is timed."""
    backends = target.instances(ns, RACERS)
    await _start_all(backends)
    try:
        jobs = [_job(b, "race") for b in backends]
        for b, j in zip(backends, jobs, strict=True):
            await b.prepare([j])
        base = _first_slot() + 3_600_000
        latencies: list[float] = []
        double_wins = no_winner = 0

        async def one(i: int, slot: int) -> tuple[float, ClaimResult]:
            t = time.perf_counter()
            (result,) = await backends[i].claim([Claim(jobs[i], slot, f"racer-{i}", uuid.uuid4().hex, slot)])
            return (time.perf_counter() - t) * 1000, result

        for s in range(slots):
            slot = base + s * 1000
            answers = await asyncio.gather(*(one(i, slot) for i in range(RACERS)))
            winners = [(i, r) for i, (_, r) in enumerate(answers) if r.won]
            latencies.extend(ms for ms, _ in answers)
            double_wins += len(winners) > 1
            no_winner += not winners
            for i, result in winners:
                finish = _finisher(backends[i], result.grant)
                if finish is not None:
                    await finish()
    finally:
        for b in backends:
            await b.close()
    return ContendedFigures(slots, RACERS, Latency.of(latencies), double_wins, no_winner)
