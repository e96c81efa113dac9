"""NATS URLs against real servers: the seed's options in the query, the CLI reaching them, masking."""

from __future__ import annotations

import asyncio
import contextlib
import json
import traceback
import uuid
from collections.abc import Iterator
from urllib.parse import quote

import nats
import pytest
from nats_helpers import Servers, make_job, now_ms, token

from anarchon import Scheduler
from anarchon.backend import Claim, Outcome
from anarchon.cli import main
from anarchon_nats import NatsBackend

pytestmark = pytest.mark.nats

USER = "cron"
PASSWORD = "p#ss/w?rd"  # each of '#', '/', '?' cuts an unencoded URL short


async def _drop(url: str, stream: str) -> None:
    nc = await nats.connect(url)
    try:
        with contextlib.suppress(nats.js.errors.NotFoundError):
            await nc.jetstream().delete_stream(stream)
    finally:
        await nc.close()


@pytest.fixture
def namespace(nats_url: str) -> Iterator[tuple[str, str]]:
    """A stream and prefix no other test uses; the stream is deleted afterwards."""
    tag = uuid.uuid4().hex[:10]
    stream = f"U_{tag}"
    yield stream, f"u{tag}.cron."
    asyncio.run(_drop(nats_url, stream))


def test_history_through_the_cli_reads_the_stream_and_prefix_in_the_url(
    nats_url: str, namespace: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    stream, prefix = namespace
    url = f"{nats_url}?stream={stream}&prefix={prefix}&duplicate_window_ms=120000"
    scheduler = Scheduler(backend=url, instance_id="nats-url")
    scheduler.add("report", "0 0 1 1 *", lambda: None)
    run = asyncio.run(scheduler.run_now("report"))
    backend = scheduler.backend
    assert isinstance(backend, NatsBackend)
    assert (backend.stream, backend.prefix, backend.duplicate_window_ms) == (stream, prefix, 120_000)
    assert main(["history", "--backend", url, "report", "--json"]) == 0
    (shown,) = json.loads(capsys.readouterr().out)
    assert (shown["slot_ms"], shown["instance"], shown["status"]) == (run.slot_ms, "nats-url", "succeeded")
    # The constructor's one-string form reads the same query.
    same = NatsBackend(url)
    assert (same.stream, same.prefix, same.servers) == (stream, prefix, [nats_url])


def test_a_look_at_a_stream_that_does_not_exist_names_it_and_creates_nothing(
    nats_url: str, namespace: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """A wrong stream= used to get that stream created and the answer "no runs"."""
    stream, prefix = namespace
    url = f"{nats_url}?stream={stream}&prefix={prefix}"
    assert main(["history", "--backend", url, "report"]) == 1
    err = capsys.readouterr().err
    assert f"JetStream stream {stream!r} does not exist" in err and "check stream=" in err
    assert main(["check", "--backend", url]) == 0
    assert "ok     connect" in capsys.readouterr().out

    async def exists() -> bool:
        nc = await nats.connect(nats_url)
        try:
            await nc.jetstream().stream_info(stream)
        except nats.js.errors.NotFoundError:
            return False
        finally:
            await nc.close()
        return True

    assert not asyncio.run(exists()), "a look created the stream"
    scheduler = Scheduler(backend=url, instance_id="nats-look")
    scheduler.add("report", "0 0 1 1 *", lambda: None)
    run = asyncio.run(scheduler.run_now("report"))  # the fleet's own start creates it
    assert main(["history", "--backend", url, "report", "--json"]) == 0
    assert [r["slot_ms"] for r in json.loads(capsys.readouterr().out)] == [run.slot_ms]


def test_unknown_query_keys_are_refused_with_the_seeds_options() -> None:
    with pytest.raises(ValueError, match="unknown option 'lease_ms'") as info:
        NatsBackend.from_url("nats://n1:4222?lease_ms=1")
    assert "anarchon's duplicate_window_ms, history_size, prefix, replicas, stream" in str(info.value)


@pytest.mark.parametrize(
    ("option", "value"), [("stream", "a.b"), ("prefix", "no-dot"), ("replicas", 9), ("history_size", 0)]
)
def test_a_value_in_the_url_gets_the_constructors_own_check(option: str, value: object) -> None:
    with pytest.raises(ValueError, match=option) as from_argument:
        NatsBackend(**{option: value})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=option) as from_url:
        NatsBackend.from_url(f"nats://n1:4222?{option}={value}")
    assert str(from_url.value) == str(from_argument.value)
    with pytest.raises(ValueError, match="stream is given twice"):
        NatsBackend("nats://n1:4222?stream=A", stream="B")
    with pytest.raises(ValueError, match="carries a query"):
        NatsBackend(["nats://n1:4222?stream=A", "nats://n2:4222"])


@pytest.fixture(scope="module")
def password_server(servers: Servers) -> int:
    body = 'jetstream { store_dir: "@STORE@", max_memory_store: 32MB, max_file_store: 128MB }\n'
    s = servers.new(f"pw-{uuid.uuid4().hex[:6]}", body + f'authorization {{ user: {USER}, password: "{PASSWORD}" }}')
    s.start()
    return s.port


async def test_a_password_with_url_characters_works_encoded_and_is_never_shown(password_server: int) -> None:
    encoded = f"nats://{USER}:{quote(PASSWORD, safe='')}@127.0.0.1:{password_server}"
    stream = f"PW_{uuid.uuid4().hex[:8]}"
    backend = NatsBackend.from_url(f"{encoded}?stream={stream}&prefix=pw.cron.")
    shown = repr(backend)
    assert "p#ss" not in shown and quote(PASSWORD, safe="") not in shown and f"{USER}:***@127.0.0.1" in shown
    await backend.start()
    try:
        (result,) = await backend.claim([Claim(make_job(), 1, "a", token(), now_ms())])
        assert result.outcome is Outcome.WON
    finally:
        await backend.close()

    for raw in (f"nats://{USER}:{PASSWORD}@127.0.0.1:{password_server}", f"nats://{USER}:12?34@127.0.0.1:4222"):
        with pytest.raises(ValueError, match="percent-encode|cut the URL short") as info:
            NatsBackend.from_url(raw)
        text = "".join(traceback.format_exception(info.value))
        assert "p#ss" not in text and "w?rd" not in text and "34@127" not in text


def test_the_cli_never_shows_the_password(password_server: int, capsys: pytest.CaptureFixture[str]) -> None:
    raw = f"nats://{USER}:{PASSWORD}@127.0.0.1:{password_server}"
    assert main(["check", "--backend", raw]) == 2
    wrong = f"nats://{USER}:{quote('wr#ng', safe='')}@127.0.0.1:{password_server}"
    assert main(["check", "--backend", wrong, "--timeout", "30"]) == 1
    out, err = capsys.readouterr()
    assert "FAILED connect" in out
    for secret in ("p#ss", "w?rd", "wr#ng", "wr%23ng"):
        assert secret not in out + err
