"""Construction, ownership of the client, secrets, TLS, plugin registration, script fallback."""

from __future__ import annotations

import asyncio
import importlib.metadata
import logging
import subprocess
import time

import pytest
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from anarchon.errors import BackendUnavailableError
from anarchon_conformance import free_port as conformance_free_port
from anarchon_redis import RedisBackend


@pytest.mark.parametrize("prefix", ["", "cron{x}:", "a b", "cron*", "x" * 65, "café:", "cron[1]", None, 5, "a\n"])
def test_unsafe_prefixes_are_refused_with_a_clear_error(prefix):
    with pytest.raises(ValueError, match="prefix=") as info:
        RedisBackend(prefix=prefix)
    assert "for example" in str(info.value)


@pytest.mark.parametrize("prefix", ["cron:", "myapp:cron:", "a", "x/y.z-1_2:"])
def test_safe_prefixes_are_accepted(prefix):
    assert RedisBackend(prefix=prefix).prefix == prefix


def test_only_redis_urls_are_accepted_and_secrets_are_not_echoed():
    with pytest.raises(ValueError, match="redis://") as info:
        RedisBackend(url="postgres://user:hunter2@db/x")
    assert "hunter2" not in str(info.value)
    with pytest.raises(ValueError, match="cluster"):
        RedisBackend(url="redis://h/0?cluster=maybe")


def test_repr_hides_the_password():
    backend = RedisBackend(url="rediss://admin:hunter2@cache.internal:6380/2?cluster=false")
    assert "hunter2" not in repr(backend)
    assert "cache.internal" in repr(backend)
    assert "***" in repr(backend)
    assert backend.cluster is False


def test_the_class_declares_a_lease_backend_with_a_server_clock():
    caps = RedisBackend.capabilities
    assert (caps.lease, caps.history_ttl, caps.server_clock, caps.multi_process) == (True, True, True, True)
    assert RedisBackend.name == "redis"
    assert RedisBackend.url_schemes == ("redis", "rediss", "redis+sentinel")
    assert isinstance(RedisBackend.from_url("redis://localhost:6379/0"), RedisBackend)


def test_cluster_mode_follows_the_url_flag_the_argument_or_the_client():
    assert RedisBackend(url="redis://h:7000/0?cluster=true").cluster is True
    assert RedisBackend(url="redis://h:7000", cluster=True).cluster is True
    assert RedisBackend().cluster is False
    client = Redis()
    assert RedisBackend(client=client).cluster is False
    with pytest.raises(ValueError, match="contradicts"):
        RedisBackend(client=client, cluster=True)
    with pytest.raises(TypeError, match=r"redis\.asyncio"):
        RedisBackend(client=object())  # type: ignore[arg-type]


def test_entry_point_registers_the_backend():
    (entry,) = [e for e in importlib.metadata.entry_points(group="anarchon") if e.name == "redis"]
    assert entry.value == "anarchon_redis._plugin"
    assert entry.load().anarchon_register_backends() == [RedisBackend]


async def test_a_passed_in_client_stays_open_after_close(redis_url):
    client = Redis.from_url(redis_url)
    try:
        backend = RedisBackend(client=client, prefix="t:owned:")
        await backend.start()
        assert await backend.now_ms() > 0
        await backend.close()
        assert await client.ping()
        assert "hunter2" not in repr(backend)
    finally:
        await client.aclose()


async def test_start_reports_an_unreachable_server_quickly_without_the_password(caplog, free_port):
    backend = RedisBackend(url=f"redis://:hunter2@127.0.0.1:{free_port}/0", connect_timeout_ms=1000)
    started = time.monotonic()
    with caplog.at_level(logging.DEBUG), pytest.raises(BackendUnavailableError) as info:
        await backend.start()
    assert time.monotonic() - started < 5
    assert "hunter2" not in str(info.value)
    assert "hunter2" not in caplog.text
    await backend.close()


async def test_scripts_are_reloaded_after_the_server_forgot_them(private_server, make_job, claim):
    backend = RedisBackend(url=private_server.url, prefix="t:flush:")
    await backend.start()
    try:
        job = make_job()
        assert (await backend.claim([claim(job, 1000)]))[0].won
        await backend._redis().script_flush()
        assert (await backend.claim([claim(job, 2000)]))[0].outcome.value == "skipped"
        await backend._redis().script_flush()
        batch = await backend.claim([claim(make_job(f"j{i}"), 1000) for i in range(5)])
        assert all(r.won for r in batch)
    finally:
        await backend.close()


@pytest.fixture
def free_port():
    return conformance_free_port()


@pytest.fixture
def tls_server(tmp_path, redis_binaries, free_port, request):
    """A TLS-only server with a password and a self-signed certificate."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    made = subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1"],
        capture_output=True,
    )  # fmt: skip
    if made.returncode != 0:
        pytest.skip("!!! SKIPPED: openssl could not make a test certificate")
    proc = subprocess.Popen(
        ["redis-server", "--port", "0", "--tls-port", str(free_port), "--bind", "127.0.0.1", "--save", "",
         "--tls-cert-file", str(cert), "--tls-key-file", str(key), "--tls-ca-cert-file", str(cert),
         "--tls-auth-clients", "no", "--requirepass", "hunter2", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip

    def stop() -> None:
        proc.kill()
        proc.wait(10)

    request.addfinalizer(stop)  # noqa: PT021 - registered before start, so a half-started server is killed too
    return f"rediss://:hunter2@127.0.0.1:{free_port}/0?ssl_ca_certs={cert}", proc


async def test_rediss_urls_connect_over_tls(tls_server, make_job, claim):
    url, proc = tls_server
    backend = RedisBackend(url=url, prefix="t:tls:")
    deadline = time.monotonic() + 10
    while True:
        try:
            await backend.start()
            break
        except BackendUnavailableError:
            if proc.poll() is not None:
                pytest.skip("!!! SKIPPED: this redis-server was built without TLS")
            assert time.monotonic() < deadline
            await asyncio.sleep(0.1)
    try:
        assert "hunter2" not in repr(backend)
        assert (await backend.claim([claim(make_job(), 1000)]))[0].won
    finally:
        await backend.close()


async def test_a_passed_in_cluster_client_selects_cluster_mode(cluster_url, make_job, claim):
    client = RedisCluster.from_url(cluster_url.replace("?cluster=true", ""))
    try:
        backend = RedisBackend(client=client, prefix="t:cc:")
        assert backend.cluster is True
        await backend.start()
        assert (await backend.claim([claim(make_job("cc"), 1000)]))[0].won
        await backend.close()
        assert await client.ping()
        for key in [k async for k in client.scan_iter(match="t:cc:*")]:
            await client.delete(key)
    finally:
        await client.aclose()
