"""A concurrency group across real processes: the limit holds, every slot runs once, a kill -9 frees its places.

Mixed into :class:`~anarchon_conformance.FleetTests`; gated on ``groups``.
Three instances run eight jobs of one group, every 10 s, each 2 s long,
with the group limited to 3 (16 run-seconds due per 10 s, 30 allowed: the
slots queue, then drain). The test kills (``SIGKILL``) an instance while it
holds two places, and reads from the runs' own start and end stamps that no
more than 3 ran at once, that the killed runs were taken over within the
liveness TTL and a few polls, and that every slot ran once, none past its
wait bound. Default options, but the group.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from anarchon.liveness import LIVENESS_TTL_MS
from anarchon.plugins import PluginManager

from ._requires import requires
from .fleet import Fleet, assert_every_slot_once, build_backend
from .ledger import most_at_once

__all__ = ["FleetGroupTests"]

GROUP = "fleet-reports"
LIMIT = 3
EVERY_S = 10
JOB_SECONDS = 2.0
#: A place of a killed holder is free once its heartbeat expired; its run is taken over then and
#: asks again, first in line. The bound adds the take-over poll and a loaded machine's slack.
TAKEN_OVER_MS = LIVENESS_TTL_MS + 3500
#: A run waiting in turn starts this soon after the end that freed its place (a poll, a loaded machine).
TURN_MS = 1500


def _set_limit(spec: dict[str, Any], limit: int) -> None:
    async def call() -> None:
        built = build_backend(**spec)
        backend = PluginManager().resolve(built) if isinstance(built, str) else built
        await backend.start()
        try:
            await backend.set_group(GROUP, limit)
        finally:
            await backend.close()

    asyncio.run(call())


def _in_flight(ledger: list[dict[str, Any]]) -> dict[str, list[tuple[str, int, int]]]:
    """Per instance, the runs started and not ended (nor cancelled)."""
    open_: dict[tuple[str, int, int], str] = {}
    for r in ledger:
        key = (r.get("job", ""), int(r.get("slot", 0)), int(r.get("attempt", 0)))
        if r["e"] == "start":
            open_[key] = r["instance"]
        elif r["e"] in ("end", "cancel"):
            open_.pop(key, None)
    out: dict[str, list[tuple[str, int, int]]] = {}
    for key, instance in open_.items():
        out.setdefault(instance, []).append(key)
    return out


def _most_at_once(ledger: list[dict[str, Any]], killed: dict[str, int], stopped_ms: int) -> int:
    """The most runs going at once, from their start and end stamps; a killed instance's runs end at the kill."""
    ends: dict[tuple[str, int, int], int] = {}
    for r in ledger:
        if r["e"] in ("end", "cancel"):
            ends[(r["job"], int(r["slot"]), int(r["attempt"]))] = int(r["t"])
    return most_at_once(
        (int(r["t"]), ends.get((r["job"], int(r["slot"]), int(r["attempt"])), killed.get(r["instance"], stopped_ms)))
        for r in ledger
        if r["e"] == "start"
    )


class FleetGroupTests:
    """Three processes share a group's limit; a kill -9 of one holding two places frees both."""

    @requires("multi_process", "groups")
    def test_a_group_limit_holds_across_processes_and_a_kill_9(
        self, fleet: Callable[..., Fleet], fleet_backend: dict[str, Any]
    ) -> None:
        _set_limit(fleet_backend, LIMIT)
        with fleet(
            instances=3, jobs=8, cron=f"*/{EVERY_S} * * * * *", options={"group": GROUP}, job_seconds=JOB_SECONDS
        ) as f:
            f.start()
            deadline = time.monotonic() + 6 * EVERY_S
            while True:
                holders = {i: runs for i, runs in _in_flight(f.ledger()).items() if len(runs) >= 2}
                if holders:
                    break
                assert time.monotonic() < deadline, "no instance ever held two places at once"
                time.sleep(0.02)
            victim, held = next(iter(holders.items()))
            killed_at = f.kill(f.member(victim))
            last = (killed_at // (EVERY_S * 1000) + 2) * EVERY_S * 1000
            for i in range(8):
                name = f"job-{i:02d}"
                f.wait_for(lambda r, n=name: r["e"] == "end" and r.get("job") == n and r["slot"] == last, timeout=40)
            f.stop()
            stopped = f.stopping_ms or killed_at
        ledger = f.ledger()
        most = _most_at_once(ledger, {victim: killed_at}, stopped)
        assert most <= LIMIT, f"{most} runs of a group limited to {LIMIT} ran at once across the fleet"
        retaken = {
            (r["job"], r["slot"]): int(r["t"]) - killed_at
            for r in ledger
            if r["e"] == "start" and r["attempt"] > 1 and (r["job"], r["slot"], r["attempt"] - 1) in set(held)
        }
        assert len(retaken) == len(held), f"runs of the killed holder not taken over: held {held}, retaken {retaken}"
        # A re-run waits for the dead holder's place no longer than the take-over; past it, only in its
        # turn: behind older waiting slots, so it starts as another run of the group ends.
        ends = [int(r["t"]) for r in ledger if r["e"] == "end"]
        slow = {
            k: ms
            for k, ms in retaken.items()
            if ms > TAKEN_OVER_MS and not any(0 <= killed_at + ms - t <= TURN_MS for t in ends)
        }
        assert not slow, f"the killed holder's runs waited past the take-over ({TAKEN_OVER_MS} ms), not in turn: {slow}"
        late = [
            (r["job"], r["slot"], int(r["t"]) - r["slot"])
            for r in ledger
            if r["e"] == "start" and r["t"] - r["slot"] > 60_000
        ]
        assert not late, f"runs started past their wait bound (max_late_ms, 60 s): {late}"
        assert not [r for r in ledger if r["e"] == "skip"], "a slot was skipped: none waited past its bound"
        report = f.report(until_ms=last)
        print(report.summary())
        assert_every_slot_once(report, min_slots=8 * 2)
