"""Steering a fleet of real processes: a pause reaches every instance and outlives them; a trigger runs once.

Mixed into :class:`~anarchon_conformance.FleetTests` (which provides the
``fleet`` and ``fleet_backend`` fixtures); gated on ``pause`` and ``trigger``.
The test process is the operator: it pauses, resumes and triggers through a
:class:`~anarchon.Scheduler` of its own that has no jobs, as ``anarchon pause
--backend URL`` does.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from anarchon import Scheduler
from anarchon.control import RunRequest
from anarchon.run import RunStatus

from ._requires import requires
from .fleet import Fleet, build_backend

__all__ = ["FleetControlTests"]

T = TypeVar("T")

#: The pause test's job runs every this many seconds: "within one slot" then leaves room for a
#: control poll (at most 625 ms) on a loaded machine.
PAUSE_EVERY_S = 2


def _operate(spec: dict[str, Any], call: Callable[[Scheduler], Coroutine[Any, Any, T]]) -> T:
    """One call of an operator's scheduler (no jobs, not started) on the fleet's backend."""
    return asyncio.run(call(Scheduler(build_backend(**spec), instance_id="operator")))


def _pending(spec: dict[str, Any]) -> list[RunRequest]:
    async def read(scheduler: Scheduler) -> list[RunRequest]:
        backend = scheduler.backend
        await backend.start()
        try:
            return await backend.run_requests()
        finally:
            await backend.close()

    return _operate(spec, read)


def _wait(check: Callable[[], bool], what: str, timeout: float = 40.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:g} s")
        time.sleep(0.1)


def _paused_skips(f: Fleet, job: str) -> int:
    return sum(1 for r in f.ledger() if r["e"] == "skip" and r.get("job") == job and r.get("reason") == "paused")


class FleetControlTests:
    """Pause across processes and restarts; trigger among three processes."""

    @requires("multi_process", "pause")
    def test_a_pause_reaches_every_instance_within_one_slot_and_survives_a_restart(
        self, fleet: Callable[..., Fleet], fleet_backend: dict[str, Any]
    ) -> None:
        cron, options = f"*/{PAUSE_EVERY_S} * * * * *", {"jitter_ms": 200}
        with fleet(instances=3, jobs=2, cron=cron, options=options) as first:
            first.start()
            first.wait_for(lambda r: r["e"] == "end" and r.get("job") == "job-00", timeout=30)
            pause = _operate(fleet_backend, lambda s: s.pause("job-00", reason="fleet test"))
            _wait(lambda: _paused_skips(first, "job-00") >= 2, "two slots of job-00 recorded paused")
            first.stop()
        with fleet(instances=3, jobs=2, cron=cron, options=options) as second:  # every instance restarted
            second.start()
            _wait(lambda: _paused_skips(second, "job-00") >= 2, "the restarted fleet recording job-00 paused")
            # The unpaused job must have run a slot of the pause before it ends: the two paused slots
            # can both come from the restart's catch-up and the next slot, before job-01's run of it ends.
            one_slot = pause.since_ms + PAUSE_EVERY_S * 1000
            second.wait_for(lambda r: r["e"] == "end" and r.get("job") == "job-01" and r["slot"] > one_slot, timeout=30)
            ended = _operate(fleet_backend, lambda s: s.resume("job-00"))
            assert ended is not None and ended.until_ms is not None
            until = ended.until_ms
            second.wait_for(lambda r: r["e"] == "end" and r.get("job") == "job-00" and r["slot"] > until, timeout=30)
            second.stop()
        ledger = first.ledger() + second.ledger()
        starts = [r for r in ledger if r["e"] == "start" and r.get("job") == "job-00"]
        during = [r["slot"] for r in starts if one_slot < r["slot"] <= until]
        assert during == [], f"slots of job-00 ran more than one slot into the pause (or after the resume): {during}"
        assert any(r["slot"] > until for r in starts), "job-00 did not run after the resume"
        others = [r for r in ledger if r["e"] == "end" and r.get("job") == "job-01" and one_slot < r["slot"] <= until]
        assert others, (
            f"job-01 (not paused) did not run during job-00's pause ({one_slot}..{until}); its runs: "
            f"{[(r['e'], r['slot'], r['instance']) for r in ledger if r.get('job') == 'job-01']}"
        )
        runs = _operate(fleet_backend, lambda s: s.history("job-00", limit=1000))
        paused = [r for r in runs if r.status is RunStatus.PAUSED]
        assert len(paused) >= 4, f"the paused slots are not in history as 'paused': {paused}"
        assert all(pause.since_ms <= r.slot_ms <= until for r in paused)
        assert not [r for r in runs if r.status is RunStatus.SUCCEEDED and one_slot < r.slot_ms <= until]

    @requires("multi_process", "trigger")
    def test_a_trigger_runs_once_among_three_instances(
        self, fleet: Callable[..., Fleet], fleet_backend: dict[str, Any]
    ) -> None:
        with fleet(instances=3, jobs=1, cron="0 0 1 1 *") as f:
            f.start()
            requests, runs = [], []
            for _ in range(3):  # one after the other: with overlap "skip" a trigger while one runs is skipped
                request = _operate(fleet_backend, lambda s: s.trigger("job-00"))
                requests.append(request)
                runs.append(_operate(fleet_backend, lambda s, r=request: s.trigger_result(r, timeout_s=30)))  # type: ignore[misc]
            _wait(lambda: not [r for r in _pending(fleet_backend) if r.job == "job-00"], "the requests forgotten")
            f.stop()
        starts = [r for r in f.ledger() if r["e"] == "start" and r.get("job") == "job-00"]
        assert sorted(r["slot"] for r in starts) == sorted(r.slot_ms for r in requests), (
            f"three triggers among three instances started {starts}"
        )
        assert all(r["manual"] for r in starts)
        assert [(r.status, r.manual) for r in runs] == [(RunStatus.SUCCEEDED, True)] * 3
