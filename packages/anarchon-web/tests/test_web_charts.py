"""The charts' data and geometry, on records built by hand; each expected coordinate is worked out here
from the plot box (x from 64 to 712, y from 136 at the bottom to 10 at the top), not read back."""

from __future__ import annotations

from typing import Any

import pytest

from anarchon import Run, RunStatus
from anarchon.run import ms_to_datetime
from anarchon_web._charts import charts, nice_ceiling, span_label, value_label

BASE = 1_796_000_000_000  # a whole minute
S = 1000
LEFT, RIGHT, TOP, BOTTOM = 64, 712, 10, 136


def run(slot_s: int, status: RunStatus = RunStatus.SUCCEEDED, took: int | None = 100, late: int | None = 20,
        **kw: Any) -> Run:  # fmt: skip
    """A record of the slot ``slot_s`` seconds after BASE, started ``late`` ms after it, ``took`` ms long."""
    slot = BASE + slot_s * S
    started = None if late is None else ms_to_datetime(slot + late)
    finished = None if started is None or took is None else ms_to_datetime(slot + late + took)  # type: ignore[operator]
    return Run(job="j", slot_ms=slot, status=status, instance="a", started_at=started, finished_at=finished,
               duration_ms=took, **kw)  # fmt: skip


def x(ms: int, since: int, until: int) -> float:
    return LEFT + (RIGHT - LEFT) * (ms - since) / (until - since)


def y(value: float, high: float, low: float = 0) -> float:
    return BOTTOM - (BOTTOM - TOP) * (value - low) / (high - low)


def test_nice_ceilings_and_labels() -> None:
    assert [nice_ceiling(v) for v in (0, 1, 3, 7, 10, 11, 130, 400, 700, 25_000)] == [
        1, 1, 5, 10, 10, 20, 200, 500, 1000, 50_000,
    ]  # fmt: skip
    assert value_label(250, "ms") == "250 ms" and value_label(1500, "s") == "1.5 s"
    assert [span_label(ms) for ms in (1000, 15_000, 120_000, 7_200_000, 1500)] == [
        "1 s",
        "15 s",
        "2 min",
        "2 h",
        "1500 ms",
    ]


def test_durations_and_delays_are_placed_on_the_range_s_scale() -> None:
    runs = [run(0, took=100, late=10), run(60, took=250, late=40), run(120, RunStatus.FAILED, took=400, late=30)]
    since, until = BASE, BASE + 240 * S
    got = charts(runs, since, until)
    assert got["range"]["from_ms"] == since and got["range"]["to_ms"] == until and got["runs"] == 3
    durations = got["durations"]
    assert durations["unit"] == "ms" and durations["scale"] == {"low_ms": 0, "high_ms": 500}
    assert durations["max_ms"] == 400
    assert [(p["x"], p["y"]) for p in durations["points"]] == [
        (pytest.approx(x(BASE, since, until), abs=0.05), pytest.approx(y(100, 500), abs=0.05)),
        (pytest.approx(x(BASE + 60 * S, since, until), abs=0.05), pytest.approx(y(250, 500), abs=0.05)),
        (pytest.approx(x(BASE + 120 * S, since, until), abs=0.05), pytest.approx(y(400, 500), abs=0.05)),
    ]
    assert (durations["points"][1]["x"], durations["points"][1]["y"]) == (226.0, 73.0)  # 64 + 648/4, 136 - 126/2
    # dots drawn as one path per outcome, in the legend's order
    assert [p["outcome"] for p in durations["paths"]] == ["succeeded", "failed"]
    assert durations["paths"][0]["d"] == "M64.0 110.8h0 M226.0 73.0h0"
    assert [t["label"] for t in durations["y_ticks"]] == ["0 ms", "250 ms", "500 ms"]
    assert [t["y"] for t in durations["y_ticks"]] == [BOTTOM, 73.0, TOP]
    assert [t["x"] for t in durations["x_ticks"]] == [64.0, 226.0, 388.0, 550.0, 712.0]
    assert durations["x_ticks"][0]["label"] == "00:53:20"  # a short range: seconds shown
    delays = got["start_delays"]
    assert [p["value_ms"] for p in delays["points"]] == [10, 40, 30] and delays["scale"]["high_ms"] == 50
    assert delays["points"][1]["y"] == pytest.approx(y(40, 50), abs=0.05)


