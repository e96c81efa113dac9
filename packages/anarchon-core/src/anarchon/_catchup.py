"""Which missed slots a catch-up claims, per the job's ``catch_up`` policy.

The mark rule (``backend.py``) shapes this: a scheduled claim of a slot at or
below the job's mark is ``LOST``, and every won claim moves the mark up to
its slot. So the slots of one catch-up are claimed oldest first, in one
batch: each finds the mark below it, and no newer slot (the timer's, or
another instance's) can come between them and move the mark past the rest.

* ``"coalesce"``: the newest missed slot, once; its run's ``missed`` counts
  every slot it covers;
* ``"each"``: the newest ``catch_up_max`` missed slots within the window,
  each its own run (``missed`` 1); older ones are not run, and the first
  run's ``missed`` counts them with its own slot (as ``covering`` does);
* ``"none"``: nothing.
"""

from __future__ import annotations

from typing import NamedTuple

from .job import Job

__all__ = ["CatchUpPlan", "plan_catch_up"]


class CatchUpPlan(NamedTuple):
    """The slots to claim, oldest first, and the ``missed`` count each claim carries."""

    slots: list[int]
    missed: list[int]


def _newest(job: Job, after_ms: int, until_ms: int, count: int) -> list[int]:
    """The newest ``count`` slots in ``(after_ms, until_ms]``, oldest first.

    The start is found by bisecting on whole seconds (slots are whole seconds)
    with ``count_between`` capped at ``count``, so a long window of a frequent
    job costs about ``40 * count`` steps, never a walk through the window.
    """
    low, high = after_ms // 1000, until_ms // 1000
    while low < high:  # the latest second t with count_between(t, until) >= count
        middle = (low + high + 1) // 2
        found, _ = job.schedule.count_between(middle * 1000, until_ms, cap=count)
        if found >= count:
            low = middle
        else:
            high = middle - 1
    return [s for s in job.schedule.slots(low * 1000, count) if s <= until_ms]


def plan_catch_up(job: Job, mark: int, now_ms: int) -> CatchUpPlan:
    """The claims that catch up the slots in ``(mark, now_ms]`` that are within the job's window."""
    options = job.options
    if not options.catches_up:
        return CatchUpPlan([], [])
    missed, newest = job.schedule.count_between(mark, now_ms)
    if newest is None or now_ms - newest > options.catch_up_ms:
        return CatchUpPlan([], [])
    if options.catch_up == "coalesce":
        return CatchUpPlan([newest], [missed])
    bound = options.catch_up_max or 1
    window_start = max(mark, now_ms - options.catch_up_ms - 1)
    in_window, _ = job.schedule.count_between(window_start, now_ms)
    slots = _newest(job, window_start, now_ms, min(in_window, bound))
    return CatchUpPlan(slots, [1] * len(slots))
