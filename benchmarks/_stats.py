"""Measurement shared by every backend: percentiles, interleaved timing, throughput.

Each figure is taken the same way for the raw primitive and for anarchon's
claim, call by call in turn, so a busy moment of the machine hurts both alike;
compare ratios within one run, never absolute times across runs.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

__all__ = ["Latency", "interleaved", "percentile", "throughput"]


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..100); NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


@dataclass(frozen=True)
class Latency:
    """Milliseconds of one operation over many calls."""

    p50: float
    p99: float
    max: float
    count: int

    @classmethod
    def of(cls, samples_ms: Sequence[float]) -> Latency:
        return cls(
            percentile(samples_ms, 50), percentile(samples_ms, 99), max(samples_ms, default=math.nan), len(samples_ms)
        )


#: One timed call: gets the call's index; may return an untimed follow-up (finishing a run).
Op = Callable[[int], Awaitable[object]]


async def interleaved(n: int, ops: Sequence[Op], warmup: int = 50) -> list[list[float]]:
    """Milliseconds per call of each op, taking turns call by call."""
    for i in range(warmup):
        for op in ops:
            await _follow(await op(-1 - i))
    out: list[list[float]] = [[] for _ in ops]
    for i in range(n):
        for op, samples in zip(ops, out, strict=True):
            t = time.perf_counter()
            after = await op(i)
            samples.append((time.perf_counter() - t) * 1000)
            await _follow(after)
    return out


async def _follow(after: object) -> None:
    if callable(after):
        result = after()
        if asyncio.iscoroutine(result):
            await result


async def throughput(workers: int, seconds: float, op: Callable[[int, int], Awaitable[object]]) -> float:
    """Completed calls per second of ``workers`` loops running ``op(worker, i)`` at once."""
    stop = time.perf_counter() + seconds
    counts = [0] * workers

    async def work(w: int) -> None:
        while time.perf_counter() < stop:
            await op(w, counts[w])
            counts[w] += 1

    started = time.perf_counter()
    await asyncio.gather(*(work(w) for w in range(workers)))
    return sum(counts) / (time.perf_counter() - started)
