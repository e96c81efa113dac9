"""A stream at its limits: one clear warning per instance, nothing run twice, and recovery by itself.

JetStream refuses a message it has no room for: a stream an operator gave
``max_msgs``/``max_bytes`` with ``discard new`` answers "maximum messages
exceeded" (10077), a server whose ``max_file_store`` is used up "insufficient
resources" (10023). Measured before this was handled (3 instances x 10
every-second jobs, default options, the stream held at its ``max_msgs`` for
8 s; nats-server 2.9.10): per instance 36-57 warnings "NATS connection ...:
ServiceUnavailableError" (nats-py's error callback, one per refused claim) and
8-18 "claim failed" warnings, most of them saying only "TimeoutError: nats:
timeout" (nats-py left the refused publishes unanswered, nats.py issue #985),
none naming the fix; 140 slots, 140 runs, 0 run twice, 0 missed. Now: one
warning per instance naming the limit and the fix, the same runs.

Every server here is a private one; the streams and buckets made are deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator

import nats
import pytest
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import DiscardPolicy
from nats.js.errors import NotFoundError
from nats_helpers import Server, Servers, make_job, now_ms, token

from anarchon import RunContext, Scheduler
from anarchon.backend import Claim, Outcome
from anarchon_nats import NatsBackend
from anarchon_nats._full import SETTLE_S, StreamFullError

pytestmark = [pytest.mark.nats, pytest.mark.slow]

INSTANCES, JOBS = 3, 10
#: How long the stream stays full once every instance has said so.
HELD_S = 5.0
#: Room for the test's own streams, and little enough to fill in a moment with 8 kB messages.
STORE = "2MB"


@pytest.fixture(scope="module")
def server(servers: Servers) -> Iterator[Server]:
    srv = servers.new(f"full-{now_ms()}", f'jetstream {{ store_dir: "@STORE@", max_file_store: {STORE} }}')
    srv.start()
    yield srv
    srv.kill()


@pytest.fixture
async def js(server: Server) -> AsyncIterator[JetStreamContext]:
    nc: Client = await nats.connect(server.url)
    yield nc.jetstream(timeout=5)
    await nc.close()


async def drop(js: JetStreamContext, *streams: str) -> None:
    for name in streams:
        with contextlib.suppress(NotFoundError):
            await js.delete_stream(name)


async def until(done: Callable[[], bool], timeout: float) -> float | None:
    """Poll ``done`` until true; the seconds it took, or ``None`` if it was not by ``timeout``."""
    start = time.monotonic()
    while not done():
        if time.monotonic() - start > timeout:
            return None
        await asyncio.sleep(0.05)
    return time.monotonic() - start


async def fill(js: JetStreamContext, subject: str) -> tuple[int, int | None]:
    """Publish 8 kB messages until the server refuses one; how many it took, and the refusal's err_code."""
    count = 0
    while True:
        try:
            await js.publish(subject, b"x" * 8000)
        except nats.js.errors.ServiceUnavailableError as exc:
            return count, exc.err_code
        count += 1


def after(caplog: pytest.LogCaptureFixture, since: float, level: int) -> list[logging.LogRecord]:
    """The anarchon records of at least ``level`` logged since ``since`` (epoch s)."""
    return [r for r in caplog.records if r.name.startswith("anarchon") and r.levelno >= level and r.created >= since]


