"""The Redis URL against real servers: the prefix and options in the query, the CLI reaching them, masking."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import time
import traceback
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
import redis

from anarchon import Scheduler
from anarchon.cli import main
from anarchon.errors import BackendUnavailableError
from anarchon_conformance import free_port
from anarchon_redis import RedisBackend

PASSWORD = "p#ss/w?rd"  # each of '#', '/', '?' cuts an unencoded URL short


@pytest.fixture
def prefix(redis_url: str) -> Iterator[str]:
    """A key prefix no other test uses; its keys, in every database this file touches, are deleted afterwards."""
    value = f"url{uuid.uuid4().hex[:10]}:"
    yield value
    for db in (0, 3):
        client = redis.Redis.from_url(redis_url, db=db)
        try:
            keys = list(client.scan_iter(match=f"{value}*"))
            if keys:
                client.delete(*keys)
        finally:
            client.close()


def _keys(redis_url: str, pattern: str, db: int = 0) -> list[bytes]:
    client = redis.Redis.from_url(redis_url, db=db)
    try:
        return list(client.scan_iter(match=pattern))
    finally:
        client.close()


async def _start_and_close(backend: RedisBackend) -> None:
    await backend.start()
    await backend.close()


def _job() -> str:
    return f"j{uuid.uuid4().hex[:8]}"


def test_history_through_the_cli_reads_the_prefix_given_in_the_url(
    redis_url: str, prefix: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"{redis_url}?prefix={prefix}"
    scheduler = Scheduler(backend=url, instance_id="url-test")
    name = _job()
    scheduler.add(name, "0 0 1 1 *", lambda: None)
    first, second = asyncio.run(scheduler.run_now(name)), asyncio.run(scheduler.run_now(name))
    assert isinstance(scheduler.backend, RedisBackend) and scheduler.backend.prefix == prefix
    assert _keys(redis_url, f"{prefix}{{{name}}}:*")  # stored under the prefix

    assert main(["history", "--backend", url, name, "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)
    assert [(r["slot_ms"], r["instance"], r["status"]) for r in runs] == [
        (second.slot_ms, "url-test", "succeeded"),
        (first.slot_ms, "url-test", "succeeded"),
    ]
    monkeypatch.setenv("ANARCHON_BACKEND", url)
    assert main(["history", name, "--limit", "1", "--json"]) == 0
    assert [r["slot_ms"] for r in json.loads(capsys.readouterr().out)] == [second.slot_ms]
    # The default prefix is another namespace: no runs and no live instance there, so the name is refused,
    # and the message says which namespace was read; --force reads it anyway.
    assert main(["history", "--backend", redis_url, name]) == 2
    err = capsys.readouterr().err
    assert "no live instance defines a job named" in err and "prefix='cron:'" in err
    assert main(["history", "--backend", redis_url, name, "--force"]) == 0
    out = capsys.readouterr().out
    assert "no runs recorded" in out and "prefix='cron:'" in out


async def test_the_query_prefix_never_reaches_redis_py(redis_url: str, prefix: str) -> None:
    backend = RedisBackend.from_url(f"{redis_url}?socket_timeout=5&prefix={prefix}&connect_timeout_ms=2000")
    assert (backend.prefix, backend.connect_timeout_ms) == (prefix, 2000)
    await backend.start()  # redis-py would raise "unexpected keyword argument 'prefix'" at the first command
    try:
        assert await backend.history(_job()) == []
    finally:
        await backend.close()


async def test_a_database_in_the_url_is_used_and_must_be_a_number(redis_url: str, prefix: str) -> None:
    base = redis_url.rsplit("/", 1)[0]
    scheduler = Scheduler(backend=f"{base}/3?prefix={prefix}")
    name = _job()
    scheduler.add(name, "0 0 1 1 *", lambda: None)
    await scheduler.run_now(name)
    assert _keys(base, f"{prefix}*", db=3) and not _keys(base, f"{prefix}*", db=0)
    for bad in (f"{base}/zero", f"{base}/0?db=one", f"{base}/0/1"):
        with pytest.raises(ValueError, match="must be a number"):
            RedisBackend.from_url(bad)


def test_unknown_query_keys_are_refused_with_the_accepted_ones() -> None:
    with pytest.raises(ValueError, match="unknown option 'prefx'") as info:
        RedisBackend.from_url("redis://h/0?prefx=billing:")
    message = str(info.value)
    assert "anarchon's cluster, connect_timeout_ms, min_replicas, prefix, replica_timeout_ms, sweep_ms" in message
    assert "socket_timeout" in message and "ssl_ca_certs" in message


@pytest.mark.parametrize(("option", "value"), [("prefix", "{x}"), ("sweep_ms", 0), ("connect_timeout_ms", -1)])
def test_a_value_in_the_url_gets_the_constructors_own_check(option: str, value: object) -> None:
    with pytest.raises(ValueError, match=option) as from_argument:
        RedisBackend(**{option: value})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=option) as from_url:
        RedisBackend.from_url(f"redis://h/0?{option}={quote(str(value))}")
    assert str(from_url.value) == str(from_argument.value)
    with pytest.raises(ValueError, match="sweep_ms='soon' in the Redis URL's query must be an integer"):
        RedisBackend.from_url("redis://h/0?sweep_ms=soon")


def test_an_argument_that_contradicts_the_url_is_refused() -> None:
    assert RedisBackend(url="redis://h/0?prefix=a:").prefix == "a:"
    assert RedisBackend(url="redis://h/0?prefix=a:", prefix="a:").prefix == "a:"
    with pytest.raises(ValueError, match="prefix is given twice"):
        RedisBackend(url="redis://h/0?prefix=a:", prefix="b:")


@pytest.fixture
def password_server(tmp_path: Path, redis_binaries: None) -> Iterator[int]:
    """A private redis-server whose password holds '#', '/' and '?'; its port. Killed afterwards."""
    port = free_port()
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--requirepass", PASSWORD],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
    )
    try:
        client = redis.Redis(host="127.0.0.1", port=port, password=PASSWORD, socket_timeout=1)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                assert time.monotonic() < deadline, "the private redis-server did not answer within 10 s"
                time.sleep(0.05)
        client.close()
        yield port
    finally:
        proc.kill()
        proc.wait()


def test_a_password_with_url_characters_is_never_shown(
    password_server: int, capsys: pytest.CaptureFixture[str]
) -> None:
    encoded = f"redis://:{quote(PASSWORD, safe='')}@127.0.0.1:{password_server}/0"
    raw = f"redis://:{PASSWORD}@127.0.0.1:{password_server}/0"
    backend = RedisBackend(url=encoded)
    asyncio.run(_start_and_close(backend))  # the encoded form works
    for shown in (repr(backend), repr(Scheduler(backend=encoded))):
        assert "p#ss" not in shown and quote(PASSWORD, safe="") not in shown and ":***@127.0.0.1" in shown

    with pytest.raises(ValueError, match="percent-encode") as info:
        RedisBackend(url=raw)
    text = "".join(traceback.format_exception(info.value))
    assert "p#ss" not in text and "rd@127" not in text and "w?rd" not in text

    wrong = RedisBackend(url=f"redis://:{quote('wr#ng/pw', safe='')}@127.0.0.1:{password_server}/0")
    with pytest.raises(BackendUnavailableError) as refused:
        asyncio.run(wrong.start())
    text = "".join(traceback.format_exception(refused.value))
    assert "wr#ng" not in text and "wr%23ng" not in text and "redis://:***@127.0.0.1" in str(refused.value)

    assert main(["check", "--backend", raw]) == 2
    assert main(["check", "--backend", encoded]) == 0
    out, err = capsys.readouterr()
    assert "p#ss" not in out + err and quote(PASSWORD, safe="") not in out + err


def test_check_fails_when_redis_is_down(private_server, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"{private_server.url}?connect_timeout_ms=1000"
    assert main(["check", "--backend", url]) == 0
    assert "ok     connect" in capsys.readouterr().out
    private_server.stop(kill=True)
    assert main(["check", "--backend", url]) == 1
    out = capsys.readouterr().out
    assert "FAILED connect" in out and "cannot reach Redis" in out
    assert main(["check", "--backend", f"redis://127.0.0.1:{free_port()}/0?connect_timeout_ms=500", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False and report["checks"][-1]["check"] == "connect"


def test_check_fails_on_a_skewed_clock(
    redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "skewapp.py").write_text(
        textwrap.dedent(f"""
        from anarchon import Scheduler, SkewedClock
        scheduler = Scheduler({redis_url!r}, clock=SkewedClock(120_000))
        scheduler.add("tick", "* * * * *", print)   # max_late_ms 60000: a skew of 15 s is the limit
        straight = Scheduler({redis_url!r})
        straight.add("tick", "* * * * *", print)
        """)
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("skewapp", None)
    assert main(["check", "skewapp:scheduler"]) == 1
    out = capsys.readouterr().out
    assert "FAILED clock" in out and "synchronise the clock" in out
    assert main(["check", "skewapp:straight"]) == 0
