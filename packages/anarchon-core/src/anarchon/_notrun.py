"""Slots no run ran at their time, told once by the instance that won the next slot: missed and lost.

A backend answers a won scheduled claim with the job's mark it found
(:attr:`~anarchon.claims.Grant.previous_mark`): the newest slot anyone had
decided (won, skipped, paused). Every slot of the schedule between that mark
and this one was due and nobody claimed it: *missed* (every instance down,
or each reached it past ``max_late_ms``). A grant that superseded a dead run
(:attr:`~anarchon.claims.Grant.supersedes`) *lost* that run's slot: claimed,
its runner died, and nobody took it over before a newer slot was won.

Only the winner knows, so each gap is told once for the fleet: one log line
(WARNING when nothing runs for the slots, INFO when this run covers them, as
catch-up does) and the ``anarchon_slots_not_run`` hook, which the Prometheus
exporter counts so that an alert can fire on real misses only.
"""

from __future__ import annotations

import logging

from .claims import Grant
from .job import Job
from .observers import Observers
from .run import ms_to_datetime

__all__ = ["report_not_run"]

log = logging.getLogger("anarchon.runs")


def report_not_run(job: Job, grant: Grant, observers: Observers) -> None:
    """Tell (log and hook) the slots before this scheduled grant that no run ran: missed ones, a lost one."""
    if grant.manual:
        return
    if grant.previous_mark is not None and grant.previous_mark < grant.slot_ms:
        count, newest = job.schedule.count_between(grant.previous_mark, grant.slot_ms - 1)
        first = job.next_slot_ms(grant.previous_mark)
        if count and newest is not None and first is not None:
            covered = grant.slot_ms if job.options.catches_up else None
            (log.info if covered else log.warning)(
                "job %s: %d slot(s) from %s to %s were due and nobody claimed them (every instance down, or each "
                "reached them past max_late_ms=%d ms); %s",
                job.name,
                count,
                ms_to_datetime(first),
                ms_to_datetime(newest),
                job.options.max_late_ms,
                f"the run of {ms_to_datetime(grant.slot_ms)} covers them (catch_up={job.options.catch_up!r})"
                if covered
                else f"nothing runs for them (catch_up={job.options.catch_up!r})",
                extra={"job": job.name, "slots": count},
            )
            observers.slots_not_run(job, "missed", first, newest, count, covered)
    if grant.supersedes is not None:
        log.warning(
            "job %s: the run of %s was lost: its runner died and nobody took it over before %s was won; "
            "that run covers it",
            job.name,
            ms_to_datetime(grant.supersedes),
            ms_to_datetime(grant.slot_ms),
            extra={"job": job.name, "slots": 1},
        )
        observers.slots_not_run(job, "lost", grant.supersedes, grant.supersedes, 1, grant.slot_ms)
