"""Run records as the scripts store them, and back to the core's types.

A record is JSON with times in epoch milliseconds (Lua cannot format
datetimes), plus the lease fields the public :class:`~anarchon.run.Run`
does not show: ``token``, ``lease`` (ms), ``handed`` (handed over) and
``fin`` (finished by its owner, so a retried finish answers the same). A run
taken over after its runner died keeps the attempts it replaced in
``earlier``, a list of ``{attempt, instance, fencing, started}``, oldest first.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from redis.exceptions import RedisError

from anarchon.backend import Claim, ClaimResult, Grant, Outcome
from anarchon.errortext import clean_text
from anarchon.records import decode_run
from anarchon.run import Run, RunStatus, datetime_to_ms, ms_to_datetime

__all__ = [
    "LOST",
    "UNKNOWN",
    "claim_result",
    "final_record",
    "grant_of",
    "history_run",
    "job_failed",
    "mark_of",
    "run_of",
    "slot_or_none",
    "text",
]

LOST = ClaimResult(Outcome.LOST)
UNKNOWN = ClaimResult(Outcome.UNKNOWN)


def text(value: bytes | str) -> str:
    """Replies are bytes or str depending on the client's ``decode_responses``."""
    return value.decode() if isinstance(value, bytes) else value


def final_record(run: Run) -> str:
    """The finished run as JSON marked ``fin``, left open: the finish script adds the lease fields and the brace."""
    status = RunStatus(run.status)
    if status is RunStatus.RUNNING:
        raise ValueError(
            f"finish() got run {run.job}/{run.slot_ms} with status 'running'; pass the finished run "
            "(succeeded, failed, timed-out or cancelled)"
        )
    return json.dumps(
        {
            "job": run.job,
            "slot": run.slot_ms,
            "status": status.value,
            "instance": run.instance,
            "attempt": run.attempt,
            "fencing": run.fencing,
            "manual": run.manual,
            "catch_up": run.catch_up,
            "missed": run.missed,
            "started": datetime_to_ms(run.started_at) if run.started_at else None,
            "finished": datetime_to_ms(run.finished_at) if run.finished_at else None,
            "duration": run.duration_ms,
            "error": None if run.error is None else clean_text(run.error),
            "fin": True,
        },
        separators=(",", ":"),
    )[:-1]


def _load(raw: bytes | str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(raw)
    return data


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def run_of(raw: bytes | str) -> Run:
    d = _load(raw)
    started, finished = _int(d.get("started")), _int(d.get("finished"))
    return Run(
        job=d["job"],
        slot_ms=int(d["slot"]),
        status=RunStatus(d["status"]),
        instance=d["instance"],
        attempt=int(d.get("attempt", 1)),
        fencing=_int(d.get("fencing")),
        manual=bool(d.get("manual", False)),
        catch_up=bool(d.get("catch_up", False)),
        started_at=ms_to_datetime(started) if started is not None else None,
        finished_at=ms_to_datetime(finished) if finished is not None else None,
        duration_ms=_int(d.get("duration")),
        error=d.get("error"),
        missed=int(d.get("missed", 0)),
    )


#: The names the scripts store (short: Lua builds them), as the core's record fields.
_FIELDS = {"slot": "slot_ms", "started": "started_at", "finished": "finished_at", "duration": "duration_ms"}


def _renamed(data: dict[Any, Any]) -> dict[str, Any]:
    return {_FIELDS.get(str(k), str(k)): v for k, v in data.items()}


def _earlier(stored: Any) -> Any:
    """The earlier attempts with the core's field names; cjson encodes an empty list as ``{}``.

    Anything else that is not a list of objects is left for the decoder to refuse.
    """
    if stored == {}:
        return []
    if isinstance(stored, list):
        return [_renamed(item) if isinstance(item, dict) else item for item in stored]
    return stored


def history_run(raw: bytes | str, job: str) -> Run | None:
    """A history record through the core's tolerant decoder: ``None`` (logged, counted) for a foreign one."""
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return decode_run(raw, job=job)  # not JSON: the decoder logs and counts it
    if isinstance(data, dict):
        renamed = _renamed(data)
        if "earlier" in renamed:
            renamed["earlier"] = _earlier(renamed["earlier"])
        return decode_run(renamed, job=job)
    return decode_run(raw, job=job)


def grant_of(raw: bytes | str) -> Grant:
    d = _load(raw)
    return Grant(
        job=d["job"],
        slot_ms=int(d["slot"]),
        instance=d["instance"],
        token=d["token"],
        attempt=int(d["attempt"]),
        fencing=_int(d.get("fencing")),
        manual=bool(d.get("manual", False)),
        catch_up=bool(d.get("catch_up", False)),
        missed=int(d.get("missed", 0)),
        started_at_ms=_int(d.get("started")) or 0,
        lease_ms=int(d["lease"]),
    )


def slot_or_none(reply: list[Any], index: int) -> int | None:
    """A slot the claim script answered, or ``None`` for its false (a nil) or a reply too short to hold it."""
    return int(reply[index]) if len(reply) > index and reply[index] is not None else None


def claim_result(c: Claim, reply: list[Any]) -> ClaimResult:
    """A new grant comes back as its fencing alone, built here from the claim as the script recorded it."""
    outcome = text(reply[0])
    if outcome == "lost":
        return LOST
    if outcome == "skipped":
        return ClaimResult(Outcome.SKIPPED, record=run_of(reply[1]))
    if isinstance(reply[1], int):
        grant = c.granted(
            fencing=reply[1],
            lease_ms=c.options.lease_ms,
            supersedes=slot_or_none(reply, 2),
            previous_mark=slot_or_none(reply, 3),
        )
        return ClaimResult(Outcome.WON, grant)
    return ClaimResult(Outcome(outcome), grant_of(reply[1]))


def job_failed(job: str, operation: str, error: Exception) -> None:
    """A script failed on one job's keys (a wrong type, a corrupt state): that job alone is stopped."""
    logging.getLogger("anarchon.redis").error(
        "job %s: %s failed on its Redis keys: %s; this job's slots answer unknown until its keys are fixed, "
        "the other jobs go on",
        job,
        operation,
        error,
    )


def mark_of(job: str, value: Any) -> int | None:
    """A job's mark; an unreadable one is logged and counted as none (no catch-up for that job)."""
    if value is None:
        return None
    try:
        if isinstance(value, Exception):
            raise value
        return int(value)
    except (ValueError, RedisError) as exc:
        job_failed(job, "reading the mark", exc if isinstance(exc, RedisError) else ValueError(f"mark={value!r}"))
        return None
