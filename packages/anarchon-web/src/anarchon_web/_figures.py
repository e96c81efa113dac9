"""Simple figures over a job's history: success rate, duration and start-delay percentiles.

Percentiles are nearest-rank (the value of a real run, never an
interpolation), so "p90 = 812 ms" means a run took 812 ms.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from anarchon import Run, RunStatus
from anarchon.run import datetime_to_ms

__all__ = ["Figures", "figures", "percentile"]

_ENDED = frozenset(
    {RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.TIMED_OUT, RunStatus.CANCELLED, RunStatus.ABANDONED}
)
_POINTS = (50, 90, 99)


def percentile(sorted_values: Sequence[int], p: float) -> int | None:
    """Nearest-rank percentile of already sorted values; ``None`` for no values."""
    if not sorted_values:
        return None
    rank = max(1, math.ceil(p / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


@dataclass(frozen=True)
class Figures:
    runs: int
    ended: int
    succeeded: int
    success_rate: float | None
    duration_ms: dict[str, int | None]
    start_delay_ms: dict[str, int | None]
    statuses: dict[str, int]
    take_overs: int
    catch_ups: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _spread(values: list[int]) -> dict[str, int | None]:
    values.sort()
    out = {f"p{p}": percentile(values, p) for p in _POINTS}
    out["max"] = values[-1] if values else None
    return out


def figures(runs: Sequence[Run]) -> Figures:
    """Figures over the given records (those history keeps: about ``history_size`` per job).

    The success rate counts runs that ended (skipped slots did not run, a
    running one has not ended). The start delay is from the slot to the
    start of a first, scheduled, non-catch-up attempt: how late the fleet
    picks a slot up (jitter included); a take-over or catch-up starts late on
    purpose and would hide it.
    """
    ended = [r for r in runs if r.status in _ENDED]
    succeeded = sum(1 for r in ended if r.status is RunStatus.SUCCEEDED)
    durations = [r.duration_ms for r in ended if r.duration_ms is not None]
    delays = [
        datetime_to_ms(r.started_at) - r.slot_ms
        for r in runs
        if r.started_at is not None and r.attempt == 1 and not r.manual and not r.catch_up
        and r.status not in (RunStatus.SKIPPED, RunStatus.PAUSED)
    ]  # fmt: skip
    statuses: dict[str, int] = {}
    for r in runs:
        statuses[r.status.value] = statuses.get(r.status.value, 0) + 1
    return Figures(
        runs=len(runs),
        ended=len(ended),
        succeeded=succeeded,
        success_rate=succeeded / len(ended) if ended else None,
        duration_ms=_spread(durations),
        start_delay_ms=_spread(delays),
        statuses=statuses,
        take_overs=sum(1 for r in runs if r.attempt > 1),
        catch_ups=sum(1 for r in runs if r.catch_up),
    )
