"""Lost answers, lost connections, TLS, a caller's connection, and secrets."""

from __future__ import annotations

import asyncio
import logging
import ssl
import subprocess
import time

import aio_pika
import pytest

from anarchon.backend import Outcome
from anarchon.errors import BackendUnavailableError
from anarchon_rabbitmq import RabbitMQBackend

pytestmark = pytest.mark.rabbitmq


async def _wait_for(predicate, what: str, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)


async def test_connection_closed_between_publish_and_confirm_skips_the_run(
    make_backend, proxy, broker, prefix, job, claim, slot
):
    port = await proxy.start()
    held = await make_backend(url=proxy.url(port))
    other = await make_backend()
    sync = job("sync")
    await held.prepare([sync])
    gate = f"{prefix}sync.slot.{slot}"

    proxy.hold_after_publish_to = gate
    pending = asyncio.ensure_future(held.claim([claim(sync, slot, "held")]))
    await asyncio.wait_for(proxy.publish_seen.wait(), 10)
    # The broker took the publish (the gate is full) and its ack is held in the proxy.
    await _wait_for(lambda: broker(prefix).get(gate, {}).get("messages") == 1, "the gate to fill")
    assert not pending.done(), "the claim was answered although the confirm was held back"

    # The JSON formatter prints pids in a form close_connection does not take: read the table.
    table = subprocess.run(
        ["rabbitmqctl", "list_connections", "pid", "peer_port", "-q"], capture_output=True, text=True, check=True
    ).stdout
    rows = [line.split("\t") for line in table.splitlines()[1:]]
    (pid,) = [pid for pid, port in rows if int(port) in proxy.held_ports]
    subprocess.run(["rabbitmqctl", "close_connection", pid, "test: lost between publish and confirm"], check=True)

    (result,) = await asyncio.wait_for(pending, 20)
    assert result.outcome is Outcome.UNKNOWN  # can't know whether it won: not run here
    (late,) = await other.claim([claim(sync, slot, "other")])
    assert late.outcome is Outcome.LOST  # and not run elsewhere: the slot is skipped, never doubled
    assert broker(prefix)[gate]["messages"] == 1

    # The backend reconnects by itself on the next call.
    proxy.hold_after_publish_to = None
    (next_run,) = await held.claim([claim(sync, slot + 1000, "held")])
    assert next_run.outcome is Outcome.WON


async def test_a_callers_connection_is_used_and_never_closed(rabbit_url, prefix, job, claim, slot):
    connection = await aio_pika.connect(rabbit_url)
    try:
        backend = RabbitMQBackend(connection=connection, prefix=prefix)
        assert "connection=<caller's connection>" in repr(backend)
        await backend.start()
        (result,) = await backend.claim([claim(job("sync"), slot)])
        assert result.outcome is Outcome.WON
        await backend.close()
        assert not connection.is_closed
        channel = await connection.channel()  # still the caller's, still usable
        await channel.close()
    finally:
        await connection.close()


def _self_signed(tmp_path) -> tuple[str, str]:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return str(cert), str(key)


async def test_amqps_urls_connect_over_tls(rabbit_url, proxy_class, prefix, job, claim, slot, tmp_path):
    cert, key = _self_signed(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    tls = proxy_class(rabbit_url, ssl=context)
    port = await tls.start()
    try:
        url = tls.url(port, scheme="amqps", host="localhost", query=f"cafile={cert}")
        backend = RabbitMQBackend(url=url, prefix=prefix)
        await backend.start()
        try:
            (result,) = await backend.claim([claim(job("sync"), slot)])
            assert result.outcome is Outcome.WON
        finally:
            await backend.close()
        assert tls.tls_clients == 2  # the claims connection and the history connection
    finally:
        await tls.close()


async def test_passwords_stay_out_of_repr_errors_and_logs(caplog, rabbit_url):
    caplog.set_level(logging.DEBUG)
    secret = "s3cret-Passw0rd"
    backend = RabbitMQBackend(f"amqp://cron:{secret}@127.0.0.1:1/")
    assert secret not in repr(backend) and "cron:***@" in repr(backend)
    with pytest.raises(BackendUnavailableError) as info:
        await backend.start()
    assert secret not in str(info.value) and "127.0.0.1:1" in str(info.value)
    assert secret not in caplog.text


async def test_a_successful_session_logs_no_password(caplog, make_backend, job, claim, slot):
    caplog.set_level(logging.DEBUG)
    backend = await make_backend()
    (result,) = await backend.claim([claim(job("sync"), slot)])
    assert result.outcome is Outcome.WON
    await backend.history("sync")
    await backend.close()
    assert ":guest@" not in caplog.text and "guest:guest" not in caplog.text
