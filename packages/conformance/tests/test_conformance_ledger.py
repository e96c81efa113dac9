"""The fleet ledger read while instances still append to it."""

from __future__ import annotations

import json
from pathlib import Path

from anarchon.every_instance import instance_job_name
from anarchon_conformance._fleet_every import _twice
from anarchon_conformance.ledger import RE_RUN_EDGE, read_ledger, reconcile


def test_a_line_still_being_written_is_left_for_the_next_read(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    whole = [{"e": "start", "slot": 1}, {"e": "end", "slot": 1}]
    text = "".join(json.dumps(r) + "\n" for r in whole)
    path.write_text(text + '{"e": "start", "slo')  # a read that ends inside an append (a CI failure)
    assert read_ledger(path) == whole
    path.write_text(text)
    assert read_ledger(path) == whole
    assert read_ledger(tmp_path / "none.jsonl") == []


def _run(instance: str, attempt: int, t: int, *, recorded: bool) -> list[dict[str, object]]:
    """The lines one run of job x's slot 1000 leaves: started at t, ended 10 ms later."""
    run = {"job": "x", "slot": 1000, "instance": instance, "attempt": attempt, "fencing": attempt}
    lines = [{"e": "start", "t": t, **run}, {"e": "end", "t": t + 10, **run}]
    return lines + ([{"e": "recorded", "t": t + 20, **run}] if recorded else [])


def test_a_take_over_of_a_run_ended_but_never_recorded_is_a_re_run_not_a_duplicate() -> None:
    # a ended the job and was killed before the backend recorded it; b took it over (docs/concepts.md).
    ledger = _run("a", 1, 100, recorded=False) + _run("b", 2, 1600, recorded=True)
    report = reconcile(ledger, {"x": [1000]}, {"a": 120})
    assert (report.duplicates, report.re_runs, report.re_run_slots) == (0, 1, [("x", 1000)])
    assert report.rows[0].outcome == "re-run"
    assert report.rows[0].runs == (("a", 1, RE_RUN_EDGE), ("b", 2, "succeeded"))


def test_a_second_end_is_a_duplicate_when_the_first_was_recorded_or_its_runner_lived() -> None:
    recorded_first = _run("a", 1, 100, recorded=True) + _run("b", 2, 1600, recorded=True)
    alive = _run("a", 1, 100, recorded=False) + _run("b", 2, 1600, recorded=True)
    same_attempt = _run("a", 1, 100, recorded=False) + _run("b", 1, 1600, recorded=True)
    for ledger, killed in ((recorded_first, {"a": 120}), (alive, {}), (same_attempt, {"a": 120})):
        report = reconcile(ledger, {"x": [1000]}, killed)
        assert (report.duplicates, report.re_runs) == (1, 0), (ledger, killed)
        assert report.rows[0].outcome == "DUPLICATE"


def _copy_run(instance: str, attempt: int, t: int, *, recorded: bool) -> list[dict[str, object]]:
    """An every-instance run: the ledger's start names the job, the backend's record its instance's copy."""
    run = {"job": "x", "slot": 1000, "instance": instance, "attempt": attempt}
    done = {**run, "job": instance_job_name("x", instance)}
    return [{"e": "start", "t": t, **run}] + ([{"e": "recorded", "t": t + 20, **done}] if recorded else [])


def test_an_every_instance_slot_taken_over_after_its_runner_was_killed_is_not_run_twice() -> None:
    cut_short = _copy_run("i-2", 1, 0, recorded=False) + _copy_run("i-2", 2, 30_000, recorded=True)
    assert _twice(cut_short, victim="i-2") == []  # the restart took over the run the kill cut short
    decided = _copy_run("i-2", 1, 0, recorded=True) + _copy_run("i-2", 2, 30_000, recorded=True)
    assert _twice(decided, victim="i-2") == [("i-2", "x", 1000, [(1, 0), (2, 30_000)])]
    assert _twice(cut_short, victim="i-1") != []  # an instance never killed has no take-over to excuse
    same_grant = _copy_run("i-2", 1, 0, recorded=False) + _copy_run("i-2", 1, 5, recorded=False)
    assert _twice(same_grant, victim="i-2") != []