def test_only_runs_in_the_range_count_and_only_first_scheduled_attempts_have_a_delay() -> None:
    runs = [
        run(-60),  # before the range
        run(0, late=15),
        run(30, RunStatus.SKIPPED, took=None, late=None),
        run(40, manual=True, late=900),
        run(50, catch_up=True, missed=3, late=5000),
        run(55, attempt=2, late=7000),
        run(58, RunStatus.RUNNING, took=None, late=25),
        run(61),  # after it
    ]
    got = charts(runs, BASE, BASE + 60 * S)
    assert got["runs"] == 6
    slots = [(p["slot_ms"] - BASE) // S for p in got["durations"]["points"]]
    assert slots == [0, 40, 50, 55]  # ended runs with a duration; not the skipped nor the running one
    assert [(p["slot_ms"] - BASE) // S for p in got["start_delays"]["points"]] == [0, 58]
    assert [p["value_ms"] for p in got["start_delays"]["points"]] == [15, 25]
    counted: dict[str, int] = {}
    for bucket in got["outcomes"]["buckets"]:
        for word, n in bucket["counts"].items():
            counted[word] = counted.get(word, 0) + n
    assert counted == {"succeeded": 2, "skipped": 1, "caught-up": 1, "taken-over": 1, "running": 1}
    assert got["outcomes"]["count"] == 6


def test_outcome_bars_stack_per_bucket() -> None:
    runs = [run(0), run(0, manual=True), run(1, RunStatus.FAILED), run(299, RunStatus.TIMED_OUT)]
    since, until = BASE, BASE + 300 * S - 1  # 300 s: thirty buckets of ten seconds
    outcomes = charts(runs, since, until)["outcomes"]
    assert outcomes["bucket_ms"] == 10 * S and outcomes["bucket"] == "10 s" and len(outcomes["buckets"]) == 30
    first, last = outcomes["buckets"][0], outcomes["buckets"][-1]
    assert (first["from_ms"], first["to_ms"]) == (BASE, BASE + 10 * S - 1)
    assert first["counts"] == {"succeeded": 2, "failed": 1} and last["counts"] == {"timed-out": 1}
    assert all(not b["bars"] for b in outcomes["buckets"][1:-1])
    assert outcomes["scale"] == {"low": 0, "high": 5}  # three runs in the fullest bucket: the scale ends at 5
    succeeded, failed = first["bars"]
    assert (succeeded["outcome"], succeeded["count"]) == ("succeeded", 2)
    assert succeeded["y"] == pytest.approx(y(2, 5), abs=0.05) and succeeded["height"] == pytest.approx(
        126 * 2 / 5, abs=0.1
    )
    assert failed["y"] == pytest.approx(y(3, 5), abs=0.05) and failed["height"] == pytest.approx(126 / 5, abs=0.1)
    assert first["x"] == LEFT and last["x"] == pytest.approx(x(BASE + 290 * S, since, until), abs=0.05)
    assert first["width"] == pytest.approx((RIGHT - LEFT) / 30 - 1, abs=0.1)
    assert [t["label"] for t in outcomes["y_ticks"]] == ["0", "5"]  # no half run


def test_the_default_range_is_the_records_and_a_single_record_sits_in_the_middle() -> None:
    got = charts([run(0), run(120), run(600)])
    assert (got["range"]["from_ms"], got["range"]["to_ms"]) == (BASE, BASE + 600 * S)
    assert [p["x"] for p in got["durations"]["points"]] == [
        64.0,
        pytest.approx(x(BASE + 120 * S, BASE, BASE + 600 * S), abs=0.05),
        712.0,
    ]
    alone = charts([run(0)])
    assert (alone["range"]["from_ms"], alone["range"]["to_ms"]) == (BASE - 30 * S, BASE + 30 * S)
    assert alone["durations"]["points"][0]["x"] == (LEFT + RIGHT) / 2


def test_long_durations_in_seconds_negative_delays_below_zero_and_an_empty_range() -> None:
    got = charts([run(0, took=25_000, late=-30), run(60, took=4_000, late=10)], BASE, BASE + 60 * S)
    assert got["durations"]["unit"] == "s"
    assert [t["label"] for t in got["durations"]["y_ticks"]] == ["0 s", "25 s", "50 s"]
    delays = got["start_delays"]
    assert delays["scale"] == {"low_ms": -50, "high_ms": 10}
    assert [t["label"] for t in delays["y_ticks"]] == ["-50 ms", "0 ms", "5 ms", "10 ms"]
    assert delays["points"][0]["y"] == pytest.approx(y(-30, 10, -50), abs=0.05)
    empty = charts([run(0)], BASE + 3600 * S, BASE + 7200 * S)
    assert empty["runs"] == 0 and empty["durations"]["points"] == [] and empty["durations"]["paths"] == []
    assert empty["outcomes"]["count"] == 0 and empty["durations"]["max_ms"] is None
    assert [t["label"] for t in empty["durations"]["x_ticks"]] == ["01:53", "02:08", "02:23", "02:38", "02:53"]
