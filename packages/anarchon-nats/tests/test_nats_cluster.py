"""A three-node NATS cluster: replicas, and losing a server during a run.

The cluster (session fixture in conftest.py) runs on free ports with its own
store directories; every server it started is killed by a finalizer, even
when a test fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator
from typing import Any

import nats
import pytest
from nats.aio.client import Client
from nats_helpers import Cluster, make_job, now_ms, token, wait_jetstream

import anarchon_nats.backend as backend_module
from anarchon.backend import Claim, Outcome
from anarchon.run import RunStatus
from anarchon_nats import NatsBackend, StreamConflictError

pytestmark = [pytest.mark.nats, pytest.mark.slow]


@pytest.fixture
async def stream_name(cluster: Cluster) -> AsyncIterator[str]:
    name = f"C_{uuid.uuid4().hex[:10]}"
    yield name
    nc = await nats.connect(cluster.live_urls())
    try:
        with contextlib.suppress(nats.js.errors.NotFoundError):
            await nc.jetstream().delete_stream(name)
    finally:
        await nc.close()


@pytest.fixture
async def cnc(cluster: Cluster) -> AsyncIterator[Client]:
    nc = await nats.connect(cluster.live_urls())
    yield nc
    await nc.close()


def _prefix(stream: str) -> str:
    return f"{stream.lower().replace('_', '')}.cron."


async def _replicas(nc: Client, stream: str) -> int:
    config = (await nc.jetstream().stream_info(stream)).config
    assert config.num_replicas is not None
    return config.num_replicas


async def _known_to_every_server(cluster: Cluster, stream: str, timeout: float = 30.0) -> None:
    """Until a lookup on each server finds the stream: right after a create, some may not know it yet."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    for url in cluster.live_urls():
        nc = await nats.connect(url)
        try:
            while True:
                try:
                    await nc.jetstream().stream_info(stream)
                    break
                except nats.js.errors.NotFoundError:
                    if loop.time() > deadline:
                        raise
                    await asyncio.sleep(0.05)
        finally:
            await nc.close()


async def _started(cluster: Cluster, stream: str, **kw: Any) -> NatsBackend:
    b = NatsBackend(cluster.live_urls(), stream=stream, prefix=_prefix(stream), **kw)
    await b.start()
    return b


async def test_a_new_stream_gets_one_replica_when_replicas_is_unset(cluster, stream_name, cnc) -> None:
    b = await _started(cluster, stream_name)
    await b.close()
    assert await _replicas(cnc, stream_name) == 1


async def test_the_documented_cluster_example_with_a_connection_of_our_own(cluster, stream_name, cnc) -> None:
    """connect(servers=[n1, n2, n3]); NatsBackend(connection, stream=…, prefix='billing.cron.', replicas=3)."""
    connection = await nats.connect(cluster.urls)
    try:
        tag = stream_name.split("_")[1]
        b = NatsBackend(connection=connection, stream=stream_name, prefix=f"billing{tag}.cron.", replicas=3)
        await b.start()
        (r,) = await b.claim([Claim(make_job(), 1, "a", token(), now_ms())])
        assert r.won
        await b.close()
        assert connection.is_connected
        info = await cnc.jetstream().stream_info(stream_name)
        assert info.config.num_replicas == 3
        assert info.config.subjects == [f"billing{tag}.cron.>"]
        assert info.cluster is not None
        assert info.cluster.replicas is not None
        assert len(info.cluster.replicas) == 2  # two followers besides the leader
    finally:
        await connection.close()


async def test_an_existing_stream_is_updated_to_replicas_when_set_and_kept_when_unset(
    cluster, stream_name, cnc
) -> None:
    await cnc.jetstream().add_stream(name=stream_name, subjects=[f"{_prefix(stream_name)}>"], num_replicas=1)
    await _known_to_every_server(cluster, stream_name)  # the moment before is the next test's subject
    b = await _started(cluster, stream_name, replicas=3)
    await b.close()
    assert await _replicas(cnc, stream_name) == 3
    b = await _started(cluster, stream_name)  # unset: keeps 3
    await b.close()
    assert await _replicas(cnc, stream_name) == 3
    b = await _started(cluster, stream_name, replicas=1)  # set: updated, down as well
    await b.close()
    assert await _replicas(cnc, stream_name) == 1


async def test_instances_on_other_servers_start_right_after_a_client_created_the_stream(cluster: Cluster) -> None:
    """For a moment after a create, the other servers may not know the stream: NATS 2.9 answers a
    lookup or an update there with "stream not found" (10059). An instance starting just then (to
    raise the stream to 3 replicas) must wait that out, not call it a conflict."""
    conns = [await nats.connect(url) for url in cluster.urls]
    made: list[str] = []

    async def create_then_start(i: int) -> None:
        name = f"L_{uuid.uuid4().hex[:10]}"
        made.append(name)
        await conns[i % 3].jetstream().add_stream(name=name, subjects=[f"{_prefix(name)}>"], num_replicas=1)
        b = NatsBackend(cluster.urls[(i + 1) % 3], stream=name, prefix=_prefix(name), replicas=3)
        try:
            await b.start()
        finally:
            await b.close()

    try:
        for _ in range(4):  # a round of 24 at once shows the lag most times on 2 CPUs; 4 rounds make it near sure
            await asyncio.gather(*(create_then_start(i) for i in range(24)))
        for name in made:
            assert await _replicas(conns[0], name) == 3
    finally:
        for name in made:
            with contextlib.suppress(Exception):  # the servers are the session's own, killed at its end
                await conns[0].jetstream(timeout=20).delete_stream(name)
        for nc in conns:
            await nc.close()


