"""Lost answers, lost connections, TLS, a caller's connection, secrets, and the broker's version."""

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
from anarchon.run import Run, RunStatus
from anarchon_rabbitmq import RabbitMQBackend
from anarchon_rabbitmq.backend import _older_than_supported

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
    sync = job("sync")
    await held.prepare([sync])
    gate = f"{prefix}sync.slot.{slot}"

    proxy.hold_after_publish_to = gate
    pending = asyncio.ensure_future(held.claim([claim(sync, slot, "held")]))
    await asyncio.wait_for(proxy.publish_seen.wait(), 10)
    # The broker took the publish (the gate is full) and its ack is held in the proxy.
    await _wait_for(lambda: broker(prefix).get(gate, {}).get("messages") == 1, "the gate to fill")
    assert not pending.done(), "the claim was answered although the confirm was held back"

    # The held publish went over held's claims connection, the only one of this test's prefix so far
    # (a name, not a peer port: behind Docker's port publishing the broker sees the proxy's ports).
    # The JSON formatter prints pids in a form close_connection does not take: read the table.
    table = subprocess.run(
        ["rabbitmqctl", "list_connections", "pid", "name", "client_properties", "-q"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    rows = [line.split("\t") for line in table.splitlines()[1:]]
    (pid,) = [row[0] for row in rows if f"anarchon-rabbitmq claims ({prefix})" in row[2]]
    subprocess.run(["rabbitmqctl", "close_connection", pid, "test: lost between publish and confirm"], check=True)

    (result,) = await asyncio.wait_for(pending, 20)
    other = await make_backend()
    assert result.outcome is Outcome.UNKNOWN  # can't know whether it won: not run here
    (late,) = await other.claim([claim(sync, slot, "other")])
    assert late.outcome is Outcome.LOST  # and not run elsewhere: the slot is skipped, never doubled
    assert broker(prefix)[gate]["messages"] == 1

    # The backend reconnects by itself on the next call.
    proxy.hold_after_publish_to = None
    (next_run,) = await held.claim([claim(sync, slot + 1000, "held")])
    assert next_run.outcome is Outcome.WON


async def test_a_callers_connection_is_used_and_never_closed(rabbit_url, own_connections, prefix, job, claim, slot):
    name = f"{prefix} the caller's own"
    connection = await aio_pika.connect(rabbit_url, client_properties={"connection_name": name})
    try:
        # Nothing listens on port 1: the backend can only work through the connection it was given.
        backend = RabbitMQBackend(url="amqp://guest:guest@127.0.0.1:1/", connection=connection, prefix=prefix)
        assert "connection=<caller's connection>" in repr(backend)
        await backend.start()
        sync = job("sync")
        await backend.prepare([sync])
        (result,) = await backend.claim([claim(sync, slot)])
        assert result.outcome is Outcome.WON and result.grant is not None
        await backend.finish(result.grant, Run(job="sync", slot_ms=slot, status=RunStatus.SUCCEEDED, instance="i1"))
        (run,) = await backend.history("sync")
        assert (run.slot_ms, run.status) == (slot, RunStatus.SUCCEEDED)
        assert own_connections(prefix) == [name]  # the broker sees no connection of the backend's own
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


@pytest.mark.parametrize(
    ("version", "too_old"),
    [
        ("3.8.19", True),
        ("3.8.0-rc.1", True),
        ("2.8.7", True),
        ("3.9.0", False),
        ("3.10.8", False),
        ("3.13.7+2.g1b2c3", False),
        ("4.0.1", False),
        (None, False),
        ("", False),
        ("unknown", False),
    ],
)
def test_brokers_before_3_9_are_too_old_and_unknown_versions_pass(version, too_old):
    assert _older_than_supported(version) is too_old


def _claims_to_be(version: str | None):
    def edit(properties: dict) -> None:
        if version is None:
            properties.pop("version", None)
        else:
            properties["version"] = version

    return edit


async def test_start_refuses_a_broker_older_than_3_9(proxy, prefix):
    port = await proxy.start()
    proxy.edit_server_properties = _claims_to_be("3.8.19")
    backend = RabbitMQBackend(url=proxy.url(port), prefix=prefix)
    with pytest.raises(BackendUnavailableError) as info:
        await backend.start()
    message = str(info.value)
    assert f"RabbitMQ at amqp://guest:***@127.0.0.1:{port}/ is version 3.8.19" in message
    assert "needs RabbitMQ 3.9 or newer" in message and "streams arrived in 3.9" in message
    assert "upgrade the broker" in message
    await backend.close()


async def test_start_checks_the_version_on_a_callers_connection(rabbit_url, proxy, prefix, job, claim, slot):
    port = await proxy.start()
    proxy.edit_server_properties = _claims_to_be("3.8.19")
    old = await aio_pika.connect(proxy.url(port))
    real = await aio_pika.connect(rabbit_url)
    try:
        # url names the real 3.10 broker: only the caller's connection says 3.8.
        backend = RabbitMQBackend(url=rabbit_url, connection=old, prefix=prefix)
        with pytest.raises(BackendUnavailableError) as info:
            await backend.start()
        assert "RabbitMQ behind the given connection is version 3.8.19" in str(info.value)
        assert not old.is_closed  # refused, but still the caller's to close

        fine = RabbitMQBackend(url="amqp://guest:guest@127.0.0.1:1/", connection=real, prefix=prefix)
        await fine.start()
        (result,) = await fine.claim([claim(job("sync"), slot)])
        assert result.outcome is Outcome.WON
        await fine.close()
    finally:
        await old.close()
        await real.close()


async def test_a_broker_that_does_not_say_its_version_is_accepted(make_backend, proxy, job, claim, slot):
    port = await proxy.start()
    proxy.edit_server_properties = _claims_to_be(None)
    backend = await make_backend(url=proxy.url(port))
    (result,) = await backend.claim([claim(job("sync"), slot)])
    assert result.outcome is Outcome.WON


def _connection_pids(name: str = "anarchon-rabbitmq claims") -> set[str]:
    """The broker's pids of the connections whose client-provided name holds ``name``."""
    table = subprocess.run(
        ["rabbitmqctl", "list_connections", "pid", "client_properties", "-q"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {line.split("\t", 1)[0] for line in table.splitlines()[1:] if name in line}


async def test_after_the_connection_comes_back_slots_due_before_are_not_claimed(
    make_backend, rabbit_url, broker, prefix, job, claim, slot
):
    """A RabbitMQ 3.10 killed with SIGKILL came back without the gates declared in its last moments,
    and a claim retried from before the outage then won a slot already run (the fault suite's
    duplicate). So an instance whose connection came back does not claim a slot due before it was lost."""
    first = await make_backend()
    sync = job("sync")
    due = time.time_ns() // 1_000_000 // 1000 * 1000
    (won,) = await first.claim([claim(sync, due, "first")])
    assert won.outcome is Outcome.WON
    # Connections are named by namespace, so other tests' connections on the broker are not counted.
    name = f"anarchon-rabbitmq claims ({prefix})"
    before = _connection_pids(name)
    second = await make_backend()
    (lost,) = await second.claim([claim(sync, due, "second")])
    assert lost.outcome is Outcome.LOST
    (pid,) = _connection_pids(name) - before
    # The broker "restarts": it forgets the gate, and the second instance's connection is cut.
    gate = f"{prefix}sync.slot.{due}"
    connection = await aio_pika.connect(rabbit_url)
    try:
        await (await connection.channel()).queue_delete(gate)
    finally:
        await connection.close()
    subprocess.run(["rabbitmqctl", "close_connection", pid, "test: the broker restarted"], check=True)
    await _wait_for(lambda: not second._claims._usable(), "the second instance to see its connection closed")

    (again,) = await second.claim([claim(sync, due, "second")])
    assert again.outcome is Outcome.UNKNOWN, "a slot due before the reconnect was claimed: it could run twice"
    assert gate not in broker(prefix), "the forgotten gate was declared again"
    (later,) = await second.claim([claim(sync, slot, "second")])
    assert later.outcome is Outcome.WON, "a slot due after the reconnect is claimed as usual"


async def test_a_callers_robust_connection_that_reconnects_counts_as_coming_back(rabbit_url, prefix, job, claim, slot):
    name = f"{prefix} the caller's robust connection"
    connection = await aio_pika.connect_robust(
        f"{rabbit_url}?reconnect_interval=0.2", client_properties={"connection_name": name}
    )
    try:
        backend = RabbitMQBackend(connection=connection, prefix=prefix)
        await backend.start()
        sync = job("sync")
        due = time.time_ns() // 1_000_000 // 1000 * 1000
        reconnected = asyncio.Event()
        connection.reconnect_callbacks.add(lambda *_: reconnected.set())
        (pid,) = _connection_pids(name)
        subprocess.run(["rabbitmqctl", "close_connection", pid, "test: the broker restarted"], check=True)
        await asyncio.wait_for(reconnected.wait(), 20)
        (again,) = await backend.claim([claim(sync, due)])
        assert again.outcome is Outcome.UNKNOWN, "a slot due before the caller's connection was lost was claimed"
        (later,) = await backend.claim([claim(sync, slot)])
        assert later.outcome is Outcome.WON
        await backend.close()
        assert not connection.is_closed, "the caller's connection must stay open"
    finally:
        await connection.close()
