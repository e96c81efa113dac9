"""Servers, a caller's own connection, TLS, credentials, URLs and lost connections."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import subprocess
import uuid
from pathlib import Path

import nats
import pytest
from nats_helpers import Server, Servers, make_job, now_ms, token

import anarchon_nats.backend as backend_module
from anarchon import Scheduler
from anarchon.backend import Claim, Outcome
from anarchon.errors import BackendUnavailableError
from anarchon_nats import NatsBackend, StreamConflictError
from anarchon_nats._url import is_refusal

pytestmark = pytest.mark.nats

SECRET = "s3cret-Pa55"
TOKEN = "t0ken-XYZ-secret"


def _js_body() -> str:
    return 'jetstream { store_dir: "@STORE@", max_memory_store: 32MB, max_file_store: 128MB }'


@pytest.fixture(scope="module")
def auth_server(servers: Servers) -> Server:
    s = servers.new(
        f"auth-{uuid.uuid4().hex[:6]}",
        _js_body() + f'\nauthorization {{ user: alice, password: "{SECRET}" }}',
    )
    s.start()
    return s


@pytest.fixture(scope="module")
def token_server(servers: Servers) -> Server:
    s = servers.new(f"token-{uuid.uuid4().hex[:6]}", _js_body() + f'\nauthorization {{ token: "{TOKEN}" }}')
    s.start()
    return s


@pytest.fixture(scope="module")
def tls_server(servers: Servers) -> tuple[Server, Path]:
    """A JetStream server that requires TLS, with a CA of the test's own."""
    d = servers.root / f"tls-{uuid.uuid4().hex[:6]}"
    d.mkdir()
    run = lambda *a: subprocess.run(a, cwd=d, check=True, capture_output=True)  # noqa: E731
    run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=anarchon-test-ca",
        "-keyout", "ca.key", "-out", "ca.pem")  # fmt: skip
    run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", "server.key",
        "-out", "server.csr")  # fmt: skip
    (d / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    run("openssl", "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
        "-days", "2", "-extfile", "ext.cnf", "-out", "server.pem")  # fmt: skip
    s = servers.new(d.name, _js_body() + f'\ntls {{ cert_file: "{d / "server.pem"}", key_file: "{d / "server.key"}" }}')
    s.start()
    return s, d / "ca.pem"


async def _drop_stream(url: str, stream: str, **kw: object) -> None:
    nc = await nats.connect(url, **kw)  # type: ignore[arg-type]
    try:
        await nc.jetstream().delete_stream(stream)
    finally:
        await nc.close()


async def test_credentials_in_the_url_work_and_never_show_in_repr_or_logs(auth_server, names, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    url = f"nats://alice:{SECRET}@127.0.0.1:{auth_server.port}"
    backend = NatsBackend(url, stream=names.stream, prefix=names.prefix)
    assert SECRET not in repr(backend)
    assert "alice:***@" in repr(backend)
    scheduler = Scheduler(backend=backend)
    scheduler.add("sync", "* * * * *", lambda: None)
    async with scheduler:
        (r,) = await backend.claim([Claim(make_job(), 1, "a", token(), now_ms())])
        assert r.outcome is Outcome.WON
    await _drop_stream(url, names.stream)
    assert SECRET not in caplog.text


async def test_a_wrong_password_is_reported_without_the_password(auth_server, names, caplog, monkeypatch) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setattr(backend_module, "CONNECT_TIMEOUT_S", 1.5)
    wrong = "wr0ng-" + SECRET
    backend = NatsBackend(f"nats://alice:{wrong}@127.0.0.1:{auth_server.port}", stream=names.stream)
    with pytest.raises(BackendUnavailableError, match=r"alice:\*\*\*@") as err:
        await backend.start()
    assert wrong not in str(err.value)
    assert "Authorization" in str(err.value)
    assert wrong not in caplog.text


def test_a_refusal_is_recognised_in_both_shapes_nats_py_reports_it() -> None:
    # During connect nats-py raises the server's -ERR as a plain Error; later as AuthorizationError.
    assert is_refusal(nats.errors.Error("nats: 'Authorization Violation'"))
    assert is_refusal(nats.errors.AuthorizationError())
    assert not is_refusal(ConnectionResetError(104, "Connection reset by peer"))


async def test_a_token_in_the_url_works_and_is_masked(token_server, names, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    url = f"nats://{TOKEN}@127.0.0.1:{token_server.port}"
    backend = NatsBackend(url, stream=names.stream, prefix=names.prefix)
    assert TOKEN not in repr(backend)
    assert "***@127.0.0.1" in repr(backend)
    await backend.start()
    try:
        (r,) = await backend.claim([Claim(make_job(), 1, "a", token(), now_ms())])
        assert r.outcome is Outcome.WON
    finally:
        await backend.close()
    await _drop_stream(url, names.stream)
    assert TOKEN not in caplog.text


async def test_a_tls_url_works(tls_server, names, monkeypatch) -> None:
    server, ca = tls_server
    monkeypatch.setenv("SSL_CERT_FILE", str(ca))  # the default SSL context trusts the test's CA
    url = f"tls://127.0.0.1:{server.port}"
    backend = NatsBackend(url, stream=names.stream, prefix=names.prefix)
    await backend.start()
    try:
        assert backend._nc is not None
        assert backend._nc.connected_url is not None
        assert backend._nc.connected_url.scheme == "tls"
        (r,) = await backend.claim([Claim(make_job(), 1, "a", token(), now_ms())])
        assert r.outcome is Outcome.WON
    finally:
        await backend.close()


async def test_a_tls_server_with_an_untrusted_certificate_is_refused(tls_server, names, monkeypatch) -> None:
    server, _ = tls_server
    monkeypatch.setattr(backend_module, "CONNECT_TIMEOUT_S", 1.5)
    backend = NatsBackend(f"tls://127.0.0.1:{server.port}", stream=names.stream)
    with pytest.raises(BackendUnavailableError, match="CERTIFICATE_VERIFY_FAILED|certificate verify failed"):
        await backend.start()


async def test_a_passed_in_connection_stays_the_callers(nats_url, names) -> None:
    nc = await nats.connect(nats_url)
    try:
        backend = NatsBackend(connection=nc, stream=names.stream, prefix=names.prefix)
        assert "caller's NATS client" in repr(backend)
        for slot in (1_000, 2_000):  # start/close twice: a scheduler does that around history() calls
            await backend.start()
            (r,) = await backend.claim([Claim(make_job(), slot, "a", token(), now_ms())])
            assert r.outcome is Outcome.WON
            await backend.close()
            assert nc.is_connected
            assert not nc.is_draining
        await nc.flush()
    finally:
        await nc.close()


async def test_a_passed_in_connection_stays_the_callers_when_start_fails(nats_url, names, client) -> None:
    """The failure path drops the connection it opened; it must not drop one it was given."""
    js = client.jetstream()
    squatter = f"{names.stream}_X"
    await js.add_stream(name=squatter, subjects=[f"{names.prefix}>"])
    nc = await nats.connect(nats_url)
    try:
        backend = NatsBackend(connection=nc, stream=names.stream, prefix=names.prefix)
        with pytest.raises(StreamConflictError):
            await backend.start()
        await backend.close()
        assert nc.is_connected
        assert not nc.is_draining
        assert not nc.is_closed
        await js.delete_stream(squatter)
        await backend.start()  # the same connection still serves the backend once the subjects are free
        (r,) = await backend.claim([Claim(make_job(), 1, "a", token(), now_ms())])
        assert r.outcome is Outcome.WON
        await backend.close()
        assert nc.is_connected
    finally:
        await nc.close()
        with contextlib.suppress(nats.js.errors.NotFoundError):
            await js.delete_stream(squatter)


async def test_servers_takes_a_list_and_skips_a_dead_one(nats_url, names) -> None:
    backend = NatsBackend(["nats://127.0.0.1:1", nats_url], stream=names.stream, prefix=names.prefix)
    await backend.start()
    try:
        (r,) = await backend.claim([Claim(make_job(), 1, "a", token(), now_ms())])
        assert r.outcome is Outcome.WON
    finally:
        await backend.close()


async def test_an_unreachable_server_raises_backend_unavailable(monkeypatch) -> None:
    monkeypatch.setattr(backend_module, "CONNECT_TIMEOUT_S", 1.0)
    backend = NatsBackend("nats://127.0.0.1:1")
    with pytest.raises(BackendUnavailableError, match="could not connect to NATS at 'nats://127.0.0.1:1'"):
        await backend.start()
    assert isinstance(BackendUnavailableError("x"), ConnectionError)


async def test_a_server_without_jetstream_is_named_as_the_problem(servers: Servers) -> None:
    plain = servers.new(f"plain-{uuid.uuid4().hex[:6]}", "")
    plain.start()
    try:
        backend = NatsBackend(plain.url)
        with pytest.raises(BackendUnavailableError, match=r"nats-server -js"):
            await backend.start()
    finally:
        plain.kill()


def test_from_url_reads_servers_and_options() -> None:
    b = NatsBackend.from_url(
        f"nats://alice:{SECRET}@n1:4222,n2:4222,nats://n3:4222?stream=BILLING_CRON&prefix=billing.cron.&replicas=3"
        "&duplicate_window_ms=120000&history_size=50"
    )
    assert b.servers == [f"nats://alice:{SECRET}@n1:4222", "nats://n2:4222", "nats://n3:4222"]
    assert (b.stream, b.prefix, b.replicas, b.duplicate_window_ms, b.history_size) == (
        "BILLING_CRON",
        "billing.cron.",
        3,
        120_000,
        50,
    )
    assert SECRET not in repr(b)
    assert NatsBackend.from_url("tls://secure:4222").servers == ["tls://secure:4222"]
    with pytest.raises(ValueError, match="unknown option 'lease_ms'"):
        NatsBackend.from_url("nats://n1:4222?lease_ms=1")
    with pytest.raises(ValueError, match="must be an integer"):
        NatsBackend.from_url("nats://n1:4222?replicas=three")


def test_a_url_picks_this_backend_through_the_entry_point() -> None:
    scheduler = Scheduler(backend="nats://127.0.0.1:4222?stream=URL_CRON")
    assert isinstance(scheduler.backend, NatsBackend)
    assert scheduler.backend.stream == "URL_CRON"
    tls = Scheduler(backend="tls://127.0.0.1:4222")
    assert isinstance(tls.backend, NatsBackend)
    from anarchon import NatsBackend as Lazy

    assert Lazy is NatsBackend


@pytest.mark.slow
async def test_a_connection_lost_before_the_ack_raises_and_the_retry_is_won_once(
    servers: Servers, names, monkeypatch
) -> None:
    monkeypatch.setattr(backend_module, "REQUEST_TIMEOUT_S", 1.0)
    node = servers.new(f"flaky-{uuid.uuid4().hex[:6]}", _js_body())
    node.start()
    mine = NatsBackend(node.url, stream=names.stream, prefix=names.prefix)
    other = NatsBackend(node.url, stream=names.stream, prefix=names.prefix)
    await mine.start()
    await other.start()
    try:
        job = make_job()
        c = Claim(job, 42_000, "mine", token(), now_ms())
        node.kill()
        with pytest.raises((asyncio.TimeoutError, nats.errors.Error)):
            await mine.claim([c])
        node.start()
        deadline = asyncio.get_running_loop().time() + 15
        while True:  # the backend reconnects by itself; a later call succeeds
            try:
                (retry,) = await mine.claim([c])
                break
            except (asyncio.TimeoutError, nats.errors.Error):
                assert asyncio.get_running_loop().time() < deadline, "the backend did not recover its connection"
                await asyncio.sleep(0.2)
        assert retry.outcome is Outcome.WON
        (foreign,) = await other.claim([Claim(job, 42_000, "other", token(), now_ms())])
        assert foreign.outcome is Outcome.LOST
    finally:
        await mine.close()
        await other.close()
        node.kill()