async def test_more_replicas_than_servers_is_a_clear_error(cluster, stream_name) -> None:
    b = NatsBackend(cluster.live_urls(), stream=stream_name, prefix=_prefix(stream_name), replicas=5)
    with pytest.raises(StreamConflictError, match="no suitable peers .*replicas 5|replicas 5.*no suitable peers"):
        await b.start()
    await b.close()


async def _claim_until_answered(b: NatsBackend, claims: list[Claim], deadline: float) -> list[Any]:
    """What the scheduler does: on a raise, retry with the same tokens until answered."""
    while True:
        try:
            return await b.claim(claims)
        except (asyncio.TimeoutError, nats.errors.Error):
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.1)


async def test_losing_a_server_during_a_run_never_runs_a_slot_twice_and_keeps_the_claims(
    cluster: Cluster, stream_name: str, monkeypatch
) -> None:
    monkeypatch.setattr(backend_module, "REQUEST_TIMEOUT_S", 2.0)
    instances = [await _started(cluster, stream_name, replicas=3) for _ in range(4)]
    killed = None
    try:
        jobs = [make_job(f"job-{i}") for i in range(3)]
        slots = list(range(1_000_000, 1_000_000 + 60 * 1000, 1000))
        winners: dict[tuple[str, int], set[str]] = defaultdict(set)
        progress = asyncio.Event()
        done_slots = 0

        async def instance(idx: int, b: NatsBackend) -> None:
            nonlocal done_slots
            rng = random.Random(idx)
            for slot in slots:
                claims = [Claim(job, slot, f"i{idx}", token(), now_ms()) for job in jobs]
                rng.shuffle(claims)
                results = await _claim_until_answered(b, claims, asyncio.get_running_loop().time() + 60)
                for c, r in zip(claims, results, strict=True):
                    assert r.outcome in (Outcome.WON, Outcome.LOST)
                    if r.outcome is Outcome.WON:
                        winners[(c.job, c.slot_ms)].add(c.instance)
                if idx == 0:
                    done_slots += 1
                    if done_slots == len(slots) // 3:
                        progress.set()
                await asyncio.sleep(0.01)

        racing = asyncio.gather(*(instance(i, b) for i, b in enumerate(instances)))
        await progress.wait()
        nc = await nats.connect(cluster.live_urls())
        try:
            info = await nc.jetstream().stream_info(stream_name)
        finally:
            await nc.close()
        assert info.cluster is not None
        assert info.config.num_replicas == 3
        killed = next(n for n in cluster.nodes if n.name == info.cluster.leader)
        killed.kill()  # the stream's leader, mid-run
        await racing

        assert len(winners) == len(jobs) * len(slots)
        doubled = {k: v for k, v in winners.items() if len(v) != 1}
        assert doubled == {}

        late = NatsBackend(
            [n.url for n in cluster.nodes if n is not killed], stream=stream_name, prefix=_prefix(stream_name)
        )
        await late.start()
        try:
            for job in jobs:
                again = [Claim(job, s, "late", token(), now_ms()) for s in slots]
                assert {r.outcome for r in await late.claim(again)} == {Outcome.LOST}
                history = await late.history(job.name, limit=len(slots))
                assert {r.slot_ms: r.instance for r in history} == {
                    s: next(iter(winners[(job.name, s)])) for s in slots
                }
                assert {r.status for r in history} == {RunStatus.RUNNING}
        finally:
            await late.close()
    finally:
        for b in instances:
            await b.close()
        if killed is not None:
            killed.start()
            await wait_jetstream(cluster.urls)


async def _replicas_finding(cluster: Cluster, stream: str, **kw: Any) -> Any:
    b = await _started(cluster, stream, **kw)
    try:
        (replicas,) = [f for f in await b.guarantees() if f.topic == "replicas"]
    finally:
        await b.close()
    return replicas


async def test_the_report_names_one_replica_on_a_cluster_with_its_fix(cluster, stream_name) -> None:
    replicas = await _replicas_finding(cluster, stream_name)
    assert not replicas.ok and f"stream {stream_name} has 1 replica(s) on JetStream cluster" in replicas.detail
    assert "replicas=3" in replicas.fix


async def test_the_report_says_three_replicas_keep_deciding_when_a_server_is_lost(cluster, stream_name) -> None:
    replicas = await _replicas_finding(cluster, stream_name, replicas=3)
    assert replicas.ok and "3 replicas" in replicas.detail
