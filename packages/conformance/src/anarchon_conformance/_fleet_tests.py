"""Multi-process conformance: real instance processes on one store.

Some promises only show across OS processes: every slot of every job run
once while the work is shared, and a ``kill -9`` of the instance running a
job: on a lease backend answered by a take-over within the lease, on a claim
backend a run lost (never a second one), as the claim tier promises. The author
names the backend once, as :class:`~anarchon_conformance.fleet.Fleet`
keyword arguments; these tests are slow (about 25 s each).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from anarchon import Backend, Run, Scheduler
from anarchon.liveness import LIVENESS_TTL_MS
from anarchon.plugins import PluginManager
from anarchon.run import RunStatus, ms_to_datetime
from anarchon.urls import url_scheme

from ._base import SuiteBase
from ._fleet_control import FleetControlTests
from ._fleet_every import FleetEveryInstanceTests
from ._fleet_groups import FleetGroupTests
from ._requires import requires, unmet_requirement
from .fleet import Fleet, assert_every_slot_once, build_backend

__all__ = ["FleetTests"]

#: How long the instances of the exactly-once test run.
FLEET_SECONDS = 22
#: The scheduler polls for expired leases every third of the lease, give or take a quarter.
POLL_SLACK = 1.25 / 3

FleetMaker = Callable[..., Fleet]


def _backend_class(spec: dict[str, Any]) -> type[Backend]:
    if spec.get("backend_class"):
        module, _, name = spec["backend_class"].partition(":")
        cls: type[Backend] = getattr(importlib.import_module(module), name)
        return cls
    return PluginManager().schemes()[url_scheme(spec["backend"])]


def _near(fleet: Fleet, keys: list[tuple[str, int]], within_ms: int = 3000) -> list[dict[str, Any]]:
    """The ledger records of these jobs within ``within_ms`` of these slots, and every kill: what a
    failing count needs to be understood after the fleet's folder is gone."""
    return [
        r
        for r in fleet.ledger()
        if r["e"] == "die"
        or any(r.get("job") == job and abs(int(r.get("slot", 0)) - slot) <= within_ms for job, slot in keys)
    ]


