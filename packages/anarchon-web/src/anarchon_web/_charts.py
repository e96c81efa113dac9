"""The job page's charts: durations, start delays and outcomes over a time range, as SVG-ready data.

Pure functions from records to numbers: the template draws them as inline
SVG (no script, no library, nothing from outside), and the JSON view carries
the same dicts under ``"charts"``. Every coordinate is a number computed
here, so nothing from a record (a job name, an error text) reaches the SVG
except through the template's autoescaping.

The horizontal axis is the slot time (UTC), from ``since_ms`` to
``until_ms``: the page's ``from``/``to``, else the oldest and newest slot of
the records read. Durations are those of ended runs; start delays follow the
figures' rule (first, scheduled, non-catch-up attempts that started);
outcomes are the records' (as on the strip) counted per time bucket.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from anarchon import Run, RunStatus

from ._figures import _ENDED as ENDED
from ._present import start_delay_ms, utc
from ._slots import OUTCOMES, outcome_of

__all__ = ["BOX", "charts", "nice_ceiling", "span_label", "value_label"]

#: The drawing's size (the SVG's viewBox) and the plot area inside it, in SVG units.
BOX = {"width": 720, "height": 170, "left": 64, "right": 712, "top": 10, "bottom": 136}
#: How many bars the outcome chart has at most.
BUCKETS = 30
#: A range shorter than this is widened around its middle, so one record is not drawn on a pin's head.
_MIN_SPAN_MS = 60_000
_STEPS = (1, 2, 5, 10)
#: The outcome chart's bucket widths: the first at or above a thirtieth of the range.
_WIDTHS_MS = (
    [s * 1000 for s in (1, 2, 5, 10, 15, 30)]
    + [m * 60_000 for m in (1, 2, 5, 10, 15, 30)]
    + [h * 3_600_000 for h in (1, 2, 3, 6, 12, 24, 48, 168)]
)
_NOT_STARTED = (RunStatus.SKIPPED, RunStatus.PAUSED)


def nice_ceiling(value: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten at or above ``value`` (1 for 0)."""
    if value <= 0:
        return 1
    power = 10.0 ** math.floor(math.log10(value))
    return float(next(step * power for step in _STEPS if step * power >= value))


def value_label(ms: float, unit: str) -> str:
    """``250 ms`` or ``1.5 s``: a tick's label, in the chart's unit."""
    if unit == "s":
        return f"{ms / 1000:g} s"
    return f"{ms:g} ms"


def span_label(ms: int) -> str:
    """``10 s``, ``5 min``, ``6 h``: a bucket's width in words (the widths are whole units)."""
    for size, unit in ((3_600_000, "h"), (60_000, "min"), (1000, "s")):
        if ms >= size and ms % size == 0:
            return f"{ms // size} {unit}"
    return f"{ms} ms"


def _time_label(ms: int, span_ms: int) -> str:
    moment = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    if span_ms <= 10 * 60_000:
        return moment.strftime("%H:%M:%S")
    if span_ms <= 86_400_000:
        return moment.strftime("%H:%M")
    return moment.strftime("%m-%d %H:%M")


class _Frame:
    """Maps a slot time and a value to SVG coordinates."""

    def __init__(self, since_ms: int, until_ms: int, low: float, high: float) -> None:
        self.since, self.until, self.low, self.high = since_ms, until_ms, low, high

    def x(self, ms: int) -> float:
        share = (ms - self.since) / (self.until - self.since)
        return round(BOX["left"] + share * (BOX["right"] - BOX["left"]), 1)

    def y(self, value: float) -> float:
        share = (value - self.low) / (self.high - self.low)
        return round(BOX["bottom"] - share * (BOX["bottom"] - BOX["top"]), 1)


def _range(runs: Sequence[Run], since_ms: int | None, until_ms: int | None) -> tuple[int, int]:
    slots = [r.slot_ms for r in runs]
    start = since_ms if since_ms is not None else min(slots, default=until_ms)
    end = until_ms if until_ms is not None else max(slots, default=start)
    if start is None or end is None:  # no record and no bound: an empty chart of the last minute
        start = end = 0
    if end - start < _MIN_SPAN_MS:
        middle = (start + end) // 2
        start, end = middle - _MIN_SPAN_MS // 2, middle + _MIN_SPAN_MS // 2
    return start, end


