"""The lease rules of :mod:`anarchon.backend` as SQL, one transaction per call.

Each write (a :data:`Body` built by :func:`claim`, :func:`renew`…) runs
through :func:`transaction` on the connection's own thread, whole: it takes
the write lock (``BEGIN IMMEDIATE``), reads the host clock under that lock,
does what :class:`anarchon.memory.MemoryStore` does under its lock, and
commits. Doing the whole transaction in one call on that thread, rather than
statement by statement from the event loop, keeps the write lock held only
while SQLite works, and means a cancelled caller can never leave a
transaction open: the transaction finishes or rolls back on its own.

Answers come from what this transaction read and wrote (``rowcount`` of its
own statements), never from ``changes()``, so nothing can be mixed up with
another caller's work.
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, TypeVar

from anarchon.backend import Claim, ClaimResult, Grant, Outcome, next_fencing
from anarchon.errortext import clean_text
from anarchon.records import decode_run
from anarchon.run import Run, RunStatus

if TYPE_CHECKING:
    from anarchon.job import Job

from ._sql import statement

__all__ = [
    "claim",
    "decided_elsewhere",
    "finish",
    "finish_many",
    "hand_over",
    "history",
    "marks",
    "renew",
    "take_over",
    "transaction",
    "wall_ms",
]

T = TypeVar("T")

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_US = timedelta(microseconds=1)

# The statements are spelled out whole: none is ever built from a value. The ones
# about live leases name the partial index: without statistics the planner would
# walk the job's whole history by primary key instead (60 us against 2 us).
_SELECT_RUN = statement("store_select_run")
# Every job's expired leases in one statement, from the partial index, which holds only
# the live leases: a take-over poll costs as little with 10,000 jobs as with one.
_SELECT_EXPIRED = statement("store_select_expired")
# What a claim decides on, in one read (always one row, even for a job never seen):
# the job's book, the slot's record if any, and two facts about the job's live
# leases: is one of an older scheduled slot expired (abandon it), and is one
# still held (overlap). Parameters: job, slot_ms, manual, now.
_SELECT_CLAIM = statement("store_select_claim")
_SELECT_HISTORY = statement("store_select_history")
_INSERT_RUN = statement("store_insert_run")
# The owner's calls match job, slot_ms, manual, token of a running record.
_RENEW = statement("store_renew")
_FINISH = statement("store_finish")
_HAND_OVER = statement("store_hand_over")

Row = tuple[
    str, int, int, str, str, int, "int | None", int, int, "int | None", "int | None", "int | None", "str | None",
    str, int, int, int,
]  # fmt: skip


def wall_ms() -> int:
    """The host's clock: every process sharing the file reads the same one."""
    return time.time_ns() // 1_000_000


def _to_us(moment: datetime | None) -> int | None:
    return None if moment is None else (moment - _EPOCH) // _US


def _from_us(us: int | None) -> datetime | None:
    return None if us is None else _EPOCH + us * _US


def _run(row: Row) -> Run:
    return Run(
        job=row[0],
        slot_ms=row[1],
        manual=bool(row[2]),
        status=RunStatus(row[3]),
        instance=row[4],
        attempt=row[5],
        fencing=row[6],
        catch_up=bool(row[7]),
        missed=row[8],
        started_at=_from_us(row[9]),
        finished_at=_from_us(row[10]),
        duration_ms=row[11],
        error=row[12],
    )


def _grant(row: Row, supersedes: int | None = None, previous: int | None = None) -> Grant:
    started_us = row[9]
    return Grant(
        job=row[0],
        slot_ms=row[1],
        instance=row[4],
        token=row[13],
        attempt=row[5],
        fencing=row[6],
        manual=bool(row[2]),
        catch_up=bool(row[7]),
        missed=row[8],
        started_at_ms=round(started_us / 1000) if started_us is not None else 0,
        lease_ms=row[14],
        supersedes=supersedes,
        previous_mark=previous,
    )


