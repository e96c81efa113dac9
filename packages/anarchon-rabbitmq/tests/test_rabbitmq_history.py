"""History: a stream queue per job, running and final records folded into runs."""

from __future__ import annotations

import asyncio
import time

import aio_pika
import pytest

from anarchon import Scheduler
from anarchon.backend import Grant, Outcome
from anarchon.run import Run, RunStatus, ms_to_datetime
from anarchon_rabbitmq._records import ERROR_MAX_BYTES, stream_arguments

pytestmark = pytest.mark.rabbitmq


async def _until(predicate, what: str, seconds: float = 20.0) -> None:
    """The broker refreshes a stream's message count every few seconds."""
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.5)


def finished(grant: Grant, status: RunStatus = RunStatus.SUCCEEDED, error: str | None = None) -> Run:
    return Run(
        job=grant.job,
        slot_ms=grant.slot_ms,
        status=status,
        instance=grant.instance,
        manual=grant.manual,
        started_at=ms_to_datetime(grant.started_at_ms),
        finished_at=ms_to_datetime(grant.started_at_ms + 25),
        duration_ms=25,
        error=error,
    )


async def test_history_stream_is_declared_per_job_and_sized_from_history_size(make_backend, broker, prefix, job):
    backend = await make_backend()
    await backend.prepare([job("sync", history_size=250), job("report")])
    queues = broker(prefix)
    sync, report = queues[f"{prefix}sync.history"], queues[f"{prefix}report.history"]
    assert sync["args"]["x-queue-type"] == "stream"
    assert "x-max-length" not in sync["args"]  # not supported on streams: sized in bytes
    assert sync["args"]["x-max-length-bytes"] == stream_arguments(250)["x-max-length-bytes"]
    assert sync["args"]["x-stream-max-segment-size-bytes"] == stream_arguments(250)["x-stream-max-segment-size-bytes"]
    assert report["args"]["x-max-length-bytes"] == stream_arguments(1000)["x-max-length-bytes"]
    # Big enough for two full-budget records per run, plus one segment that retention may drop.
    for size in (1, 250, 1000, 100_000):
        args = stream_arguments(size)
        kept_at_least = args["x-max-length-bytes"] - args["x-stream-max-segment-size-bytes"]
        assert kept_at_least >= size * 2 * 1200


async def test_claim_writes_running_and_finish_the_final_record_folded_into_one_run(
    make_backend, broker, prefix, job, claim, slot
):
    a, b = await make_backend(), await make_backend()
    sync = job("sync")
    (won,) = await a.claim([claim(sync, slot, "a")])
    assert won.grant is not None
    (running,) = await b.history("sync")
    assert (running.status, running.instance, running.slot_ms, running.fencing) == (RunStatus.RUNNING, "a", slot, None)
    assert running.started_at == ms_to_datetime(slot) and running.finished_at is None

    assert await a.finish(won.grant, finished(won.grant, RunStatus.FAILED, "ValueError: boom")) is True
    (run,) = await b.history("sync")
    assert (run.status, run.error, run.duration_ms) == (RunStatus.FAILED, "ValueError: boom", 25)
    await _until(lambda: broker(prefix)[f"{prefix}sync.history"]["messages"] == 2, "two records, one run")
    assert await b.last_run("sync") == run


async def test_history_is_newest_first_and_limited(make_backend, job, claim, slot):
    backend = await make_backend()
    sync = job("sync")
    results = await backend.claim([claim(sync, slot + i * 1000) for i in (2, 0, 4, 1, 3)])
    for r in results[:3]:
        assert r.grant is not None
        await backend.finish(r.grant, finished(r.grant))
    runs = await backend.history("sync")
    assert [r.slot_ms - slot for r in runs] == [4000, 3000, 2000, 1000, 0]
    done, running = RunStatus.SUCCEEDED, RunStatus.RUNNING
    assert [r.status for r in runs] == [done, running, done, running, done]
    assert [r.slot_ms - slot for r in await backend.history("sync", limit=2)] == [4000, 3000]
    assert (await backend.last_run("sync")).slot_ms == slot + 4000


async def test_a_run_whose_runner_died_is_lost_and_keeps_running(make_backend, job, claim, slot):
    runner, other = await make_backend(), await make_backend()
    sync = job("sync")
    (won,) = await runner.claim([claim(sync, slot, "runner")])
    assert won.outcome is Outcome.WON
    await runner.close()  # dies without finishing: no lease, so nothing can tell the run stopped
    (late,) = await other.claim([claim(sync, slot, "other")])
    assert late.outcome is Outcome.LOST  # nobody runs it instead: the run is lost
    (run,) = await other.history("sync")
    assert run.status is RunStatus.RUNNING and run.instance == "runner"


async def test_an_instance_with_another_history_size_uses_the_stream_as_it_is(make_backend, broker, prefix, job):
    first, other = await make_backend(), await make_backend()
    await first.prepare([job("sync", history_size=10)])
    await other.prepare([job("sync", history_size=5000)])  # PRECONDITION_FAILED handled: no error
    args = broker(prefix)[f"{prefix}sync.history"]["args"]
    assert args["x-max-length-bytes"] == stream_arguments(10)["x-max-length-bytes"]


