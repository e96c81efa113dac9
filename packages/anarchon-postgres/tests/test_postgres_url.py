"""The PostgreSQL URL and the read-only commands against the real server.

``?schema=`` reaches any schema from the CLI; read-only commands never create
or migrate one; ``anarchon migrate`` prints or applies the SQL; a password
with URL characters is never shown.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import traceback
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, urlsplit

import asyncpg
import pytest

from anarchon import Scheduler
from anarchon.cli import main
from anarchon_postgres import SCHEMA_VERSION, PostgresBackend

pytestmark = pytest.mark.postgres

PASSWORD = "p#ss/w?rd"  # trust auth on the test server accepts any password; the URL must still carry it whole


async def _fetchval(dsn: str, sql: str, *args: object) -> object:
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetchval(sql, *args)
    finally:
        await conn.close()


def _schema_exists(dsn: str, schema: str) -> bool:
    found = asyncio.run(
        _fetchval(dsn, "SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1", schema)
    )
    return found == 1


@pytest.fixture
def fresh(pg_dsn: str) -> Iterator[str]:
    """A schema name nobody has used; dropped afterwards if a test created it."""
    name = f"anarchon_u_{uuid.uuid4().hex[:12]}"
    yield name
    asyncio.run(_fetchval(pg_dsn, f'DROP SCHEMA IF EXISTS "{name}" CASCADE'))


def _url(dsn: str, **query: str) -> str:
    return dsn + ("&" if "?" in dsn else "?") + "&".join(f"{k}={v}" for k, v in query.items())


def test_the_cli_reads_the_schema_given_in_the_url(pg_dsn: str, fresh: str, capsys: pytest.CaptureFixture[str]) -> None:
    url = _url(pg_dsn, schema=fresh)
    scheduler = Scheduler(backend=url, instance_id="pg-url")
    scheduler.add("report", "0 0 1 1 *", lambda: None)
    run = asyncio.run(scheduler.run_now("report"))
    assert isinstance(scheduler.backend, PostgresBackend) and scheduler.backend.schema == fresh
    assert main(["history", "--backend", url, "report", "--json"]) == 0
    (shown,) = json.loads(capsys.readouterr().out)
    assert (shown["slot_ms"], shown["instance"], shown["status"]) == (run.slot_ms, "pg-url", "succeeded")


def test_read_only_commands_never_create_the_schema(
    pg_dsn: str, fresh: str, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = _url(pg_dsn, schema=fresh)
    assert main(["history", "--backend", url, "report"]) == 1
    err = capsys.readouterr().err
    assert f"schema '{fresh}'" in err and "has no anarchon tables" in err and "anarchon migrate" in err
    assert main(["check", "--backend", url]) == 0
    out = capsys.readouterr().out
    assert "ok     connect" in out and "schema: not at this release's version yet" in out
    (tmp_path / "pgapp.py").write_text(
        f"from anarchon import Scheduler\nscheduler = Scheduler({url!r})\nscheduler.add('report', '0 2 * * *', print)\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["jobs", "pgapp:scheduler", "--json"]) == 0
    assert [(r["last_status"], r["paused"]) for r in json.loads(capsys.readouterr().out)] == [(None, False)]
    assert main(["pauses", "--backend", url]) == 1
    assert "has no anarchon tables" in capsys.readouterr().err
    assert main(["migrate", "--backend", url, "--sql"]) == 0
    assert f'CREATE SCHEMA IF NOT EXISTS "{fresh}"' in capsys.readouterr().out
    assert not _schema_exists(pg_dsn, fresh)


def test_migrate_applies_the_schema_and_start_finds_it_made(
    pg_dsn: str, fresh: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _url(pg_dsn, schema=fresh)
    assert main(["migrate", "--backend", url]) == 0
    assert f"schema at version {SCHEMA_VERSION}" in capsys.readouterr().out
    version = asyncio.run(_fetchval(pg_dsn, f'SELECT max(version) FROM "{fresh}".schema_version'))
    assert version == SCHEMA_VERSION
    assert main(["migrate", "--backend", url, "--sql"]) == 0
    assert "nothing to apply" in capsys.readouterr().out
    # The schema exists now: an honest "no runs" (--force: no live instance defines 'report' either).
    assert main(["history", "--backend", url, "report", "--force"]) == 0
    assert "no runs recorded for 'report'" in capsys.readouterr().out


@pytest.mark.skipif(not shutil.which("psql"), reason="psql is not on PATH: the DBA's path cannot be tried")
def test_the_printed_sql_is_what_a_dba_runs_with_psql(
    pg_dsn: str, fresh: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _url(pg_dsn, schema=fresh)
    assert main(["migrate", "--backend", url, "--sql"]) == 0
    script = capsys.readouterr().out
    applied = subprocess.run(
        ["psql", "-v", "ON_ERROR_STOP=1", "-q", "-d", pg_dsn, "-f", "-"], input=script, capture_output=True, text=True
    )
    assert applied.returncode == 0, applied.stderr
    assert asyncio.run(_fetchval(pg_dsn, f'SELECT max(version) FROM "{fresh}".schema_version')) == SCHEMA_VERSION
    scheduler = Scheduler(backend=url)  # an instance starting on the DBA's schema uses it as it is
    scheduler.add("report", "0 0 1 1 *", lambda: None)
    assert asyncio.run(scheduler.run_now("report")).status.value == "succeeded"


def test_unknown_query_keys_are_refused_with_the_accepted_ones() -> None:
    with pytest.raises(ValueError, match="unknown option 'schem'") as info:
        PostgresBackend.from_url("postgresql://db/app?schem=billing")
    message = str(info.value)
    assert (
        "anarchon's min_replicas, replica_timeout_ms, schema, timeout_ms" in message
        and "sslmode" in message
        and "application_name" in message
    )


@pytest.mark.parametrize(
    ("option", "value"),
    [("schema", "bad-name"), ("schema", "pg_x"), ("timeout_ms", 0), ("min_replicas", -1), ("replica_timeout_ms", 0)],
)
def test_a_value_in_the_url_gets_the_constructors_own_check(option: str, value: object) -> None:
    with pytest.raises(ValueError, match=option) as from_argument:
        PostgresBackend(**{option: value})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=option) as from_url:
        PostgresBackend.from_url(f"postgresql://db/app?{option}={value}")
    assert str(from_url.value) == str(from_argument.value)
    with pytest.raises(ValueError, match="schema is given twice"):
        PostgresBackend("postgresql://db/app?schema=a", schema="b")


def test_a_password_with_url_characters_is_never_shown(
    pg_dsn: str, fresh: str, capsys: pytest.CaptureFixture[str]
) -> None:
    parts = urlsplit(pg_dsn)
    where = f"{parts.hostname}:{parts.port or 5432}{parts.path}"
    user = parts.username or "postgres"
    encoded = f"postgresql://{user}:{quote(PASSWORD, safe='')}@{where}?schema={fresh}"
    raw = f"postgresql://{user}:{PASSWORD}@{where}?schema={fresh}"
    backend = PostgresBackend(encoded)
    assert "p#ss" not in repr(backend) and quote(PASSWORD, safe="") not in repr(backend)
    assert f"{user}:***@" in repr(backend)
    assert main(["check", "--backend", encoded]) == 0  # the encoded form connects

    with pytest.raises(ValueError, match="percent-encode") as info:
        PostgresBackend(raw)
    text = "".join(traceback.format_exception(info.value))
    assert "p#ss" not in text and "w?rd" not in text and "rd@" not in text
    assert main(["history", "--backend", raw, "report"]) == 2
    out, err = capsys.readouterr()
    assert "p#ss" not in out + err and "w?rd" not in out + err and quote(PASSWORD, safe="") not in out + err