def _x_ticks(frame: _Frame) -> list[dict[str, Any]]:
    span = frame.until - frame.since
    moments = [frame.since + span * i // 4 for i in range(5)]
    return [{"ms": ms, "utc": utc(ms), "label": _time_label(ms, span), "x": frame.x(ms)} for ms in moments]


def _series(points: list[tuple[int, int, str]], since_ms: int, until_ms: int, what: str) -> dict[str, Any]:
    """A scatter of (slot_ms, value_ms, outcome); its scale starts at 0 (or below, for negative values)."""
    values = [v for _, v, _ in points]
    high = nice_ceiling(max(values, default=0))
    low = -nice_ceiling(-min(values)) if values and min(values) < 0 else 0
    unit = "s" if max(high, -low) >= 10_000 else "ms"
    frame = _Frame(since_ms, until_ms, low, high)
    ticks = sorted({low, 0, high / 2, high} if low else {0, high / 2, high})
    shown = [{"slot_ms": s, "value_ms": v, "outcome": o, "x": frame.x(s), "y": frame.y(v)}
             for s, v, o in points]  # fmt: skip
    return {
        "title": what,
        "unit": unit,
        "count": len(points),
        "max_ms": max(values, default=None),
        "scale": {"low_ms": low, "high_ms": high},
        "points": shown,
        # one path of dots per outcome (a zero-length stroke with round caps each): a short page for 1,000 runs
        "paths": [
            {"outcome": word, "d": " ".join(f"M{p['x']} {p['y']}h0" for p in shown if p["outcome"] == word)}
            for word in OUTCOMES
            if any(p["outcome"] == word for p in shown)
        ],
        "y_ticks": [{"value_ms": t, "label": value_label(t, unit), "y": frame.y(t)} for t in ticks],
        "x_ticks": _x_ticks(frame),
    }


def _outcomes(runs: Sequence[Run], since_ms: int, until_ms: int) -> dict[str, Any]:
    span = until_ms - since_ms + 1  # both ends included
    width_ms = next((w for w in _WIDTHS_MS if w * BUCKETS >= span), math.ceil(span / BUCKETS))
    count = math.ceil(span / width_ms)
    counts: list[dict[str, int]] = [{} for _ in range(count)]
    for run in runs:
        if since_ms <= run.slot_ms <= until_ms:
            bucket = counts[(run.slot_ms - since_ms) // width_ms]
            word = outcome_of(run)
            bucket[word] = bucket.get(word, 0) + 1
    high = nice_ceiling(max((sum(c.values()) for c in counts), default=0))
    frame = _Frame(since_ms, until_ms, 0, high)
    step = (BOX["right"] - BOX["left"]) * width_ms / (until_ms - since_ms)
    buckets = []
    for i, found in enumerate(counts):
        start = since_ms + i * width_ms
        end = min(start + width_ms - 1, until_ms)
        bars, below = [], 0
        for word in OUTCOMES:  # stacked in the legend's order
            if found.get(word):
                top = frame.y(below + found[word])
                bars.append({"outcome": word, "label": OUTCOMES[word], "count": found[word],
                             "y": top, "height": round(frame.y(below) - top, 1)})  # fmt: skip
                below += found[word]
        buckets.append({"from_ms": start, "to_ms": end, "from": utc(start), "to": utc(end), "counts": found,
                        "x": frame.x(start), "width": round(max(1.0, step - 1), 1), "bars": bars})  # fmt: skip
    return {
        "title": "outcomes",
        "unit": "runs",
        "count": sum(sum(c.values()) for c in counts),
        "bucket_ms": width_ms,
        "bucket": span_label(width_ms),
        "scale": {"low": 0, "high": high},
        "buckets": buckets,
        "y_ticks": [{"value": t, "label": f"{t:g}", "y": frame.y(t)} for t in (0, high / 2, high) if t == int(t)],
        "x_ticks": _x_ticks(frame),
    }


def _first_scheduled(run: Run) -> bool:
    """A run whose start delay says how late the fleet picked its slot up (the figures' rule)."""
    return run.attempt == 1 and not run.manual and not run.catch_up and run.status not in _NOT_STARTED


def charts(runs: Sequence[Run], since_ms: int | None = None, until_ms: int | None = None) -> dict[str, Any]:
    """The three charts of ``runs`` whose slot is in ``[since_ms, until_ms]`` (a bound of ``None``:
    the oldest or newest slot of ``runs``). JSON-ready: the page draws it, the API returns it."""
    inside = [r for r in runs if (since_ms is None or r.slot_ms >= since_ms)
              and (until_ms is None or r.slot_ms <= until_ms)]  # fmt: skip
    start, end = _range(inside, since_ms, until_ms)
    oldest_first = sorted(inside, key=lambda r: (r.slot_ms, r.manual))
    durations = [(r.slot_ms, r.duration_ms, outcome_of(r)) for r in oldest_first
                 if r.status in ENDED and r.duration_ms is not None]  # fmt: skip
    delays = [(r.slot_ms, delay, outcome_of(r)) for r in oldest_first if _first_scheduled(r)
              and (delay := start_delay_ms(r)) is not None]  # fmt: skip
    return {
        "range": {"from_ms": start, "to_ms": end, "from": utc(start), "to": utc(end)},
        "runs": len(inside),
        "box": dict(BOX),
        "durations": _series(durations, start, end, "duration"),
        "start_delays": _series(delays, start, end, "start delay"),
        "outcomes": _outcomes(inside, start, end),
    }
