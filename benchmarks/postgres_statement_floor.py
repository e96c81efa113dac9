"""What one statement a few times a second costs PostgreSQL, by what the statement does.

``python -m benchmarks.postgres_statement_floor [--connections 8] [--hz 4] [--seconds 20] [--rounds 3]
[--no-report]``

Each instance of a fleet sends the referee a few statements a second whatever
its jobs (its heartbeat four times a second, its registry read, its polls:
``python -m benchmarks.fleet_size --idle``), and that traffic is what makes
the server's CPU per run grow with the fleet at 100 jobs. This measures what
such a statement costs as a function of what it does: ``--connections``
sessions (the heart's settings: ``synchronous_commit = off``) each send one
statement ``--hz`` times a second for ``--seconds``, and the server
processes' on-CPU time (``/proc/<pid>/schedstat``, so the server must run on
this host) gives the CPU per session per second and per statement. The
statements, alternated round by round (median of ``--rounds``):

- a ``SELECT`` of two parameters: the floor of a round trip, parse and wake;
- a read of one row of ``instances`` by primary key;
- a one-row upsert of ``instances`` (what a beat must write);
- the heartbeat's own statement (``sql/statement_beat.sql``: the upsert, the
  silence rule, the deletion of old records, the dead list);
- a read of ``pg_stat_activity`` (what a liveness judged from the server's
  view of its sessions, instead of a written record, would read).

Writes its section of ``benchmarks/results/REPORT.md`` unless ``--no-report``.
``ANARCHON_POSTGRES_DSN`` names the server (default the loopback one).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
import uuid
from pathlib import Path

import asyncpg

from anarchon.liveness import LIVENESS_TTL_MS, RETAIN_DEAD_MS
from anarchon_postgres import PostgresBackend
from anarchon_postgres._schema import quote_schema
from anarchon_postgres._statements import Statements
from scripts.report import BENCHMARK_INTRO, write_section

from ._machine import machine
from ._proc import oncpu_seconds

DSN = os.environ.get("ANARCHON_POSTGRES_DSN", "postgresql://127.0.0.1:5432/postgres")
REPORT = Path(__file__).parent / "results" / "REPORT.md"


def _statements(schema: str) -> dict[str, tuple[str, tuple[object, ...]]]:
    """Each measured statement and its arguments after the instance name."""
    q = quote_schema(schema)
    return {
        "SELECT of two parameters": ("SELECT $1::text, $2::bigint", (LIVENESS_TTL_MS,)),
        "read of one row by primary key": (f"SELECT alive_until FROM {q}.instances WHERE instance = $1", ()),
        "one-row upsert": (
            f"INSERT INTO {q}.instances (instance, alive_until) "
            "VALUES ($1, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint + $2) "
            "ON CONFLICT (instance) DO UPDATE SET alive_until = excluded.alive_until",
            (LIVENESS_TTL_MS,),
        ),
        "the heartbeat's statement": (Statements.for_schema(q).beat, (LIVENESS_TTL_MS, RETAIN_DEAD_MS)),
        "read of pg_stat_activity": ("SELECT count(*) FROM pg_stat_get_activity(NULL) WHERE $1::text <> ''", ()),
    }


async def _measure(sql: str, extra: tuple[object, ...], args: argparse.Namespace) -> tuple[float, float]:
    """Server CPU of ``args.connections`` sessions sending ``sql``: ms per session per second, and per statement.

    Both from what was sent and how long it took, not from ``--hz`` and
    ``--seconds``: each session sleeps after its answer, so it sends a little
    less often than ``--hz``.
    """
    conns = [await asyncpg.connect(DSN, server_settings={"synchronous_commit": "off"}) for _ in range(args.connections)]
    try:
        names = [f"floor-{n}" for n in range(args.connections)]
        for conn, name in zip(conns, names, strict=True):
            await conn.fetch(sql, name, *extra)  # prepared, and the row there, before the window
        pids = [conn.get_server_pid() for conn in conns]
        sent = 0
        start = time.monotonic()
        end = start + args.seconds

        async def send(conn: asyncpg.Connection, name: str) -> None:
            nonlocal sent
            while time.monotonic() < end:
                await conn.fetch(sql, name, *extra)
                sent += 1
                await asyncio.sleep(1 / args.hz)

        before = oncpu_seconds(pids)
        await asyncio.gather(*(send(conn, name) for conn, name in zip(conns, names, strict=True)))
        used_ms = (oncpu_seconds(pids) - before) * 1000
        return used_ms / args.connections / (time.monotonic() - start), used_ms / sent
    finally:
        for conn in conns:
            await conn.close()


async def _run(args: argparse.Namespace) -> dict[str, list[tuple[float, float]]]:
    schema = f"floor_{uuid.uuid4().hex[:10]}"
    backend = PostgresBackend(DSN, schema=schema)
    await backend.start()  # the schema as the instances have it: instances table, fillfactor and all
    await backend.close()
    found: dict[str, list[tuple[float, float]]] = {}
    try:
        statements = _statements(schema)
        for _ in range(args.rounds):
            for label, (sql, extra) in statements.items():
                found.setdefault(label, []).append(await _measure(sql, extra, args))
                print(f"{label}: {found[label][-1][0]:.2f} ms/s", flush=True)
    finally:
        admin = await asyncpg.connect(DSN)
        try:
            await admin.execute(f"DROP SCHEMA {quote_schema(schema)} CASCADE")
        finally:
            await admin.close()
    return found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.postgres_statement_floor", description=__doc__)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--hz", type=float, default=4.0, help="statements per session per second")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-report", action="store_true")
    args = parser.parse_args(argv)
    found = asyncio.run(_run(args))
    info = machine()
    lines = [
        "# What one statement a few times a second costs PostgreSQL",
        "",
        f"`python -m benchmarks.postgres_statement_floor`: {args.connections} sessions each sending one "
        f"statement {args.hz:g} times a second for {args.seconds:.0f} s (`synchronous_commit = off`, as the "
        f"heart's session), the server processes' on-CPU time; median of {args.rounds} alternated rounds "
        "(the range in brackets).",
        "",
        *(f"- {k}: {v}" for k, v in info.items()),
        "",
        "| statement | server CPU per session, ms/s | per statement, ms |",
        "|---|---|---|",
    ]
    for label, rounds in found.items():
        per_s = [r[0] for r in rounds]
        mid = statistics.median(per_s)
        each = statistics.median(r[1] for r in rounds)
        lines.append(f"| {label} | {mid:.2f} ({min(per_s):.2f}-{max(per_s):.2f}) | {each:.3f} |")
    lines.append("")
    page = "\n".join(lines)
    print(page)
    if not args.no_report:
        label = (
            "What one statement a few times a second costs PostgreSQL (`python -m benchmarks.postgres_statement_floor`)"
        )
        write_section(REPORT, "postgres-statement-floor", label, page, BENCHMARK_INTRO)


if __name__ == "__main__":
    main()