@pytest.mark.slow
class FleetTests(FleetControlTests, FleetGroupTests, FleetEveryInstanceTests, SuiteBase):
    """Every slot once across processes; after ``kill -9``, a take-over on lease backends, a lost run on claim ones."""

    @pytest.fixture
    def fleet_backend(self) -> dict[str, Any]:
        """Override me: the backend of every fleet process, as ``Fleet`` keyword arguments.

        Either ``{"backend": "<url>"}`` or ``{"backend_class": "package:Class",
        "backend_kwargs": {...}}`` (JSON-able), on a namespace isolated for this test.
        """
        raise NotImplementedError(
            f"{type(self).__name__}.fleet_backend must be overridden: return Fleet keyword arguments naming the "
            "backend, e.g. {'backend': 'mydb://…'} or {'backend_class': 'pkg:MyBackend', 'backend_kwargs': {...}}"
        )

    @pytest.fixture
    def fleet(
        self, request: pytest.FixtureRequest, tmp_path: Path, fleet_backend: dict[str, Any]
    ) -> Iterator[FleetMaker]:
        cls = _backend_class(fleet_backend)
        reason = unmet_requirement(request.node, cls.capabilities, cls.name)
        if reason is not None:
            pytest.skip(reason)
        made: list[Fleet] = []

        def make(**kwargs: Any) -> Fleet:
            fleet = Fleet(tmp_path / f"fleet-{len(made)}", **fleet_backend, **kwargs)
            made.append(fleet)
            return fleet

        yield make
        for fleet in made:
            fleet.__exit__(None, None, None)

    @requires("multi_process")
    def test_processes_sharing_the_store_run_every_slot_once(self, fleet: FleetMaker) -> None:
        with fleet(instances=4, jobs=5, options={"jitter_ms": 500}) as f:
            report = f.run_for(FLEET_SECONDS)
        print(report.summary())
        assert_every_slot_once(report, min_slots=5 * (FLEET_SECONDS - 4))
        winners = {row.runs[0][0] for row in report.rows if row.runs}
        assert len(winners) > 1, f"one instance ran everything ({winners}); the processes did not share the store"

    @requires("multi_process", "lease")
    def test_kill_9_of_a_runner_is_taken_over_within_the_lease(
        self, fleet: FleetMaker, fleet_backend: dict[str, Any]
    ) -> None:
        lease_ms, jitter_ms = 1500, 300
        with fleet(
            instances=4,
            jobs=5,
            options={"jitter_ms": jitter_ms},
            slow_cron="*/6 * * * * *",
            slow_seconds=4,
            slow_options={"lease_ms": lease_ms, "jitter_ms": jitter_ms},
        ) as f:
            f.start()
            take_over = f.take_over_after_kill("job-slow", timeout=20)
            time.sleep(3)  # the every-second slots around the kill and the take-over
            f.stop()
            report = f.report(since_ms=take_over.first["slot"])
        first, second = take_over.first, take_over.second
        print(f"take-over {take_over.took_ms} ms after kill -9 (lease_ms={lease_ms}); {report.summary()}")
        assert second["instance"] != first["instance"]
        assert second["fencing"] > first["fencing"]
        assert take_over.took_ms <= lease_ms + jitter_ms + lease_ms * POLL_SLACK + 500
        assert report.duplicates == 0, (report.duplicate_slots, _near(f, report.duplicate_slots, 0))
        assert report.missed == 0, (report.missed_slots, _near(f, report.missed_slots))
        assert report.take_overs >= 1

        async def history() -> tuple[list[Run], bool]:
            scheduler = Scheduler(build_backend(**fleet_backend))
            return await scheduler.history("job-slow"), scheduler.backend.capabilities.attempts

        runs, keeps_attempts = asyncio.run(history())
        (record,) = [r for r in runs if r.slot_ms == first["slot"]]
        assert (record.instance, record.attempt, record.status) == (second["instance"], 2, RunStatus.SUCCEEDED)
        assert record.fencing == second["fencing"]
        if keeps_attempts:  # the attempt killed with its process is on record too (the ledger's "died")
            assert [(a.attempt, a.instance, a.fencing) for a in record.earlier] == [
                (1, first["instance"], first["fencing"])
            ], record.earlier

    @requires("multi_process", "liveness")
    def test_kill_9_with_default_options_is_taken_over_within_2_s(self, fleet: FleetMaker) -> None:
        """Issue 16: a dead instance costs one take-over, not a lease, and no slot is lost.

        Every option at its default (a 30 s lease): 3 instances, 50 every-second jobs and one
        that runs 3 s every 5 s. The instance running the slow job is killed while it runs;
        then an instance kills itself mid-claim: its batch granted in the store, none of it
        run. The heartbeat, not the lease, must answer both.
        """
        with fleet(instances=3, jobs=50, slow_cron="*/5 * * * * *", slow_seconds=3) as f:
            f.start()
            take_over = f.take_over_after_kill("job-slow", timeout=30)
            died, granted = f.kill_mid_claim()
            last = max(slot for _, slot in granted)
            # Every slot of the next seconds, which the last instance must run alone.
            f.wait_for(lambda r: r["e"] == "end" and r.get("slot", 0) >= last + 12_000, timeout=30)
            f.stop()
            report = f.report(since_ms=max((f.ready_ms or 0) + 1000, take_over.first["slot"] - 3000))
        rows = {(row.job, row.slot_ms): row for row in report.rows}
        fates = Counter(rows[key].outcome if key in rows else "outside the window" for key in granted)
        print(
            f"take-over {take_over.took_ms} ms after kill -9 with default options; mid-claim death with "
            f"{len(granted)} grants: {dict(fates)}; {report.summary()}"
        )
        assert take_over.second["instance"] != take_over.first["instance"]
        assert take_over.took_ms <= 2000, f"the slow job's run was taken over {take_over.took_ms} ms after the kill"
        assert report.duplicates == 0, report.duplicate_slots
        assert report.missed == 0, (report.missed_slots, _near(f, report.missed_slots))
        assert report.slots >= 50 * 12, f"only {report.slots} slots in the window"
        # A grant of the dead batch is taken over once its owner's heartbeat expires (up to 1.5 s);
        # the next slot of that job, claimed within that time, is skipped for overlap: at most one each.
        assert all(fate in ("ran once", "taken over") for fate in fates if fate != "outside the window"), fates
        # The slow job's next slot may overlap its own re-run (3 s from the take-over). An every-second
        # job's slot may be skipped for overlap only while the run before it still counted as running:
        # held by a dead instance (a grant of the dead batch, or a run the backend never recorded)
        # within the heartbeat's TTL of a death, or a live run still being finished on a loaded
        # machine. With the lease rule instead, skips went on for the 30 s lease after a kill.
        killed = {take_over.first["instance"]: take_over.killed_at, died["instance"]: died["t"]}
        ledger = f.ledger()
        recorded = {(r["job"], r["slot"], r["instance"]) for r in ledger if r["e"] == "recorded"}
        recorded_at = {(r["job"], r["slot"]): r["t"] for r in ledger if r["e"] == "recorded"}  # the last one
        held_by_dead = granted | {
            (r["job"], r["slot"])
            for r in ledger
            if r["e"] == "start" and r["instance"] in killed and (r["job"], r["slot"], r["instance"]) not in recorded
        }
        skipped_at = {
            (r["job"], r["slot"]): r["t"] for r in ledger if r["e"] == "skip" and r.get("reason") == "overlap"
        }

        def explained(job: str, slot: int) -> bool:
            before, at = (job, slot - 1000), skipped_at.get((job, slot), 0)
            after_a_death = any(0 <= at - t <= LIVENESS_TTL_MS + 2000 for t in killed.values())  # + a slow answer
            still_finishing = recorded_at.get(before, 0) >= at - 1000  # its record came after (or near) the skip
            return (before in held_by_dead and after_a_death) or still_finishing

        skipped = sorted(
            (row.job, row.slot_ms)
            for row in report.rows
            if row.outcome == "skipped (overlap)" and row.job != "job-slow"
        )
        unexplained = [key for key in skipped if not explained(*key)]
        assert not unexplained, (
            f"every-second slots skipped while the run before them had ended, or long after a death "
            f"(killed at {killed}): {unexplained}",
            _near(f, unexplained, 1000),
        )

    @requires("multi_process", "liveness", "revive")
    def test_the_slots_skipped_for_a_dead_batch_are_run(self, fleet: FleetMaker) -> None:
        """Issue 36: with the default options a kill -9 loses none of the dead runs' next slots.

        3 instances, 50 every-second jobs; one instance kills itself mid-claim, its batch granted in
        the store and none of it run. The next slot of each of those jobs is claimed while the dead
        owner's heartbeat still holds (up to 1.5 s), so it is skipped for overlap; once the fleet
        finds the run dead (a take-over, or a newer slot's claim), that slot is revived and run.
        ``jitter_ms=0`` puts every job in one claim batch, so the dead batch holds all 50 and each
        next slot is claimed exactly one second later, inside the heartbeat's TTL: all are skipped
        first, deterministically.
        """
        with fleet(instances=3, jobs=50, options={"jitter_ms": 0}) as f:
            f.start()
            time.sleep(3)
            _, granted = f.kill_mid_claim()
            last = max(slot for _, slot in granted)
            f.wait_for(lambda r: r["e"] == "end" and r.get("slot", 0) >= last + 6_000, timeout=30)
            f.stop()
            report = f.report(since_ms=min(slot for _, slot in granted) - 2000)
        rows = {(row.job, row.slot_ms): row for row in report.rows}
        after_dead = sorted((job, slot + 1000) for job, slot in granted if (job, slot + 1000) in rows)
        fates = Counter(rows[key].outcome for key in after_dead)
        print(f"mid-claim death with {len(granted)} grants; their next slots: {dict(fates)}; {report.summary()}")
        assert report.duplicates == 0, report.duplicate_slots
        assert report.missed == 0, (report.missed_slots, _near(f, report.missed_slots))
        lost = [key for key in after_dead if rows[key].outcome == "skipped (overlap)"]
        assert not lost, (f"slots skipped for a dead run and never run: {lost}", _near(f, lost, 1000))
        skips = {(r["job"], r["slot"]) for r in f.ledger() if r["e"] == "skip" and r.get("reason") == "overlap"}
        revived = [key for key in after_dead if key in skips]
        assert revived, f"no next slot of the {len(granted)} dead grants was skipped first: nothing was revived"

    @requires("multi_process", "lease")
    def test_a_rolling_restart_misses_and_doubles_nothing(self, fleet: FleetMaker) -> None:
        """Issue 36: a fleet of 3 restarted pod by pod, default options: every slot runs once.

        20 every-second jobs; each instance in turn is stopped with SIGTERM (its runs handed over)
        and replaced by a new process ready before the next one stops, three times round the fleet.
        ``chaos/rolling.py`` runs the same for minutes and prints the figures.
        """
        with fleet(instances=3, jobs=20) as f:
            f.start()
            since = (f.ready_ms or 0) + 1000
            time.sleep(2)
            rolled = [m.instance for _ in range(3) for m in f.roll()]
            time.sleep(5)
            f.stop()
            report = f.report(since_ms=since)
        print(f"rolling restart, {len(rolled)} new processes: {report.summary()}")
        assert len(rolled) == 9
        assert report.duplicates == 0, report.duplicate_slots
        assert report.missed == 0, (report.missed_slots, _near(f, report.missed_slots))
        assert report.skipped == 0, [(r.job, r.slot_ms) for r in report.rows if r.outcome == "skipped (overlap)"]
        assert report.slots >= 20 * 5, f"only {report.slots} slots in the window"

    @requires("multi_process", "lease")
    def test_instances_joining_and_leaving_miss_and_double_nothing(self, fleet: FleetMaker) -> None:
        """Issue 37: two instances stay while others join and leave about every second; every slot runs once.

        Each change moves the fleet's view, so ranked claims may rank a slot
        differently on two instances for a moment: the referee still lets one
        run it, and a slot whose rank-0 instance left is still claimed by its
        backups. ``chaos/churn.py`` runs the same for minutes.
        """
        with fleet(instances=2, jobs=20) as f:
            f.start()
            since = (f.ready_ms or 0) + 1000
            changes = f.churn(time.monotonic() + 20, seed=37, gap_s=1.0)
            time.sleep(2)
            f.stop()
            report = f.report(since_ms=since)
        print(f"churn, {changes} joins and leaves: {report.summary()}")
        assert changes >= 8, f"only {changes} joins and leaves"
        assert report.duplicates == 0, report.duplicate_slots
        assert report.missed == 0, (report.missed_slots, _near(f, report.missed_slots))
        assert report.skipped == 0, [(r.job, r.slot_ms) for r in report.rows if r.outcome == "skipped (overlap)"]

    @requires("multi_process", lease=False)
    def test_kill_9_of_a_runner_loses_its_run_on_a_claim_backend(
        self, fleet: FleetMaker, fleet_backend: dict[str, Any]
    ) -> None:
        """Claim only: no lease a backup could see expire, so the run of a runner killed mid-run is lost.

        The other instances go on to run later slots, so they were alive and scheduling while
        the killed slot went unrun; its record stays ``running`` under the dead instance.
        """
        slow_every_s = 3
        with fleet(
            instances=3,
            jobs=0,
            slow_cron=f"*/{slow_every_s} * * * * *",
            slow_seconds=2,
            slow_options={"jitter_ms": 300},
        ) as f:
            f.start()
            first = f.wait_for(lambda r: r["e"] == "start" and r.get("job") == "job-slow", timeout=30)
            f.kill(f.member(first["instance"]))
            later = first["slot"] + 2 * slow_every_s * 1000  # well past any run the killed one could have left
            f.wait_for(lambda r: r["e"] == "end" and r.get("job") == "job-slow" and r["slot"] >= later, timeout=30)
            f.stop()
            ledger = f.ledger()
            report = f.report(since_ms=first["slot"])
        assert [r for r in ledger if r.get("job") == "job-slow" and r.get("slot") == first["slot"]] == [first]
        assert report.duplicates == 0, report.duplicate_slots
        assert report.take_overs == 0

        async def history() -> list[Run]:
            return await Scheduler(build_backend(**fleet_backend)).history("job-slow")

        (record,) = [r for r in asyncio.run(history()) if r.slot_ms == first["slot"]]
        assert (record.status, record.instance) == (RunStatus.RUNNING, first["instance"])

    @requires("multi_process", "backfill")
    def test_overlapping_backfills_and_a_live_fleet_run_each_slot_once(
        self, fleet: FleetMaker, fleet_backend: dict[str, Any]
    ) -> None:
        """Two ``anarchon backfill`` processes over overlapping ranges, while 3 instances run the job live.

        The ranges start before the fleet did (slots nobody ran) and end at the
        moment the backfills start, so their newest slots are the ones the live
        fleet is claiming then. Every slot is counted twice: by the ledger the
        job writes (whoever ran it) and by history.
        """
        cron, job = "* * * * * *", "job-00"
        options = {"jitter_ms": 500}
        with fleet(instances=3, jobs=1, cron=cron, options=options) as f:
            f.start()
            started = f.ready_ms
            assert started is not None
            # A few slots run by the fleet inside the ranges, then the slot it is claiming right now.
            f.wait_for(lambda r: r["e"] == "end" and r.get("job") == job and r["slot"] >= started + 5000, timeout=30)
            end = int(time.time()) * 1000
            ranges = [(started - 40_000, end), (started - 25_000, end)]
            env = {
                **f.env,
                "ANARCHON_CF_BACKEND": json.dumps(fleet_backend),
                "ANARCHON_CF_LEDGER": str(f.ledger_path),
                "ANARCHON_CF_JOBS": job,
                "ANARCHON_CF_CRON": cron,
                "ANARCHON_CF_OPTIONS": json.dumps(options),
            }
            backfills = [
                subprocess.Popen(
                    [sys.executable, "-m", "anarchon", "backfill", "anarchon_conformance.backfill_app:scheduler", job,
                     "--from", ms_to_datetime(lo).isoformat(), "--to", ms_to_datetime(hi).isoformat(),
                     "--concurrency", "4", "--json"],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=os.getcwd(),
                )
                for lo, hi in ranges
            ]  # fmt: skip
            outputs = [p.communicate(timeout=120) for p in backfills]
            f.wait_for(lambda r: r["e"] == "end" and r.get("job") == job and r["slot"] > end + 2000, timeout=30)
            f.stop()
            ledger = f.ledger()
        for p, (_, err) in zip(backfills, outputs, strict=True):
            assert p.returncode == 0, f"backfill exited {p.returncode}: {err[-3000:]}"
        summaries = [json.loads(out) for out, _ in outputs]
        wanted = [s for s in range(ranges[0][0] // 1000 * 1000, end + 1, 1000) if s >= ranges[0][0]]
        in_range = set(wanted)
        runs = Counter(r["slot"] for r in ledger if r["e"] == "start" and r.get("job") == job and r["slot"] in in_range)
        doubled = {s: n for s, n in runs.items() if n > 1}
        missing = [s for s in wanted if s not in runs]
        by_backfill = sum(1 for r in ledger if r["e"] == "start" and r["instance"].startswith("backfill-"))
        print(
            f"backfill: {len(wanted)} slots; counts {[s['counts'] for s in summaries]}; "
            f"{by_backfill} run by the backfills, {len(wanted) - by_backfill} by the fleet"
        )
        assert doubled == {}, f"slots run more than once: {doubled}"
        assert missing == [], f"slots of the range never run: {missing}"
        assert sum(s["counts"]["ran"] for s in summaries) == by_backfill
        assert by_backfill >= 25, "the backfills ran fewer slots than came before the fleet started"
        assert len(wanted) - by_backfill >= 4, "the fleet ran too few of the range's slots for the test to mean much"

        async def history() -> list[Run]:
            return await Scheduler(build_backend(**fleet_backend)).history(job, limit=1000)

        recorded = Counter(r.slot_ms for r in asyncio.run(history()) if r.slot_ms in in_range and not r.manual)
        assert recorded == Counter(wanted), "history does not hold exactly one record per slot of the range"

    @requires("multi_process")
    def test_a_failing_job_retries_on_its_runner_as_configured_and_stops(
        self, fleet: FleetMaker, fleet_backend: dict[str, Any]
    ) -> None:
        """Three processes, two jobs every 2 s: one always raises (2 retries), one raises once (3 retries).

        Each slot's tries are made by the instance that won it, one after the
        other (never by two instances), as many as configured and no more;
        history records each slot once, with its retry count.
        """
        retry = {"retry_delay_ms": 200, "retry_jitter": False, "jitter_ms": 300}
        flaky = {
            "job-broken": {"cron": "*/2 * * * * *", "fails": 99, "options": {**retry, "retries": 2}},
            "job-mends": {"cron": "*/2 * * * * *", "fails": 1, "options": {**retry, "retries": 3}},
        }
        wanted = {"job-broken": 2, "job-mends": 1}  # the last try of a slot
        with fleet(instances=3, jobs=0, flaky=flaky) as f:
            f.start()

            def enough() -> bool:
                done = {(r["job"], r["slot"]) for r in f.ledger() if r["e"] == "try" and r["retry"] == wanted[r["job"]]}
                return all(sum(1 for job, _ in done if job == name) >= 3 for name in wanted)

            deadline = time.monotonic() + 40
            while not enough() and time.monotonic() < deadline:
                time.sleep(0.2)
            f.stop()
            tries = [r for r in f.ledger() if r["e"] == "try"]
        per_slot: dict[tuple[str, int], list[dict[str, Any]]] = {}
        for r in tries:
            per_slot.setdefault((r["job"], r["slot"]), []).append(r)
        complete = {key: rs for key, rs in per_slot.items() if rs[-1]["retry"] == wanted[key[0]]}
        assert sum(1 for job, _ in complete if job == "job-broken") >= 3, f"too few slots tried to the end: {per_slot}"
        assert sum(1 for job, _ in complete if job == "job-mends") >= 3, f"too few slots tried to the end: {per_slot}"
        for (job, slot), rs in per_slot.items():
            first = rs[0]
            same_runner = [r for r in rs if (r["instance"], r["attempt"]) == (first["instance"], first["attempt"])]
            assert [r["retry"] for r in same_runner] == list(range(len(same_runner))), f"{job}@{slot}: {rs}"
            assert len(same_runner) <= wanted[job] + 1, f"{job}@{slot} tried more often than configured: {rs}"
        for (job, slot), rs in complete.items():
            assert len({r["instance"] for r in rs}) == 1, f"{job}@{slot} tried by two instances: {rs}"

        async def history(job: str) -> list[Run]:
            return await Scheduler(build_backend(**fleet_backend)).history(job)

        for job, status in (("job-broken", RunStatus.FAILED), ("job-mends", RunStatus.SUCCEEDED)):
            records = {r.slot_ms: r for r in asyncio.run(history(job))}
            for slot in (s for j, s in complete if j == job):
                record = records[slot]
                assert (record.status, record.retries, record.attempt) == (status, wanted[job], 1), record
                assert record.instance == complete[(job, slot)][0]["instance"]

    @requires("multi_process", "lease")
    def test_a_fleet_back_from_an_outage_runs_each_missed_slot_once(
        self, fleet: FleetMaker, fleet_backend: dict[str, Any]
    ) -> None:
        """``catch_up="each"``: 3 processes run two every-second jobs, all stop for 4 s, 3 new ones start.

        Every slot of the outage is run once, as a catch-up (the new instances
        race to claim the same batch), and no slot of the whole window twice.
        """
        options = {"jitter_ms": 200, "overlap": "allow", "catch_up": "each", "catch_up_max": 100}
        with fleet(instances=3, jobs=2, options=options) as f:
            f.start()
            since = (f.ready_ms or 0) + 1000
            f.wait_for(lambda r: r["e"] == "end" and r["slot"] >= since + 2000, timeout=30)
            f.stop()
            down_ms = f.stopping_ms or 0
            time.sleep(4)  # the outage: every instance down, nobody claims
            f.start()
            back_ms = f.ready_ms or 0
            f.wait_for(lambda r: r["e"] == "end" and r["slot"] >= back_ms + 2000, timeout=30)
            f.stop()
            ledger = f.ledger()
            report = f.report(since_ms=since)
        print(report.summary())
        near = [r for r in ledger if any(r.get("job") == j and abs(r.get("slot", 0) - s) <= 2000 for j, s in
                                         report.missed_slots + report.duplicate_slots)]  # fmt: skip
        assert report.duplicates == 0, (report.duplicate_slots, near)
        if report.missed:

            async def records() -> list[Run]:
                wanted = set(report.missed_slots)
                scheduler = Scheduler(build_backend(**fleet_backend))
                return [r for job in f.job_names() for r in await scheduler.history(job) if (job, r.slot_ms) in wanted]

            missing = asyncio.run(records())
            raise AssertionError(
                f"slots nobody ran: {report.missed_slots}, outage {down_ms}..{back_ms}: {missing} {near}"
            )
        caught = [r for r in ledger if r["e"] == "start" and r.get("catch_up")]
        plain = [r for r in ledger if r["e"] == "start" and r["slot"] > down_ms and not r.get("catch_up")]
        for job in f.job_names():
            # The outage ends at the new fleet's first plain claim: an instance ready before the last one may
            # claim a slot on time that the test's clock, reading the last "ready" late under load, counted in.
            first_plain = min((r["slot"] for r in plain if r["job"] == job and not r.get("manual")), default=back_ms)
            outage = [s for s in f.expected(down_ms + 1000, min(back_ms - 1000, first_plain - 1))[job]]
            theirs = sorted(r["slot"] for r in caught if r["job"] == job)
            assert set(outage) <= set(theirs), f"{job}: outage slots {outage} not all caught up: {theirs}"
            assert len(theirs) == len(set(theirs)), f"{job}: a slot caught up twice: {theirs}"