async def test_deleting_the_history_stream_resizes_it_and_deletes_that_jobs_history(
    rabbit_url, make_backend, broker, prefix, job, claim, slot
):
    backend = await make_backend()
    stream = f"{prefix}sync.history"
    small = job("sync", history_size=10)
    await backend.prepare([small])
    for i in range(3):
        (won,) = await backend.claim([claim(small, slot + i * 1000)])
        assert won.grant is not None
        await backend.finish(won.grant, finished(won.grant))
    assert len(await backend.history("sync")) == 3
    assert broker(prefix)[stream]["args"]["x-max-length-bytes"] == stream_arguments(10)["x-max-length-bytes"]

    connection = await aio_pika.connect(rabbit_url)
    async with connection:
        channel = await connection.channel()
        await channel.queue_delete(stream)
    assert stream not in broker(prefix)

    # The same backend, which declared the stream before, now runs the job with a bigger history_size.
    big = job("sync", history_size=5000)
    (won,) = await backend.claim([claim(big, slot + 10_000)])
    assert won.grant is not None
    await backend.finish(won.grant, finished(won.grant))
    args = broker(prefix)[stream]["args"]
    assert args["x-queue-type"] == "stream"
    assert args["x-max-length-bytes"] == stream_arguments(5000)["x-max-length-bytes"]
    assert args["x-stream-max-segment-size-bytes"] == stream_arguments(5000)["x-stream-max-segment-size-bytes"]
    reader = await make_backend()
    for history in (await backend.history("sync"), await reader.history("sync")):
        assert [(r.slot_ms, r.status) for r in history] == [(slot + 10_000, RunStatus.SUCCEEDED)]


async def test_history_of_a_job_that_never_ran_is_empty(make_backend):
    backend = await make_backend()
    assert await backend.history("never-ran") == []
    assert await backend.last_run("never-ran") is None


async def test_long_errors_are_cut_and_foreign_messages_ignored(rabbit_url, make_backend, prefix, job, claim, slot):
    backend = await make_backend()
    (won,) = await backend.claim([claim(job("sync"), slot)])
    assert won.grant is not None
    connection = await aio_pika.connect(rabbit_url)
    async with connection:
        channel = await connection.channel()
        await channel.default_exchange.publish(aio_pika.Message(b"not a record"), routing_key=f"{prefix}sync.history")
    await backend.finish(won.grant, finished(won.grant, RunStatus.FAILED, "RuntimeError: " + "é" * 5000))
    (run,) = await backend.history("sync")
    assert run.status is RunStatus.FAILED and run.error is not None
    assert run.error.startswith("RuntimeError: éé") and len(run.error.encode()) <= ERROR_MAX_BYTES


@pytest.mark.slow
async def test_history_keeps_at_least_history_size_runs_once_the_stream_is_trimmed(
    make_backend, broker, prefix, job, slot
):
    size, written = 150, 1500
    backend = await make_backend()
    sync = job("sync", history_size=size)
    await backend.prepare([sync])
    instance = "worker-" + "x" * 60  # long ids and errors: records near their budget
    grants = [
        Grant(job="sync", slot_ms=slot + i * 1000, instance=instance, token=f"t{i}", started_at_ms=slot + i * 1000)
        for i in range(written)
    ]
    for start in range(0, written, 100):  # oldest first, as time goes
        batch = grants[start : start + 100]
        await asyncio.gather(*(backend.finish(g, finished(g, RunStatus.FAILED, "E: " + "y" * 1000)) for g in batch))
    # Retention runs when a segment rolls over; the broker's count shows records were dropped.
    await _until(lambda: 0 < broker(prefix)[f"{prefix}sync.history"]["messages"] < written, "trimming")

    reader = await make_backend()  # knows nothing of history_size: shows all the stream holds
    runs = await reader.history("sync", limit=written)
    assert size <= len(runs) < written
    assert [r.slot_ms for r in runs[:size]] == [g.slot_ms for g in reversed(grants)][:size]
    capped = await backend.history("sync", limit=written)  # knows history_size: shows that many
    assert capped == runs[:size]


async def test_run_now_claims_a_manual_gate_and_is_recorded(make_backend, broker, prefix):
    backend = await make_backend()
    scheduler = Scheduler(backend=backend, instance_id="here")
    calls: list[bool] = []
    scheduler.add("report", "0 2 * * *", lambda ctx: calls.append(ctx.manual))
    run = await scheduler.run_now("report")
    assert calls == [True]
    assert (run.status, run.manual, run.instance) == (RunStatus.SUCCEEDED, True, "here")
    assert await scheduler.last_run("report") == run
    assert await scheduler.history("report") == [run]
    gates = [name for name in broker(prefix) if ".manual." in name]
    assert gates == [f"{prefix}report.manual.{run.slot_ms}"]
