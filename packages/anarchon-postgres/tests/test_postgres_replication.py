"""``start()`` warns when claims commit on a primary that replicates them asynchronously.

A private primary and a streaming standby (``initdb``, ``pg_basebackup -R``,
``pg_ctl``, run as the ``postgres`` user when the tests run as root) on free
ports in a temp dir, stopped in ``finally``. The shared server streams to no
standby, so it must not warn.
"""

from __future__ import annotations

import asyncio
import glob
import logging
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from anarchon_conformance import free_port
from anarchon_postgres import PostgresBackend

pytestmark = pytest.mark.slow

BIN = sorted(glob.glob("/usr/lib/postgresql/*/bin"))


def _run(*argv: str) -> None:
    user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    done = subprocess.run([*user, *argv], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{argv[0]}: {done.stderr[-800:]}"


@pytest.fixture(scope="module")
def primary_with_standby() -> Iterator[str]:
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
        yield f"postgresql://postgres@127.0.0.1:{ports[0]}/postgres"
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


async def _set_sync_names(dsn: str, names: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f"ALTER SYSTEM SET synchronous_standby_names = '{names}'")
        await conn.execute("SELECT pg_reload_conf()")
    finally:
        await conn.close()


async def _start_logs(dsn: str, caplog: pytest.LogCaptureFixture, schema: str = "anarchon_rep_test") -> list[str]:
    caplog.clear()
    backend = PostgresBackend(dsn=dsn, schema=schema)
    with caplog.at_level(logging.WARNING, logger="anarchon.postgres"):
        await backend.start()
    await backend.close()
    return [r.getMessage() for r in caplog.records if r.name == "anarchon.postgres"]


async def test_start_warns_on_a_primary_that_streams_claims_asynchronously(primary_with_standby, caplog):
    await _set_sync_names(primary_with_standby, "")
    await _streaming(primary_with_standby, "async")
    (message,) = await _start_logs(primary_with_standby, caplog)
    assert "asynchronously" in message and "synchronous_standby_names is empty" in message
    assert "When the server fails over" in message


async def test_start_is_quiet_when_the_standby_is_synchronous(primary_with_standby, caplog):
    await _set_sync_names(primary_with_standby, "*")
    try:
        await _streaming(primary_with_standby, "sync")
        assert await _start_logs(primary_with_standby, caplog) == []
    finally:
        await _set_sync_names(primary_with_standby, "")


async def test_start_is_quiet_on_a_server_without_standbys(pg_dsn, schema, caplog):
    assert [m for m in await _start_logs(pg_dsn, caplog, schema) if "asynchronously" in m] == []
