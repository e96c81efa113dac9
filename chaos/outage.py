"""``python -m chaos.outage``: the referee cut from the whole fleet for seconds or minutes, default options.

3 instances with ``--jobs`` every-second jobs (no option set) reach the
loopback server through one fault proxy (``chaos/proxy.py``). After 5 s the
proxy aborts every connection and refuses new ones for ``--cut`` seconds,
then lets them through again. The ledger is reconciled over the whole run:
slots run twice (must be 0), slots not run, and among them those a later
run covered (``missed`` of the catch-up run the default ``catch_up`` policy
makes after an outage), and how long after the link came back the first run
started. Each run has a namespace of its own (a Redis prefix, a PostgreSQL
schema), removed afterwards.

    python -m chaos.outage --backend redis --cut 5 --cut 60
    python -m chaos.outage --backend postgres --cut 600
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

from anarchon_conformance.fleet import Fleet

from .proxy import ProxyLoop

SERVERS = {
    "redis": os.environ.get("ANARCHON_REDIS_URL", "redis://127.0.0.1:6379/0"),
    "postgres": os.environ.get("ANARCHON_POSTGRES_URL", "postgresql://127.0.0.1/test"),
}


def _through(url: str, port: int, name: str, tag: str) -> str:
    parts = urlsplit(url)
    where = f"{parts.scheme}://{parts.username + '@' if parts.username else ''}127.0.0.1:{port}{parts.path}"
    return where + (f"?prefix=outage{tag}:" if name == "redis" else f"?schema=outage{tag}")


async def _clean(name: str, tag: str) -> None:
    """Remove the run's namespace from the shared server."""
    if name == "redis":
        from redis.asyncio import Redis

        client = Redis.from_url(SERVERS[name])
        async for key in client.scan_iter(match=f"outage{tag}:*", count=1000):
            await client.delete(key)
        await client.aclose()
    else:
        import asyncpg

        conn = await asyncpg.connect(SERVERS[name])
        await conn.execute(f'DROP SCHEMA IF EXISTS "outage{tag}" CASCADE')  # tag: hex digits only
        await conn.close()


def one(name: str, cut_s: float, jobs: int, tmp: Path) -> dict[str, float]:
    tag = uuid.uuid4().hex[:8]
    loop = ProxyLoop()
    proxy = loop.proxy(urlsplit(SERVERS[name]).port or (6379 if name == "redis" else 5432))
    url = _through(SERVERS[name], proxy.port, name, tag)
    try:
        with Fleet(tmp / f"{name}-{cut_s:g}", backend=url, instances=3, jobs=jobs) as fleet:
            fleet.start(timeout=120)
            time.sleep(5)
            cut_ms = time.time_ns() // 1_000_000
            proxy.set("drop")
            time.sleep(cut_s)
            proxy.heal()
            healed_ms = time.time_ns() // 1_000_000
            first = fleet.wait_for(lambda r: r["e"] == "start" and r["t"] > healed_ms, timeout=120)
            time.sleep(10)
            fleet.stop()
            report = fleet.report()
    finally:
        proxy.close()
        loop.close()
        asyncio.run(_clean(name, tag))
    figures = {
        "cut_s": cut_s,
        "slots": report.slots,
        "ran": report.runs,
        "twice": report.duplicates,
        "not_run": report.missed + report.covered,
        "covered": report.covered,
        "cut_slots": jobs * int(cut_s),
        "first_run_after_s": round((first["t"] - healed_ms) / 1000, 2),
        "cut_at_ms": cut_ms,
    }
    print(f"{name}, cut {cut_s:g} s: {figures}; {report.summary()}", flush=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=sorted(SERVERS), required=True)
    parser.add_argument("--cut", type=float, action="append", help="seconds the link is cut (repeatable)")
    parser.add_argument("--jobs", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [one(args.backend, cut, args.jobs, Path(tmp)) for cut in args.cut or [5.0]]
    head = ("backend", "cut", "slots", "ran", "run twice", "not run", "covered", "slots in the cut", "first run")
    print("| " + " | ".join(head) + " |\n" + "|---" * len(head) + "|")
    for r in rows:
        print(
            f"| {args.backend} | {r['cut_s']:g} s | {r['slots']} | {r['ran']} | {r['twice']} | {r['not_run']} | "
            f"{r['covered']} | {r['cut_slots']} | {r['first_run_after_s']} s |"
        )


if __name__ == "__main__":
    main()
