"""One OS process of a SQLite contract test (not a test module: tests run it with python).

``python sqlite_worker.py start PATH [UID]``
    start a backend on PATH and print ``ok`` or ``<ErrorType>: <message>``;
    with UID, first drop to that user (root only; after the imports, since
    the interpreter may live where that user cannot read).
``python sqlite_worker.py race PATH ID SLOTS JOBS BUSY_TIMEOUT_MS``
    start, print ``ready``, wait for a line on stdin, then claim SLOTS slots of
    JOBS jobs (one batch per slot, as the scheduler sends them) and print one
    JSON object: the (job, slot) pairs won and the number of calls that raised
    (after ``busy`` on a line of its own at the first call that raised).
    A call that raised is *unknown*, so it is retried with the same tokens, as
    the scheduler would; a wrong answer would show as a second winner.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid

from anarchon.backend import Claim
from anarchon.job import Job
from anarchon_sqlite import SQLiteBackend

SLOT = 1_800_000_000_000


async def start(path: str) -> None:
    backend = SQLiteBackend(path)
    try:
        await backend.start()
    except Exception as exc:
        print(f"{type(exc).__name__}: {exc}", flush=True)
        return
    await backend.close()
    print("ok", flush=True)


async def race(path: str, instance: str, slots: int, jobs: int, busy_timeout_ms: int) -> None:
    backend = SQLiteBackend(path, busy_timeout_ms=busy_timeout_ms)
    await backend.start()
    made = [
        Job(f"j{k}", "* * * * * *", lambda: None, options=backend.job_options(f"j{k}", {"overlap": "allow"}))
        for k in range(jobs)
    ]
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    won: list[tuple[str, int]] = []
    errors = 0
    for n in range(slots):
        slot = SLOT + n * 1000
        batch = [Claim(job, slot, instance, uuid.uuid4().hex, time.time_ns() // 1_000_000) for job in made]
        while True:
            try:
                results = await backend.claim(batch)
            except Exception:
                if not errors:
                    print("busy", flush=True)  # the first refusal, told at once (test_sqlite_busy waits for it)
                errors += 1
                await asyncio.sleep(0.001)
                continue
            won += [(c.job, c.slot_ms) for c, r in zip(batch, results, strict=True) if r.won]
            break
    await backend.close()
    print(json.dumps({"won": won, "errors": errors}), flush=True)


def main() -> None:
    mode, path, *rest = sys.argv[1:]
    if mode == "start":
        if rest:
            os.setgid(int(rest[0]))
            os.setgroups([])
            os.setuid(int(rest[0]))
        asyncio.run(start(path))
    else:
        asyncio.run(race(path, rest[0], int(rest[1]), int(rest[2]), int(rest[3])))


if __name__ == "__main__":
    main()