def _clear(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:  # a rollback that failed earlier: end it before anything else
        conn.execute("ROLLBACK")


#: A write: what one transaction does, given the connection and the host clock's now.
Body = Callable[[sqlite3.Connection, int], T]


def transaction(conn: sqlite3.Connection, body: Body[T], clock: Callable[[], int] = wall_ms) -> T:
    """Run ``body(conn, now_ms)`` as one ``BEGIN IMMEDIATE`` transaction.

    ``now_ms`` is read after the write lock is held, so the transactions of
    all processes see the clock in the order they commit.
    """
    _clear(conn)
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = body(conn, clock())
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return result


# -- claim ------------------------------------------------------------------------


# A run counts as expired when its lease ran out or its owner's heartbeat did (an owner
# without a heartbeat record counts as alive; a record counts as expired only while some
# record is alive: anarchon.liveness), in every statement below that judges a lease:
# "instance IN (SELECT instance FROM anarchon_instances WHERE ...)".

#: Whether the newest slot won is a dead run (running, lease or heartbeat expired), which this claim supersedes.
_SELECT_DEAD = statement("store_select_dead")


#: Whether a run of an older slot holds the job's lease.
_SELECT_OLDER_HELD = statement("store_select_older_held")


#: Abandon the dead runs of older scheduled slots: the newer slot runs the job.
_ABANDON_OLDER = statement("store_abandon_older")


def _claim_one(conn: sqlite3.Connection, c: Claim, now: int) -> ClaimResult:
    opts = c.options
    name = c.job
    manual = int(c.manual)
    found = conn.execute(_SELECT_CLAIM, (name, c.slot_ms, manual, now)).fetchone()
    known, mark, won, fencing, kept = found[0], found[1], found[2], found[3], found[4]
    existing: Row | None = found[5:22] if found[5] is not None else None
    dead, held = found[22], found[23]
    if existing is not None:
        if existing[13] != c.token:
            return ClaimResult(Outcome.LOST)
        status = existing[3]
        if status == RunStatus.SKIPPED.value:
            return ClaimResult(Outcome.SKIPPED, record=_run(existing))
        if status == RunStatus.RUNNING.value:
            return ClaimResult(Outcome.WON, _grant(existing))
        return ClaimResult(Outcome.LOST)

    if not known:
        conn.execute(statement("job_insert"), (name,))
        fencing, kept = 0, 0
    supersedes = previous = None
    late = not c.manual and mark is not None and c.slot_ms <= mark
    # A late claim was delayed past a newer slot's: too late to run. Overlapped by an older run
    # all along, it is recorded skipped below (the mark stays); otherwise it leaves no record.
    if late and (
        opts.overlap != "skip"
        or not held
        or conn.execute(_SELECT_OLDER_HELD, (name, c.slot_ms, now)).fetchone() is None
    ):
        return ClaimResult(Outcome.LOST)
    if not c.manual and not late:
        if dead:
            if won is not None and conn.execute(_SELECT_DEAD, (name, won, now)).fetchone() is not None:
                supersedes = won
            conn.execute(_ABANDON_OLDER, (name, c.slot_ms, now))
        previous, mark = mark, c.slot_ms

    started_us = c.now_ms * 1000
    if opts.overlap == "skip" and held:
        row: Row = (
            name, c.slot_ms, manual, RunStatus.SKIPPED.value, c.instance, 1, None, int(c.catch_up), c.missed,
            started_us, started_us, 0, None, c.token, opts.lease_ms, now, 0,
        )  # fmt: skip
        result = ClaimResult(Outcome.SKIPPED, record=_run(row))
    else:
        fencing = next_fencing(fencing, now)
        if not c.manual:
            won = c.slot_ms
        row = (
            name, c.slot_ms, manual, RunStatus.RUNNING.value, c.instance, 1, fencing, int(c.catch_up), c.missed,
            started_us, None, None, None, c.token, opts.lease_ms, now + opts.lease_ms, 0,
        )  # fmt: skip
        result = ClaimResult(Outcome.WON, _grant(row, supersedes, previous))
    conn.execute(_INSERT_RUN, row)
    kept = _trim(conn, c.spec, kept + 1, now)
    conn.execute(
        statement("claim_job_update"),
        (mark, won, fencing, kept, name),
    )
    return result


def _trim(conn: sqlite3.Connection, job: Job, kept: int, now: int) -> int:
    """Drop finished runs beyond ``history_size`` and older than ``history_ttl_ms``.

    The runs beyond the newest ``history_size`` are the oldest ``kept -
    history_size``, read from the cheap end of the key. Returns the new count.
    """
    size, ttl = job.options.history_size, job.options.history_ttl_ms
    if kept > size:
        oldest = conn.execute(
            statement("trim_oldest"),
            (job.name, kept - size),
        ).fetchall()
        for slot_ms, manual, status in oldest:
            if status != RunStatus.RUNNING.value:
                conn.execute(
                    statement("trim_delete"),
                    (job.name, slot_ms, manual),
                )
                kept -= 1
    if ttl is not None:
        cursor = conn.execute(statement("trim_expired"), (job.name, now - ttl))
        kept -= cursor.rowcount
    return kept


def claim(claims: Sequence[Claim]) -> Body[list[ClaimResult]]:
    """Decide a batch of claims, in order, in one transaction."""
    return lambda conn, now: [_claim_one(conn, c, now) for c in claims]


# -- the owner's calls -------------------------------------------------------------------


def _key(grant: Grant) -> tuple[str, int, int, str]:
    return (grant.job, grant.slot_ms, int(grant.manual), grant.token)


def renew(grants: Sequence[Grant]) -> Body[list[bool]]:
    def body(conn: sqlite3.Connection, now: int) -> list[bool]:
        return [
            conn.execute(
                _RENEW,
                (now, *_key(g)),
            ).rowcount
            == 1
            for g in grants
        ]

    return body


def _stored_error(error: str | None) -> str | None:
    """The error text as SQLite can bind it: a lone surrogate cannot be encoded, so it is escaped (and cut)."""
    return None if error is None else clean_text(error)


def finish(grant: Grant, run: Run) -> Body[bool]:
    def body(conn: sqlite3.Connection, now: int) -> bool:
        cursor = conn.execute(
            _FINISH,
            (
                run.status.value, run.instance, run.attempt, run.fencing, int(run.catch_up), run.missed,
                _to_us(run.started_at), _to_us(run.finished_at), run.duration_ms, _stored_error(run.error), now,
                *_key(grant),
            ),
        )  # fmt: skip
        return cursor.rowcount == 1

    return body


def finish_many(items: Sequence[tuple[Grant, Run]]) -> Body[list[bool]]:
    """The finishes of runs that ended together, in one transaction: one write lock, one commit."""
    bodies = [finish(grant, run) for grant, run in items]
    return lambda conn, now: [body(conn, now) for body in bodies]


def hand_over(grant: Grant) -> Body[bool]:
    def body(conn: sqlite3.Connection, now: int) -> bool:
        cursor = conn.execute(_HAND_OVER, (now, *_key(grant)))
        return cursor.rowcount == 1

    return body


# -- the backups' calls --------------------------------------------------------------------


def _take_over_job(
    conn: sqlite3.Connection, job: Job, expired: list[Row], instance: str, now: int
) -> list[ClaimResult]:
    # The newest run is the newest slot *won*: a slot skipped for a dead run moved the mark but ran nothing.
    newest_won, fencing = conn.execute(statement("take_over_job_read"), (job.name,)).fetchone()
    won: list[ClaimResult] = []
    for row in expired:
        slot_ms, manual, attempt, handed_over = row[1], row[2], row[5], row[16]
        where = (job.name, slot_ms, manual)
        newest = bool(manual) or slot_ms == newest_won
        if not newest or (attempt >= job.options.max_attempts and not handed_over):
            conn.execute(statement("take_over_abandon"), where)
            continue
        fencing = next_fencing(fencing, now)
        token = uuid.uuid4().hex
        lease_ms = job.options.lease_ms
        if not handed_over:  # a hand-over is no death: the run goes on as the same attempt
            conn.execute(statement("take_over_earlier"), where)  # the attempt that died, kept in the record
            attempt += 1
        conn.execute(
            statement("take_over_run"),
            (instance, attempt, fencing, now * 1000, token, lease_ms, now + lease_ms, *where),
        )
        taken: Row = conn.execute(_SELECT_RUN, where).fetchone()
        won.append(ClaimResult(Outcome.WON, _grant(taken)))
    conn.execute(statement("take_over_job_fencing"), (fencing, job.name))
    return won


def take_over(jobs: Sequence[Job], instance: str) -> Body[list[ClaimResult]]:
    """Grant again, or abandon, the expired runs of these jobs.

    One read finds the expired leases of every job; only the jobs that have
    one cost more, so the poll does no work per job when nothing died.
    """

    def body(conn: sqlite3.Connection, now: int) -> list[ClaimResult]:
        expired: dict[str, list[Row]] = {}
        for row in conn.execute(_SELECT_EXPIRED, (now,)):
            expired.setdefault(row[0], []).append(row)
        won: list[ClaimResult] = []
        for job in jobs if expired else ():
            rows = expired.pop(job.name, None)  # popped: a job named twice is still taken over once
            if rows:
                won += _take_over_job(conn, job, rows, instance, now)
        return won

    return body


# -- reads ------------------------------------------------------------------------------------


#: Jobs whose marks one statement reads; the last group is padded by repeating a name.
_MARKS_GROUP = 200
_SELECT_MARKS = statement("store_select_marks").format(placeholders=", ".join("?" * _MARKS_GROUP))


def marks(conn: sqlite3.Connection, jobs: Sequence[Job]) -> dict[str, int | None]:
    """Each job's mark, read in one snapshot, :data:`_MARKS_GROUP` jobs per statement."""
    found: dict[str, int | None] = dict.fromkeys(job.name for job in jobs)
    names = list(found)
    _clear(conn)
    conn.execute("BEGIN")
    try:
        for start in range(0, len(names), _MARKS_GROUP):
            group = names[start : start + _MARKS_GROUP]
            group += group[-1:] * (_MARKS_GROUP - len(group))
            found.update(conn.execute(_SELECT_MARKS, group))
    finally:
        conn.execute("COMMIT")
    return found


#: Scheduled claims one statement looks up; the last group is padded by repeating a pair.
_DECIDED_GROUP = 200
_SELECT_DECIDED = statement("store_select_decided").format(placeholders=", ".join(["(?, ?)"] * _DECIDED_GROUP))


def decided_elsewhere(conn: sqlite3.Connection, claims: Sequence[Claim]) -> set[int]:
    """Which claims (by position) another claim decided already: their slot has a record with another token.

    Read without the write lock, in one snapshot: a record once written stays the slot's,
    so a claim answered LOST here is the LOST the write would give, and a batch of later
    ranks' claims costs one read instead of a write transaction taken in turn. A retry of
    this claim (its own token) and a slot without a record go to the write. So does a
    claim whose job has another claim in the batch: that one's write may trim the record
    first (the differential test against the memory store found the case).
    """
    per_job = Counter(c.job for c in claims)
    scheduled = [(i, c) for i, c in enumerate(claims) if not c.manual and per_job[c.job] == 1]
    if not scheduled:
        return set()
    tokens: dict[tuple[str, int], str] = {}
    _clear(conn)
    conn.execute("BEGIN")
    try:
        for start in range(0, len(scheduled), _DECIDED_GROUP):
            pairs = [(c.job, c.slot_ms) for _, c in scheduled[start : start + _DECIDED_GROUP]]
            pairs += pairs[-1:] * (_DECIDED_GROUP - len(pairs))
            for job, slot, token in conn.execute(_SELECT_DECIDED, [v for pair in pairs for v in pair]):
                tokens[job, slot] = token
    finally:
        conn.execute("COMMIT")
    return {i for i, c in scheduled if tokens.get((c.job, c.slot_ms), c.token) != c.token}


def _moment_of(us: object) -> object:
    """A stored microsecond time as a datetime; anything else is left for the decoder to refuse."""
    if us is None:
        return None
    try:
        return _from_us(us)  # type: ignore[arg-type]
    except (TypeError, OverflowError, ValueError):
        return f"invalid time {us!r}"


def _earlier_of(stored: object) -> object:
    """The stored JSON list of earlier attempts; text that is not JSON is left for the decoder to refuse."""
    if not isinstance(stored, str):
        return stored
    try:
        return json.loads(stored)
    except (ValueError, RecursionError):
        return stored


def _stored_run(row: tuple[Any, ...]) -> Run | None:
    """A history row (a :data:`Row` and ``earlier``) through the core's tolerant decoder.

    ``None`` (logged, counted) for a row this version cannot read.
    """
    return decode_run(
        {
            "job": row[0],
            "slot_ms": row[1],
            "manual": row[2],
            "status": row[3],
            "instance": row[4],
            "attempt": row[5],
            "fencing": row[6],
            "catch_up": row[7],
            "missed": row[8],
            "started_at": _moment_of(row[9]),
            "finished_at": _moment_of(row[10]),
            "duration_ms": row[11],
            "error": row[12],
            "earlier": _earlier_of(row[17]),
        },
        job=row[0] if isinstance(row[0], str) else "?",
    )


def history(conn: sqlite3.Connection, job: str, limit: int) -> list[Run]:
    """The newest ``limit`` readable runs; rows no version wrote are skipped (and more rows read)."""
    asked = limit
    while True:
        rows: list[tuple[Any, ...]] = conn.execute(_SELECT_HISTORY, (job, asked)).fetchall()
        runs = [run for run in map(_stored_run, rows) if run is not None]
        if len(runs) >= limit or len(rows) < asked:
            return runs[:limit]
        asked += max(limit - len(runs), asked)
