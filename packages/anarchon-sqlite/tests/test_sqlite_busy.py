"""A locked database: waited out inside the busy timeout, an exception beyond it, never a wrong answer."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
import time
from collections import Counter

import pytest

from anarchon.backend import Outcome

SLOT = 1_800_000_000_000


def hold_write_lock(path) -> sqlite3.Connection:
    """Another process's writer, as far as SQLite can tell: a second connection inside BEGIN IMMEDIATE."""
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("BEGIN IMMEDIATE")
    return raw


async def test_a_lock_shorter_than_the_busy_timeout_is_waited_out(db_path, instances, make_job, make_claim):
    (a,) = await instances(1, busy_timeout_ms=5000)
    raw = hold_write_lock(db_path)
    asyncio.get_running_loop().call_later(0.3, raw.rollback)
    began = time.monotonic()
    (result,) = await a.claim([make_claim(make_job("waits"), SLOT)])
    assert result.won
    assert time.monotonic() - began >= 0.25
    raw.close()


async def test_a_lock_longer_than_the_busy_timeout_raises_and_writes_nothing(db_path, instances, make_job, make_claim):
    a, b = await instances(2, busy_timeout_ms=150)
    job = make_job("locked")
    (won,) = await a.claim([make_claim(job, SLOT, "a")])
    assert won.grant is not None
    retried = make_claim(job, SLOT + 1000, "a", token="tok-a")
    raw = hold_write_lock(db_path)
    try:
        with pytest.raises(sqlite3.OperationalError, match="locked") as caught:
            await a.claim([retried])
        assert f"SQLite database {db_path} is locked" in str(caught.value)
        assert "busy_timeout_ms=150" in str(caught.value)
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            await a.renew([won.grant])
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            await b.take_over([job], "b")
        assert [r.slot_ms for r in await b.history("locked")] == [SLOT]  # reads go on in WAL mode
    finally:
        raw.rollback()
        raw.close()
    # the unknown claim was not decided: its retry is the first decision, and it is final
    assert not a._broken
    (skipped,) = await a.claim([retried])
    assert skipped.outcome is Outcome.SKIPPED  # the run of SLOT still holds its lease
    (other,) = await b.claim([make_claim(job, SLOT + 1000, "b")])
    assert other.outcome is Outcome.LOST
    assert await a.renew([won.grant]) == [True]


async def _race(db_path, worker, processes: int, slots: int, jobs: int, busy_timeout_ms: int, held: bool = False):
    """Race the workers on the slots; ``held``: the write lock is held at the go until a worker was refused it.

    Without ``held`` busy errors depend on how the workers happen to overlap: a claim of a slot another
    worker decided is answered from a read, without the lock, so a 1 ms busy timeout alone can pass with none.
    """
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            str(worker),
            "race",
            str(db_path),
            f"p{i}",
            str(slots),
            str(jobs),
            str(busy_timeout_ms),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        for i in range(processes)
    ]
    for p in procs:
        assert p.stdout is not None
        assert (await p.stdout.readline()).strip() == b"ready"
    raw = hold_write_lock(db_path) if held else None
    for p in procs:  # all claim from here on, at once
        assert p.stdin is not None
        p.stdin.write(b"go\n")
        await p.stdin.drain()
        p.stdin.close()
    firsts = [asyncio.ensure_future(p.stdout.readline()) for p in procs]
    if raw is not None:
        # Every first claim needs the lock (the slot is undecided), so one is refused while it is held.
        done, _ = await asyncio.wait(firsts, timeout=60, return_when=asyncio.FIRST_COMPLETED)
        raw.rollback()
        raw.close()
        assert done, "no worker told of a refusal within 60 s of the go, with the write lock held"
        assert next(iter(done)).result().strip() == b"busy"
    reports = []
    for p, first in zip(procs, firsts, strict=True):
        line = await first
        if line.strip() == b"busy":
            line = await p.stdout.readline()
        reports.append(json.loads(line))
        assert await p.wait() == 0
    wins = Counter((job, slot) for r in reports for job, slot in r["won"])
    return wins, sum(r["errors"] for r in reports)


@pytest.mark.slow
async def test_eight_processes_race_batches_one_winner_each(db_path, worker, instances):
    await instances(1)  # create the file first, as a running fleet would have
    wins, errors = await _race(db_path, worker, processes=8, slots=60, jobs=20, busy_timeout_ms=5000)
    assert len(wins) == 60 * 20
    assert set(wins.values()) == {1}
    assert errors == 0


@pytest.mark.slow
async def test_busy_errors_under_load_stay_unknown_never_wrong(db_path, worker, instances):
    """With a 1 ms busy timeout calls fail; retried with the same tokens, still one winner each."""
    await instances(1)
    wins, errors = await _race(db_path, worker, processes=8, slots=40, jobs=10, busy_timeout_ms=1, held=True)
    assert errors > 0
    assert len(wins) == 40 * 10
    assert set(wins.values()) == {1}


async def test_a_writer_killed_inside_its_transaction_leaves_no_lock(db_path, instances, make_job, make_claim):
    """kill -9 mid-transaction: the OS drops the file locks and SQLite discards the half-written transaction."""
    (a,) = await instances(1, busy_timeout_ms=2000)
    script = (
        "import sqlite3, sys, time\n"
        "raw = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "raw.execute('BEGIN IMMEDIATE')\n"
        'raw.execute("UPDATE anarchon_jobs SET mark = 99")\n'
        "print('locked', flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, str(db_path), stdout=asyncio.subprocess.PIPE
    )
    assert proc.stdout is not None
    assert (await proc.stdout.readline()).strip() == b"locked"
    proc.kill()
    await proc.wait()
    job = make_job("after-kill")
    (result,) = await a.claim([make_claim(job, SLOT)])
    assert result.won
    assert await a.marks([job]) == {"after-kill": SLOT}


async def test_a_broken_connection_is_reopened_by_the_next_call(instances, make_job, make_claim):
    (a,) = await instances(1)
    job = make_job("reopen")
    conn = a._conn
    assert conn is not None
    await conn._execute(conn._conn.close)  # the connection dies under the backend
    with pytest.raises(sqlite3.ProgrammingError):
        await a.claim([make_claim(job, SLOT)])
    (result,) = await a.claim([make_claim(job, SLOT)])
    assert result.won
    assert a._conn is not conn


async def test_writers_of_one_process_take_turns_within_the_busy_timeout(db_path, instances, make_job, make_claim):
    """The per-file turn that spares SQLite's sleeping busy handler is waited for like SQLite's lock."""
    from anarchon_sqlite import _waiting

    a, b = await instances(2, busy_timeout_ms=150)
    job = make_job("turns", overlap="allow")
    turn = _waiting._turn(a.path)
    assert turn.acquire(timeout=5)  # a writer of this process inside its transaction, for too long
    try:
        with pytest.raises(sqlite3.OperationalError, match="locked") as caught:
            await a.claim([make_claim(job, SLOT, "a")])
        assert "busy_timeout_ms=150" in str(caught.value)
        assert await b.history("turns") == []  # reads do not wait for writers
    finally:
        turn.release()
    answers = await asyncio.gather(*(x.claim([make_claim(job, SLOT + 1000, n)]) for n, x in (("a", a), ("b", b))))
    assert sorted(r[0].outcome for r in answers) == [Outcome.LOST, Outcome.WON]
    assert [r.slot_ms for r in await b.history("turns")] == [SLOT + 1000]
