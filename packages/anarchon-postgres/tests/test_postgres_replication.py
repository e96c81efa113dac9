"""The guarantee report names what a failover or a crash of PostgreSQL can do to claims, and grants wait for a
standby by default (``min_replicas="auto"``).

A private primary and a streaming standby (``initdb``, ``pg_basebackup -R``,
``pg_ctl``, run as the ``postgres`` user when the tests run as root) on free
ports in a temp dir, stopped in ``finally``. The shared server streams to no
standby: its report says nothing can run twice on a failover.
"""

from __future__ import annotations

import asyncio
import glob
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from anarchon import Job
from anarchon.backend import ClaimResult, Outcome
from anarchon.guarantees import Finding, check_findings
from anarchon_conformance import free_port
from anarchon_postgres import PostgresBackend

pytestmark = pytest.mark.slow

BIN = sorted(glob.glob("/usr/lib/postgresql/*/bin"))


def _run(*argv: str) -> None:
    user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    done = subprocess.run([*user, *argv], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{argv[0]}: {done.stderr[-800:]}"


@pytest.fixture(scope="module")
def primary_with_standby() -> Iterator[tuple[str, str]]:
    if not BIN:
        if os.environ.get("CI"):
            pytest.fail("CI is set: /usr/lib/postgresql/*/bin is needed for the replication tests")
        pytest.skip("!!! SKIPPED: no /usr/lib/postgresql/*/bin to start a private primary and standby")
    pg = BIN[-1]
    root = Path(tempfile.mkdtemp(prefix="anarchon-pgrep-"))  # not tmp_path: the postgres user must enter it
    root.chmod(0o755)
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    ports = [free_port(), 0]
    ports[1] = free_port({ports[0]})
    data = [root / "primary", root / "standby"]
    opts = [f"-p {p} -c listen_addresses=127.0.0.1 -k {root} -c fsync=off" for p in ports]
    try:
        _run(f"{pg}/initdb", "-D", str(data[0]), "-A", "trust", "-U", "postgres", "--no-sync")
        _run(f"{pg}/pg_ctl", "-D", str(data[0]), "-l", str(root / "primary.log"), "-o", opts[0], "-w", "start")
        _run(f"{pg}/pg_basebackup", "-h", "127.0.0.1", "-p", str(ports[0]), "-U", "postgres", "-D", str(data[1]),
             "-R", "-X", "stream", "-c", "fast")  # fmt: skip
        _run(f"{pg}/pg_ctl", "-D", str(data[1]), "-l", str(root / "standby.log"), "-o", opts[1], "-w", "start")
        yield (
            f"postgresql://postgres@127.0.0.1:{ports[0]}/postgres",
            f"postgresql://postgres@127.0.0.1:{ports[1]}/postgres",
        )
    finally:
        for d in data:
            if (d / "postmaster.pid").exists():
                subprocess.run(
                    [*(["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []),
                     f"{pg}/pg_ctl", "-D", str(d), "-m", "immediate", "-w", "stop"],
                    capture_output=True, timeout=60,
                )  # fmt: skip
        shutil.rmtree(root, ignore_errors=True)


async def _streaming(dsn: str, state: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        for _ in range(200):
            if await conn.fetchval("SELECT count(*) FROM pg_stat_replication WHERE sync_state = $1", state):
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"no standby in sync_state {state!r}")
    finally:
        await conn.close()


async def _set(dsn: str, setting: str, value: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f"ALTER SYSTEM SET {setting} = '{value}'")
        await conn.execute("SELECT pg_reload_conf()")
    finally:
        await conn.close()


async def _report(dsn: str, **options: object) -> dict[str, Finding]:
    """The findings by topic, read as ``anarchon check`` reads them: the backend opened read-only."""
    backend = PostgresBackend(dsn=dsn, schema="anarchon_rep_test", **options)  # type: ignore[arg-type]
    await backend.start_read_only()
    try:
        return {f.topic: f for f in check_findings(await backend.guarantees())}
    finally:
        await backend.close()


async def test_an_asynchronous_standby_is_waited_for_by_default_and_a_failover_risk_without(primary_with_standby):
    primary, _ = primary_with_standby
    await _set(primary, "synchronous_standby_names", "")
    await _streaming(primary, "async")
    failover = (await _report(primary))["failover"]
    assert failover.ok and "each grant waits until one has flushed it (min_replicas=auto)" in failover.detail
    failover = (await _report(primary, min_replicas=0))["failover"]
    assert not failover.ok and "asynchronously (synchronous_standby_names is empty)" in failover.detail
    assert "min_replicas=0" in failover.detail and "min_replicas at 'auto'" in failover.fix
    assert "synchronous_standby_names" in failover.fix and "When the server fails over" in failover.fix


async def test_a_grant_runs_only_once_the_standby_flushed_it(primary_with_standby, make_job, make_claim):
    """The standby's WAL receiver stopped (SIGSTOP): its connection stays, its flush position stands still.
    A grant then waits replica_timeout_ms and is unknown (never run); with min_replicas=0 it runs at once."""
    primary, standby = primary_with_standby
    await _set(primary, "synchronous_standby_names", "")
    await _streaming(primary, "async")
    schema = f"anarchon_wait_{uuid.uuid4().hex[:8]}"
    waiting = PostgresBackend(dsn=primary, schema=schema)
    eager = PostgresBackend(dsn=primary, schema=schema, min_replicas=0)
    await waiting.start()
    await eager.start()
    conn = await asyncpg.connect(standby)
    try:
        receiver = await conn.fetchval("SELECT pid FROM pg_stat_wal_receiver")
        assert receiver, "the standby has no WAL receiver"
        job = make_job("waits", overlap="allow")  # each slot a grant, whatever runs

        async def _claim(backend: PostgresBackend, job: Job, slot_ms: int) -> ClaimResult:
            (result,) = await backend.claim([make_claim(job, slot_ms)])
            return result

        assert (await _claim(waiting, job, 1_000)).outcome is Outcome.WON, "a standby that keeps up confirms"
        os.kill(receiver, signal.SIGSTOP)
        try:
            began = time.monotonic()
            stuck = await _claim(waiting, job, 2_000)
            took = time.monotonic() - began
            assert stuck.outcome is Outcome.UNKNOWN, f"a grant no standby flushed must not run: {stuck}"
            assert took >= waiting.replica_timeout_ms / 1000, f"it answered after {took:.3f} s, before its wait"
            assert (await _claim(eager, job, 3_000)).outcome is Outcome.WON, "min_replicas=0 does not wait"
        finally:
            os.kill(receiver, signal.SIGCONT)
        assert (await _claim(waiting, job, 4_000)).outcome is Outcome.WON, "confirmed again once it flushes"
    finally:
        await conn.close()
        await waiting.close()
        await eager.close()
        drop = await asyncpg.connect(primary)
        try:
            await drop.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await drop.close()


async def test_a_synchronous_standby_holds_every_claim(primary_with_standby):
    primary, _ = primary_with_standby
    await _set(primary, "synchronous_standby_names", "*")
    try:
        await _streaming(primary, "sync")
        report = await _report(primary)
        assert report["failover"].ok and "synchronous standby (1 of 1)" in report["failover"].detail
        assert report["role"].ok
    finally:
        await _set(primary, "synchronous_standby_names", "")


async def test_a_commit_that_a_crash_can_lose_is_named_with_its_setting(primary_with_standby):
    """The private primary runs with fsync=off (fast tests), exactly what the report must flag."""
    primary, _ = primary_with_standby
    durability = (await _report(primary))["durability"]
    assert not durability.ok and durability.detail.startswith("fsync off")
    assert durability.fix == "set fsync = on in postgresql.conf"
    assert (await _report(primary))["commit"].ok
    await _set(primary, "synchronous_commit", "off")
    try:
        commit = (await _report(primary))["commit"]
        assert not commit.ok and "synchronous_commit = off" in commit.detail
    finally:
        await _set(primary, "synchronous_commit", "on")


async def test_a_url_that_names_the_standby_is_refused_by_the_report(primary_with_standby):
    _, standby = primary_with_standby
    role = (await _report(standby))["role"]
    assert not role.ok and "standby" in role.detail and "primary" in role.fix


async def test_a_server_without_standbys_reports_that_nothing_runs_twice_on_failover(pg_dsn, schema):
    backend = PostgresBackend(dsn=pg_dsn, schema=schema)
    await backend.start()
    try:
        report = {f.topic: f for f in check_findings(await backend.guarantees())}
    finally:
        await backend.close()
    assert report["failover"].ok and "no standby" in report["failover"].detail
    assert report["role"].ok
