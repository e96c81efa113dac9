"""Opening the file: bad paths, foreign files and newer schemas each get a clear error at start().

An older file gains what this release adds to it (the runs' earlier column) when opened.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from anarchon.errors import BackendUnavailableError
from anarchon.plugins import PluginManager
from anarchon.run import RunStatus
from anarchon_sqlite import SCHEMA_VERSION, DatabaseFileError, SQLiteBackend


async def test_first_use_creates_a_versioned_wal_database(db_path):
    backend = SQLiteBackend(db_path)
    await backend.start()
    await backend.close()
    with sqlite3.connect(db_path) as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert raw.execute("SELECT value FROM anarchon_meta WHERE key = 'schema_version'").fetchone() == (
            SCHEMA_VERSION,
        )
        assert raw.execute("PRAGMA user_version").fetchone() == (0,)  # left to the application
    raw.close()


async def test_shares_a_file_with_the_applications_own_tables(db_path):
    with sqlite3.connect(db_path) as raw:
        raw.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
        raw.execute("PRAGMA user_version = 42")
    raw.close()
    backend = SQLiteBackend(db_path)
    await backend.start()
    await backend.close()
    with sqlite3.connect(db_path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone() == (42,)
        assert raw.execute("SELECT count(*) FROM orders").fetchone() == (0,)
    raw.close()


@pytest.mark.parametrize(("mode", "pragma"), [("normal", 1), ("full", 2)])
async def test_synchronous_is_applied(instances, mode, pragma):
    (backend,) = await instances(1, synchronous=mode)
    assert backend._conn is not None
    async with backend._conn.execute("PRAGMA synchronous") as cursor:
        assert await cursor.fetchone() == (pragma,)
    async with backend._conn.execute("PRAGMA busy_timeout") as cursor:
        assert await cursor.fetchone() == (5000,)


async def test_missing_folder(tmp_path):
    path = tmp_path / "no" / "such" / "anarchon.sqlite3"
    with pytest.raises(DatabaseFileError, match="does not exist") as caught:
        await SQLiteBackend(path).start()
    message = str(caught.value)
    assert str(path) in message
    assert f"mkdir -p {path.parent}" in message
    assert caught.value.path == str(path)
    assert isinstance(caught.value, BackendUnavailableError)
    assert not path.parent.exists()


async def test_path_is_a_folder(tmp_path):
    with pytest.raises(DatabaseFileError, match="it is a folder") as caught:
        await SQLiteBackend(tmp_path).start()
    assert str(tmp_path / "anarchon.sqlite3") in str(caught.value)


async def test_folder_that_cannot_be_written(worker):
    """A folder this user may not write: as 'nobody' when the tests run as root, who may write anywhere."""
    top = Path(tempfile.mkdtemp(prefix="anarchon-ro-"))
    folder = top / "locked"
    try:
        folder.mkdir()
        top.chmod(0o755)
        folder.chmod(0o555)
        path = folder / "anarchon.sqlite3"
        as_nobody = ["65534"] if os.geteuid() == 0 else []
        out = subprocess.run(
            [sys.executable, str(worker), "start", str(path), *as_nobody],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            cwd="/",
        )
        assert out.stdout.startswith("DatabaseFileError: "), out.stderr
        assert f"cannot write SQLite database {path}: this user may not write folder {folder}" in out.stdout
        assert "give it write permission there" in out.stdout
        assert not path.exists()
    finally:
        folder.chmod(0o755)
        subprocess.run(["rm", "-rf", str(top)], check=True)


async def test_folder_no_user_may_write():
    path = "/proc/self/anarchon.sqlite3"
    with pytest.raises(DatabaseFileError, match="may not write folder /proc/self"):
        await SQLiteBackend(path).start()


async def test_file_sqlite_cannot_open_is_explained(tmp_path):
    """Past the permission checks SQLite can still fail; its error is kept and explained."""
    path = tmp_path / "anarchon.sqlite3"
    path.symlink_to(tmp_path / "gone" / "target.sqlite3")
    with pytest.raises(DatabaseFileError, match=f"cannot open SQLite database {path} \\(unable to open") as caught:
        await SQLiteBackend(path).start()
    assert "check that its folder exists" in str(caught.value)


async def test_file_that_is_not_a_database(db_path):
    db_path.write_text("name,schedule\nbackup,0 2 * * *\n" * 200)
    with pytest.raises(DatabaseFileError, match="is not a SQLite database") as caught:
        await SQLiteBackend(db_path).start()
    assert str(db_path) in str(caught.value)
    assert "point path at another file" in str(caught.value)
    assert db_path.read_text().startswith("name,schedule")  # left untouched


async def test_database_written_by_a_newer_schema(db_path):
    backend = SQLiteBackend(db_path)
    await backend.start()
    await backend.close()
    with sqlite3.connect(db_path) as raw:
        raw.execute("UPDATE anarchon_meta SET value = ? WHERE key = 'schema_version'", (SCHEMA_VERSION + 1,))
    raw.close()
    with pytest.raises(DatabaseFileError, match="newer anarchon-sqlite") as caught:
        await SQLiteBackend(db_path).start()
    message = str(caught.value)
    assert str(db_path) in message
    assert f"schema version {SCHEMA_VERSION + 1}" in message
    assert "upgrade anarchon-sqlite" in message


async def test_a_failed_start_leaves_nothing_open(db_path):
    db_path.write_bytes(b"\x00" * 4096)
    backend = SQLiteBackend(db_path)
    with pytest.raises(DatabaseFileError):
        await backend.start()
    assert backend._conn is None
    with pytest.raises(RuntimeError, match="not started"):
        await backend.history("job")


async def test_eight_processes_create_a_new_file_at_once(db_path, worker):
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable, str(worker), "start", str(db_path), stdout=asyncio.subprocess.PIPE
        )
        for _ in range(8)
    ]
    outs = await asyncio.gather(*(p.communicate() for p in procs))
    assert [o[0].decode().strip() for o in outs] == ["ok"] * 8


async def test_start_close_start_again(db_path, make_job, make_claim):
    backend = SQLiteBackend(db_path)
    await backend.start()
    await backend.start()  # started twice: one connection
    await backend.close()
    await backend.close()
    await backend.start()
    assert (await backend.claim([make_claim(make_job(), 1000)]))[0].won
    await backend.close()


async def test_calls_before_start_say_what_to_do(db_path):
    with pytest.raises(RuntimeError, match=r"await backend.start\(\) first"):
        await SQLiteBackend(db_path).history("job")


# -- constructor and URL ----------------------------------------------------------------------


def test_relative_and_absolute_urls(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    relative = SQLiteBackend.from_url("sqlite:///data/anarchon.sqlite3")
    assert relative.path == str(tmp_path / "data" / "anarchon.sqlite3")
    absolute = SQLiteBackend.from_url("sqlite:////var/lib/app/cron.sqlite3")
    assert absolute.path == "/var/lib/app/cron.sqlite3"
    spaced = SQLiteBackend.from_url("sqlite:///my%20jobs.sqlite3?synchronous=FULL&busy_timeout_ms=250")
    assert spaced.path == str(tmp_path / "my jobs.sqlite3")
    assert (spaced.synchronous, spaced.busy_timeout_ms) == ("full", 250)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("sqlite://", "names no file"),
        ("sqlite:///", "names no file"),
        ("sqlite://localhost/x.db", "names a host"),
        ("redis:///x.db", "not a sqlite URL"),
        ("sqlite:///x.db?journal=wal", "unknown option 'journal'"),
        ("sqlite:///x.db?busy_timeout_ms=soon", "busy_timeout_ms='soon'"),
        ("sqlite:///x.db?synchronous=off", "synchronous='off'"),
        ("sqlite:///:memory:", "MemoryBackend"),
    ],
)
def test_bad_urls(url, message):
    with pytest.raises(ValueError, match=message):
        SQLiteBackend.from_url(url)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"path": ""}, "must name a database file"),
        ({"path": ":memory:"}, "MemoryBackend"),
        ({"path": "file:x.db?mode=ro"}, "plain file path"),
        ({"busy_timeout_ms": -1}, "busy_timeout_ms=-1"),
        ({"busy_timeout_ms": 1.5}, "busy_timeout_ms=1.5"),
        ({"synchronous": "OFF"}, "synchronous='OFF'"),
    ],
)
def test_bad_constructor_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SQLiteBackend(**kwargs)


def test_repr_and_declared_capabilities(db_path):
    backend = SQLiteBackend(db_path)
    assert repr(backend) == f"SQLiteBackend(path={str(db_path)!r}, synchronous='normal')"
    caps = SQLiteBackend.capabilities
    assert (caps.lease, caps.history_ttl, caps.server_clock, caps.multi_process) == (True, True, False, True)
    assert (SQLiteBackend.name, SQLiteBackend.url_schemes) == ("sqlite", ("sqlite",))


def test_registered_through_the_entry_point(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    plugins = PluginManager()
    assert plugins.backends()["sqlite"] is SQLiteBackend
    backend = plugins.backend_from_url("sqlite:///anarchon.sqlite3")
    assert isinstance(backend, SQLiteBackend)
    assert backend.path == str(tmp_path / "anarchon.sqlite3")


async def test_eight_instances_start_on_a_new_file_at_once(tmp_path):
    """Switching a new file to WAL answers 'locked' at once to the others; start() waits instead."""
    for n in range(25):
        backends = [SQLiteBackend(tmp_path / f"new{n}.sqlite3") for _ in range(8)]
        try:
            await asyncio.gather(*(b.start() for b in backends))
        finally:
            for backend in backends:
                await backend.close()


async def test_concurrent_starts_of_one_object_open_one_connection(db_path):
    backend = SQLiteBackend(db_path)
    await asyncio.gather(*(backend.start() for _ in range(5)))
    first = backend._conn
    await backend.start()
    assert backend._conn is first
    await backend.close()


def _columns(path: Path) -> set[str]:
    with sqlite3.connect(path) as raw:
        found = {row[1] for row in raw.execute("PRAGMA table_info(anarchon_runs)")}
    raw.close()
    return found


def _as_before_earlier(path: Path) -> None:
    """The file as a release before ``Run.earlier`` left it: its runs table has no earlier column."""
    with sqlite3.connect(path) as raw:
        raw.execute("ALTER TABLE anarchon_runs DROP COLUMN earlier")
    raw.close()
    assert "earlier" not in _columns(path)


async def test_a_file_from_before_earlier_attempts_gains_the_column_and_reads_its_runs(
    instances, db_path, make_job, make_claim, wait_until
):
    (a,) = await instances(1)
    job = make_job("older", lease_ms=400, overlap="allow")
    (done,) = await a.claim([make_claim(job, 1000, "a")])
    assert done.grant is not None
    finished = (await a.history("older"))[0].replace(status=RunStatus.SUCCEEDED)
    assert await a.finish(done.grant, finished)
    (running,) = await a.claim([make_claim(job, 2000, "a")])
    assert running.grant is not None
    await a.close()
    _as_before_earlier(db_path)
    await a.start()
    assert "earlier" in _columns(db_path)
    assert [(r.slot_ms, r.status, r.earlier) for r in await a.history("older")] == [
        (2000, RunStatus.RUNNING, ()), (1000, RunStatus.SUCCEEDED, ()),
    ]  # fmt: skip
    (b,) = await instances(1)
    (taken,) = await wait_until(lambda: b.take_over([job], "b"))
    assert taken.grant is not None and taken.grant.attempt == 2
    record = (await b.history("older"))[0]
    assert [(e.attempt, e.instance, e.fencing) for e in record.earlier] == [(1, "a", running.grant.fencing)]


async def test_eight_processes_open_a_file_from_before_earlier_attempts_at_once(db_path, worker):
    backend = SQLiteBackend(db_path)
    await backend.start()
    await backend.close()
    _as_before_earlier(db_path)
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable, str(worker), "start", str(db_path), stdout=asyncio.subprocess.PIPE
        )
        for _ in range(8)
    ]
    outs = await asyncio.gather(*(p.communicate() for p in procs))
    assert [o[0].decode().strip() for o in outs] == ["ok"] * 8
    assert "earlier" in _columns(db_path)
