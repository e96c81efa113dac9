"""Claims and runs as the statements' parameters, and the rows they answer as the core's types.

The claim function, claim_batch and the finish statements take their
arguments in one order (``sql/``); these build them, and read a claim's row
back into a :class:`~anarchon.backend.ClaimResult` and a history row into a
:class:`~anarchon.run.Run`.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import asyncpg  # type: ignore[import-untyped]

from anarchon.backend import Claim, ClaimResult, Grant, Outcome
from anarchon.errortext import clean_text
from anarchon.records import decode_run
from anarchon.run import Run, RunStatus, datetime_to_ms, ms_to_datetime

__all__ = ["batch_args", "claim_args", "claim_result", "finish_args", "history_run"]


def batch_args(c: Claim) -> tuple[Any, ...]:
    """One scheduled claim as claim_batch's parameters after ``p_wait``: claim()'s, less ``manual`` (the third)."""
    args = claim_args(c)
    return args[:2] + args[3:]


def finish_args(grant: Grant, run: Run) -> tuple[Any, ...]:
    """One finish as the finish statements' parameters, in order."""
    return (
        grant.job,
        grant.slot_ms,
        grant.manual,
        grant.token,
        run.status.value,
        run.instance,
        run.attempt,
        run.fencing,
        run.catch_up,
        run.missed,
        run.started_at,
        run.finished_at,
        run.duration_ms,
        None if run.error is None else clean_text(run.error),  # no NUL, no lone surrogate: text refuses both
    )


def claim_args(c: Claim) -> tuple[Any, ...]:
    """One claim as the claim function's parameters, in order (one element of each array)."""
    options = c.options
    return (
        c.job,
        c.slot_ms,
        c.manual,
        c.token,
        c.instance,
        ms_to_datetime(c.now_ms),
        c.catch_up,
        c.missed,
        options.lease_ms,
        options.overlap == "skip",
        options.history_size,
        options.history_ttl_ms,
    )


def claim_result(c: Claim, row: asyncpg.Record) -> ClaimResult:
    outcome = Outcome(row["o_outcome"])
    if outcome is Outcome.LOST:
        return ClaimResult(Outcome.LOST)
    started = row["o_started_at"]
    if outcome is Outcome.SKIPPED:
        record = Run(
            job=c.job,
            slot_ms=c.slot_ms,
            status=RunStatus.SKIPPED,
            instance=row["o_instance"],
            attempt=row["o_attempt"],
            fencing=row["o_fencing"],
            manual=c.manual,
            catch_up=row["o_catch_up"],
            started_at=started,
            finished_at=row["o_finished_at"],
            duration_ms=row["o_duration_ms"],
            missed=row["o_missed"],
        )
        return ClaimResult(Outcome.SKIPPED, record=record)
    grant = Grant(
        job=c.job,
        slot_ms=c.slot_ms,
        instance=row["o_instance"],
        token=c.token,
        attempt=row["o_attempt"],
        fencing=row["o_fencing"],
        manual=c.manual,
        catch_up=row["o_catch_up"],
        missed=row["o_missed"],
        started_at_ms=datetime_to_ms(started) if started else 0,
        lease_ms=row["o_lease_ms"],
        supersedes=row["o_supersedes"],
        previous_mark=row["o_previous_mark"],
    )
    return ClaimResult(Outcome.WON, grant)


def history_run(row: asyncpg.Record, job: str) -> Run | None:
    """A history row through the core's tolerant decoder: ``None`` (logged, counted) for a foreign one.

    ``earlier`` is jsonb, which asyncpg hands over as its text unless the caller's pool
    set a codec for it (then it is decoded already); text Python cannot load (nested too
    deep) is left for the decoder to refuse.
    """
    data = dict(row.items())
    earlier = data.get("earlier")
    if isinstance(earlier, str):
        with contextlib.suppress(ValueError, RecursionError):
            data["earlier"] = json.loads(earlier)
    return decode_run(data, job=job)
