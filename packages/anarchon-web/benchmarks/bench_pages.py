"""Page times of the dashboard over 10,000 jobs with 1,000 runs of history each, on SQLite.

Prints figures; asserts nothing about speed. The history is 10 million rows:
one job's records are written through the backend API (claim, finish) as a
pattern, then copied in the SQLite table to every job and minute by one
``INSERT … SELECT`` (10 million finishes through the API would take hours).
The dashboard then reads it through ``SQLiteBackend.history`` as in
production, over HTTP in-process (Starlette's TestClient), counting the
backend's history calls.

    .venv/bin/python packages/anarchon-web/benchmarks/bench_pages.py [--jobs 10000 --runs 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from starlette.testclient import TestClient

import anarchon_web
from anarchon import RunStatus, Scheduler
from anarchon.backend import Claim
from anarchon_sqlite import SQLiteBackend

MIN = 60_000


async def pattern(path: Path, base: int) -> None:
    """Three runs of job ``pattern`` through the API: succeeded, failed, taken-over shape."""
    backend = SQLiteBackend(str(path))
    await backend.start()
    job = Scheduler(backend).add("pattern", "* * * * *", lambda: None)
    for i, status in enumerate([RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.SUCCEEDED]):
        now = time.time_ns() // 1_000_000
        (won,) = await backend.claim([Claim(job, base + i * MIN, f"i{i}", uuid.uuid4().hex, now)])
        assert won.grant is not None
        error = "ValueError: a pattern failure" if status is RunStatus.FAILED else None
        await backend.finish(won.grant, won.grant.finished(status, started_ms=now, finished_ms=now + 250, error=error))
    await backend.close()


def fill(path: Path, jobs: int, runs: int, base: int) -> float:
    began = time.perf_counter()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(
        """
        WITH RECURSIVE j(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM j WHERE n + 1 < ?),
                       k(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM k WHERE n + 1 < ?)
        INSERT INTO anarchon_runs
        SELECT printf('job-%05d', j.n), ? + k.n * 60000, 0,
               CASE WHEN k.n % 97 = 5 THEN 'failed' ELSE 'succeeded' END,
               'instance-' || ((j.n + k.n) % 3 + 1), CASE WHEN k.n % 211 = 7 THEN 2 ELSE 1 END, k.n + 1, 0, 0,
               (? + k.n * 60000) * 1000 + (k.n * 7919 % 900) * 1000,
               (? + k.n * 60000) * 1000 + 250000 + k.n % 500 * 1000,
               250 + k.n % 500, CASE WHEN k.n % 97 = 5 THEN p.error END, p.token, p.lease_ms, p.expires_ms, 0
        FROM j, k, (SELECT error, token, lease_ms, expires_ms FROM anarchon_runs
                    WHERE job = 'pattern' AND status = 'failed') AS p
        WHERE NOT (k.n % 113 = 11)
        """,
        (jobs, runs, base, base, base),
    )  # a slot in 113 has no record: the strip must show it missed
    conn.commit()
    conn.close()
    return time.perf_counter() - began


def timed(client: TestClient, path: str, repeat: int) -> tuple[float, float, int]:
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        answer = client.get(path)
        times.append((time.perf_counter() - began) * 1000)
        assert answer.status_code == 200, (path, answer.status_code, answer.text[:300])
    return statistics.median(times), max(times), len(answer.content)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="anarchon-web-bench-") as folder:
        path = Path(folder) / "bench.sqlite3"
        now = time.time_ns() // 1_000_000 // MIN * MIN
        base = now - args.runs * MIN
        asyncio.run(pattern(path, base - 10 * MIN))
        took = fill(path, args.jobs, args.runs, base)
        rows = sqlite3.connect(path).execute("SELECT count(*) FROM anarchon_runs").fetchone()[0]
        size = path.stat().st_size / 1e9
        print(f"history: {rows:,} runs of {args.jobs:,} jobs in {took:.0f} s ({size:.1f} GB)")
        scheduler = Scheduler(SQLiteBackend(str(path)))
        for i in range(args.jobs):
            scheduler.add(f"job-{i:05d}", "* * * * *", lambda: None)
        calls = {"history": 0}
        inner = scheduler.backend.history

        async def counted(job: str, limit: int = 100):  # type: ignore[no-untyped-def]
            calls["history"] += 1
            return await inner(job, limit)

        scheduler.backend.history = counted  # type: ignore[method-assign]
        middle = f"job-{args.jobs // 2:05d}"
        slot = base + 500 * MIN
        pages = [
            ("jobs page 1 (50 rows)", "/"),
            ("jobs page 1, JSON", "/?format=json"),
            ("jobs page 100", f"/?page={min(100, args.jobs // 50)}"),
            ("jobs filtered by name", "/?q=job-0999"),
            ("job page (1,000 runs read)", f"/jobs/{middle}"),
            ("job page, filtered", f"/jobs/{middle}?status=failed&instance=instance-2&manual=no"),
            ("job page, JSON", f"/jobs/{middle}?format=json"),
            ("run page", f"/jobs/{middle}/runs/{slot}"),
        ]
        with TestClient(anarchon_web.app(scheduler, open_backend=True)) as client:
            client.get("/")  # warm: templates compiled, pages of SQLite cached
            print(f"{'page':32} {'median ms':>10} {'max ms':>8} {'history calls':>14} {'bytes':>9}")
            for label, url in pages:
                before = calls["history"]
                median, worst, size_b = timed(client, url, args.repeat)
                per = (calls["history"] - before) // args.repeat
                print(f"{label:32} {median:10.1f} {worst:8.1f} {per:14d} {size_b:9,d}")


if __name__ == "__main__":
    main()