async def test_a_full_stream_warns_once_per_instance_runs_nothing_twice_and_recovers(
    server: Server, js: JetStreamContext, caplog: pytest.LogCaptureFixture
) -> None:
    stream, prefix = "FULL", "full.cron."
    runs: Counter[tuple[str, int]] = Counter()
    started: list[tuple[str, int, float]] = []  # job, slot, when (epoch s)
    schedulers = []
    for i in range(INSTANCES):
        s = Scheduler(NatsBackend(server.url, stream=stream, prefix=prefix), instance_id=f"full-{i}")
        for j in range(JOBS):

            async def job(ctx: RunContext, name: str = f"job-{j:02d}") -> None:
                runs[(name, ctx.slot_ms)] += 1
                started.append((name, ctx.slot_ms, time.time()))

            s.add(f"job-{j:02d}", "* * * * * *", job)
        schedulers.append(s)
    caplog.set_level(logging.INFO, logger="anarchon")
    try:
        await asyncio.gather(*(s.start() for s in schedulers))
        first = now_ms()
        assert await until(lambda: len(runs) >= 2 * JOBS, 15) is not None, "the jobs did not run"

        info = await js.stream_info(stream)
        full_s = time.time()  # warnings count from here: the update may refuse claims before it is answered
        await js.update_stream(info.config.evolve(max_msgs=info.state.messages, discard=DiscardPolicy.NEW))
        full_ms = now_ms()  # a slot from here on is claimed only after the stream is full

        def clear() -> list[logging.LogRecord]:
            return [r for r in after(caplog, full_s, logging.WARNING) if "StreamFullError" in r.getMessage()]

        took = await until(lambda: len(clear()) >= INSTANCES, 10)
        await asyncio.sleep(HELD_S)  # the outage itself: slots come due and are refused meanwhile
        ran_while_full = [(j, s) for j, s, t in started if s >= full_ms]

        freed_ms = now_ms()
        await js.update_stream((await js.stream_info(stream)).config.evolve(max_msgs=-1))
        recovery_s = await until(lambda: any(s >= full_ms for _, s, _ in started), 10)

        def stated() -> list[logging.LogRecord]:
            return [
                r for r in after(caplog, full_s, logging.INFO) if "claims refused for want of room" in r.getMessage()
            ]

        await until(lambda: len(stated()) >= INSTANCES, SETTLE_S + 10)
        names = [f"job-{j:02d}" for j in range(JOBS)]
        window = range((first // 1000 + 3) * 1000, freed_ms + 1001, 1000)  # past the first slots' jitter

        def missed() -> list[tuple[str, int]]:
            return [(j, s) for j in names for s in window if (j, s) not in runs]

        await until(lambda: not missed(), 15)
    finally:
        await asyncio.gather(*(s.stop(grace_ms=2000) for s in schedulers))
        await drop(js, stream, f"KV_{stream}_registry")

    twice = {k: n for k, n in runs.items() if n > 1}
    lost = missed()
    in_window = sum(n for (_, s), n in runs.items() if s in window)
    warnings = after(caplog, full_s, logging.WARNING)
    # A result refused as the stream filled is an error of its own ("could not record the run"), once per such run.
    errors = [r for r in warnings if r.levelno > logging.WARNING]
    statements = [r.getMessage() for r in stated()]
    print(
        f"\nstream full {(freed_ms - full_ms) / 1000:.1f} s: {len(window) * JOBS} slots, {in_window} runs, "
        f"{len(twice)} twice, {len(lost)} missed; every instance warned {took or -1:.2f} s after it filled; the "
        f"first slot claimed while full ran {recovery_s or -1:.2f} s after it was freed; "
        f"{len(warnings) - len(errors)} warning(s) and {len(errors)} error(s) from {INSTANCES} instances:"
    )
    for r in [*warnings, *stated()]:
        print(f"  {r.levelname} {r.name}: {r.getMessage()[:400]}")
    assert not twice, f"run twice: {sorted(twice)[:10]}"
    assert not lost, f"slots nobody ran (the outage was far shorter than max_late_ms): {lost[:10]}"
    assert not ran_while_full, f"slots claimed while the stream was full ran before it was freed: {ran_while_full}"
    # Every instance claims every second, so each met the outage: INSTANCES warnings means one each.
    assert len(warnings) - len(errors) == INSTANCES, [r.getMessage()[:200] for r in warnings]
    for r in warnings:
        text = r.getMessage()
        assert f"NATS stream {stream!r} is full: max_msgs {info.state.messages} reached with discard new" in text
        assert "Fix: raise the stream's max_msgs" in text and "--discard old" in text
    assert len(statements) == INSTANCES
    assert all(" 0 never claimed" in text for text in statements), statements
    assert recovery_s is not None and recovery_s < 5, "no claim came through within 5 s of the limit's removal"


async def test_a_full_server_refuses_claims_as_lost_never_won_and_the_cost_is_counted(
    server: Server, js: JetStreamContext, caplog: pytest.LogCaptureFixture
) -> None:
    """The server's ``max_file_store`` used up by another stream: the same for claims and registry puts."""
    stream, prefix, filler = "FULLSRV", "fullsrv.cron.", "FILLER"
    a = NatsBackend(server.url, stream=stream, prefix=prefix)
    b = NatsBackend(server.url, stream=stream, prefix=prefix)
    await a.start()
    await b.start()
    sync, late = make_job("sync", backend=a), make_job("late", backend=a, jitter_ms=0, max_late_ms=1000)
    slot = now_ms() // 1000 * 1000
    caplog.set_level(logging.INFO, logger="anarchon.nats")
    try:
        (before,) = await a.claim([Claim(sync, slot, "a", token(), now_ms())])
        assert before.won
        await a.register("a", "head", "jobs")  # the registry's bucket, made while there is room
        await js.add_stream(name=filler, subjects=["filler.>"])
        filled, code = await fill(js, "filler.x")
        assert code == 10023, "the server did not refuse for want of room"

        mine = Claim(sync, slot + 1000, "a", token(), now_ms())
        too_late = Claim(late, slot - 5000, "a", token(), now_ms())  # past its max_late_ms: never asked again
        with pytest.raises(StreamFullError) as refused:
            await a.claim([mine, too_late])
        text = str(refused.value)
        assert "server's JetStream storage is used up" in text and "err_code 10023" in text
        assert "Fix: raise max_file_store" in text
        with pytest.raises(StreamFullError):  # the other instance: refused too, never won
            await b.claim([Claim(sync, slot + 1000, "b", token(), now_ms())])
        with pytest.raises(StreamFullError):  # stored before it filled: no news while full, asked again
            await b.claim([Claim(sync, slot, "b", token(), now_ms())])
        with pytest.raises(StreamFullError, match="server's JetStream storage is used up"):
            await a.keep_registered("a")

        await js.delete_stream(filler)  # the cause removed
        (again,) = await a.claim([mine])  # the scheduler's retry, same token
        assert again.won
        (other,) = await b.claim([Claim(sync, slot + 1000, "b", token(), now_ms())])
        assert other.outcome is Outcome.LOST
        (old,) = await b.claim([Claim(sync, slot, "b", token(), now_ms())])
        assert old.outcome is Outcome.LOST
        await a.keep_registered("a")

        def stated() -> list[logging.LogRecord]:
            return [r for r in caplog.records if "claims refused for want of room" in r.getMessage()]

        await until(lambda: len(stated()) >= 2, SETTLE_S + 5)  # a's and b's
        print(f"\nfilled the server with {filled} x 8 kB; refused: {text[:300]}")
        for r in stated():
            print(f"  {r.levelname}: {r.getMessage()}")
        said = {r.getMessage().split("; of the slots refused, ")[-1]: r.levelno for r in stated()}
        assert said == {  # a lost one (past max_late_ms while full): a warning; b lost none
            "1 claimed late once there was room, 1 never claimed "
            "(not run by this instance: past max_late_ms)": logging.WARNING,
            "1 claimed late once there was room, 0 never claimed "
            "(not run by this instance: past max_late_ms)": logging.INFO,
        }, said
    finally:
        await a.close()
        await b.close()
        await drop(js, filler, stream, f"KV_{stream}_registry")
