"""Jobs for every instance across processes: each live instance runs each slot once; a dead one misses its own.

Mixed into :class:`~anarchon_conformance.FleetTests`; gated on ``lease`` and
``registry`` (the view of who missed what reads the registry). Three
instances run two every-second jobs with ``every_instance=True``; one is
killed (``SIGKILL``), and restarted with the same id once the others ran
three slots without it. From the ledger: no instance ran a slot twice (the
restart none it ran before, but a take-over of the run the kill cut short),
the two that lived ran every slot, the killed
one every slot but those while it was down; and
:func:`anarchon.every_instance.instance_runs` shows those slots missed for
it alone.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from anarchon.every_instance import InstanceSlot, instance_job_name, instance_runs
from anarchon.plugins import PluginManager

from ._requires import requires
from .fleet import Fleet, build_backend

__all__ = ["FleetEveryInstanceTests"]


def _view(spec: dict[str, Any], name: str) -> list[InstanceSlot]:
    async def call() -> list[InstanceSlot]:
        built = build_backend(**spec)
        backend = PluginManager().resolve(built) if isinstance(built, str) else built
        await backend.start()
        try:
            return await instance_runs(backend, name, slots=30)
        finally:
            await backend.close()

    return asyncio.run(call())


def _ran(instance: str, after_ms: int) -> Callable[[dict[str, Any]], bool]:
    return lambda r: r["e"] == "end" and r["instance"] == instance and r["slot"] > after_ms


def _twice(ledger: list[dict[str, Any]], victim: str) -> list[tuple[str, str, int, list[tuple[int, int]]]]:
    """Each (instance, job, slot) started more often than the lease rules allow, with its starts' (attempt, t).

    One start per slot, but for the killed instance's run cut short by the kill: the restart may take it
    over as a later attempt once its lease ran out (the at-least-once edge of docs/concepts.md), unless the
    backend had recorded the earlier attempt's end (then the slot was decided, and a second run is a duplicate).
    """
    runs: dict[tuple[str, str, int], list[tuple[int, int]]] = {}
    for r in ledger:
        if r["e"] == "start":
            runs.setdefault((r["instance"], r["job"], r["slot"]), []).append((r["attempt"], r["t"]))
    recorded = {(r["instance"], r["job"], r["slot"], r["attempt"]) for r in ledger if r["e"] == "recorded"}
    found = []
    for (instance, job, slot), started in runs.items():
        attempts = sorted(started)
        copy = instance_job_name(job, instance)  # what the backend recorded the run under
        cut_short = instance == victim and not any((instance, copy, slot, a) in recorded for a, _ in attempts[:-1])
        if len({a for a, _ in attempts}) < len(attempts) or (len(attempts) > 1 and not cut_short):
            found.append((instance, job, slot, attempts))
    return found


class FleetEveryInstanceTests:
    """``every_instance=True``: one run per live instance per slot, and a dead instance's gap shows as its own."""

    @requires("multi_process", "lease", "registry")
    def test_every_instance_runs_each_slot_once_and_a_dead_ones_slots_are_missed_for_it_alone(
        self, fleet: Callable[..., Fleet], fleet_backend: dict[str, Any]
    ) -> None:
        with fleet(instances=3, jobs=2, options={"every_instance": True}) as f:
            f.start()
            first, victim, third = f.members
            f.wait_for(_ran(victim.instance, f.ready_ms or 0), timeout=20)
            killed_at = f.kill(victim)
            for member in (first, third):  # three slots pass without it
                f.wait_for(_ran(member.instance, killed_at + 3000), timeout=20)
            spawned_ms = time.time_ns() // 1_000_000
            back = f.restart(instance=victim.instance)
            restarted_ms = time.time_ns() // 1_000_000
            for member in (first, third):
                f.wait_for(_ran(member.instance, restarted_ms + 2000), timeout=20)
            # Killed between a claim and its finish, the old process left its copy's run "running" under the
            # same id, which the restart's heartbeat keeps alive: the copy's slots are skipped for overlap until
            # that run's lease (30 s) runs out and it is taken over. Otherwise the restart runs the next slot.
            f.wait_for(_ran(back.instance, restarted_ms + 2000), timeout=60)
            view = _view(fleet_backend, "job-00")  # while they live: the view shows live instances
            f.stop()
        ledger = f.ledger()
        starts = [r for r in ledger if r["e"] == "start"]
        twice = _twice(ledger, victim.instance)
        assert not twice, f"an instance ran a slot twice (the restart one it ran before?): {twice}"
        window = range((f.ready_ms or 0) // 1000 * 1000 + 2000, restarted_ms + 2000, 1000)
        for job in ("job-00", "job-01"):
            for member in (first, third):
                ran = {r["slot"] for r in starts if r["instance"] == member.instance and r["job"] == job}
                missing = [s for s in window if s not in ran]
                assert not missing, f"{member.instance}, alive throughout, did not run {job} at {missing}"
            ran = {r["slot"] for r in starts if r["instance"] == victim.instance and r["job"] == job}
            down = [s for s in window if killed_at + 1000 <= s < spawned_ms]
            assert down and not set(down) & ran, f"{victim.instance} ran {job} while it was down: {set(down) & ran}"
        missed = {(s.instance, s.slot_ms) for s in view if s.missed}
        assert {(victim.instance, s) for s in down} <= missed, f"the dead instance's gap is not shown missed: {view}"
        others = [m for m in missed if m[0] != victim.instance and m[1] in window]
        assert not others, f"slots shown missed for instances that ran them: {others}"
