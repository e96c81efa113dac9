"""AMQP URLs against the real broker: the seed's options in the query, the CLI reaching them, masking."""

from __future__ import annotations

import asyncio
import json
import subprocess
import traceback
import uuid
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote, urlsplit

import aio_pika
import pytest

from anarchon import Scheduler
from anarchon.cli import main
from anarchon.errors import BackendUnavailableError
from anarchon_rabbitmq import RabbitMQBackend

PASSWORD = "p#ss/w?rd"  # each of '#', '/', '?' cuts an unencoded URL short

Broker = Callable[[str], dict[str, dict[str, Any]]]


async def _delete(url: str, queues: list[str]) -> None:
    connection = await aio_pika.connect(url)
    try:
        for queue in queues:
            channel = await connection.channel()
            await channel.queue_delete(queue)
    finally:
        await connection.close()


@pytest.fixture
def url_prefix(rabbit_url: str, broker: Broker) -> Iterator[str]:
    """A queue prefix no other test uses; its queues are deleted afterwards."""
    prefix = f"u{uuid.uuid4().hex[:10]}."
    yield prefix
    left = list(broker(prefix))
    if left:
        asyncio.run(_delete(rabbit_url, left))


def _with_query(url: str, query: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}{query}"


def test_history_through_the_cli_reads_the_prefix_in_the_url(
    rabbit_url: str, url_prefix: str, broker: Broker, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _with_query(rabbit_url, f"prefix={url_prefix}&slot_ttl_ms=120000&heartbeat=30")
    scheduler = Scheduler(backend=url, instance_id="amqp-url")
    scheduler.add("report", "0 0 1 1 *", lambda: None)
    run = asyncio.run(scheduler.run_now("report"))
    backend = scheduler.backend
    assert isinstance(backend, RabbitMQBackend)
    assert (backend.prefix, backend.slot_ttl_ms) == (url_prefix, 120_000)
    assert "prefix" not in backend.url and "heartbeat=30" in backend.url  # the driver's key stays, ours do not
    assert f"{url_prefix}report.history" in broker(url_prefix)
    assert main(["history", "--backend", url, "report", "--json"]) == 0
    (shown,) = json.loads(capsys.readouterr().out)
    assert (shown["slot_ms"], shown["instance"], shown["status"]) == (run.slot_ms, "amqp-url", "succeeded")


def test_unknown_query_keys_are_refused_with_the_accepted_ones() -> None:
    with pytest.raises(ValueError, match="unknown option 'prefx'") as info:
        RabbitMQBackend.from_url("amqp://rabbit/?prefx=billing.")
    message = str(info.value)
    assert "anarchon's prefix, slot_ttl_ms" in message and "heartbeat" in message and "cafile" in message


@pytest.mark.parametrize(("option", "value"), [("prefix", "amq.x"), ("prefix", "a b"), ("slot_ttl_ms", 0)])
def test_a_value_in_the_url_gets_the_constructors_own_check(option: str, value: object) -> None:
    with pytest.raises(ValueError, match=option) as from_argument:
        RabbitMQBackend(**{option: value})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=option) as from_url:
        RabbitMQBackend.from_url(f"amqp://rabbit/?{option}={quote(str(value))}")
    assert str(from_url.value) == str(from_argument.value)
    with pytest.raises(ValueError, match="prefix is given twice"):
        RabbitMQBackend("amqp://rabbit/?prefix=a.", prefix="b.")


def _rabbitmqctl(*args: str) -> None:
    subprocess.run(["rabbitmqctl", "-q", *args], check=True, capture_output=True, timeout=60)


@pytest.fixture
def password_user(rabbit_url: str, url_prefix: str) -> Iterator[str]:
    """A broker user of the test's own, password with '#', '/' and '?', allowed only its prefix; removed after."""
    user = f"anarchon-{uuid.uuid4().hex[:8]}"
    allowed = f"^({url_prefix.replace('.', '[.]')}.*|amq[.]default)$"
    _rabbitmqctl("add_user", user, PASSWORD)
    try:
        _rabbitmqctl("set_permissions", "-p", urlsplit(rabbit_url).path[1:] or "/", user, allowed, allowed, allowed)
        yield user
    finally:
        _rabbitmqctl("delete_user", user)


def test_a_password_with_url_characters_works_encoded_and_is_never_shown(
    rabbit_url: str, url_prefix: str, password_user: str, capsys: pytest.CaptureFixture[str]
) -> None:
    where = urlsplit(rabbit_url)
    address = f"{where.hostname}:{where.port or 5672}{where.path or '/'}"
    encoded = f"amqp://{password_user}:{quote(PASSWORD, safe='')}@{address}?prefix={url_prefix}"
    raw = f"amqp://{password_user}:{PASSWORD}@{address}?prefix={url_prefix}"
    scheduler = Scheduler(backend=encoded)
    scheduler.add("report", "0 0 1 1 *", lambda: None)
    assert asyncio.run(scheduler.run_now("report")).status.value == "succeeded"  # the encoded password works
    for shown in (repr(scheduler.backend), repr(scheduler)):
        assert "p#ss" not in shown and quote(PASSWORD, safe="") not in shown and f"{password_user}:***@" in shown

    with pytest.raises(ValueError, match="percent-encode") as info:
        RabbitMQBackend(raw)
    text = "".join(traceback.format_exception(info.value))
    assert "p#ss" not in text and "w?rd" not in text and "rd@" not in text

    wrong = RabbitMQBackend(f"amqp://{password_user}:{quote('wr#ng/pw', safe='')}@{address}")
    with pytest.raises(BackendUnavailableError) as refused:
        asyncio.run(wrong.start())
    text = "".join(traceback.format_exception(refused.value))
    assert "wr#ng" not in text and "wr%23ng" not in text and f"{password_user}:***@" in str(refused.value)

    assert main(["check", "--backend", raw]) == 2
    out, err = capsys.readouterr()
    assert "p#ss" not in out + err and "w?rd" not in out + err
