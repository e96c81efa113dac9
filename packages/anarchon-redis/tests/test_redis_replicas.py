"""``min_replicas``: a claim counts as won only once ``WAIT`` saw it on that many replicas.

A private primary with a private replica (no persistence: replication is
what is tested). Pausing the replica with ``SIGSTOP`` holds its
acknowledgements back deterministically; cutting its link as well (``CLIENT
KILL TYPE replica`` while it is paused) keeps a claim from ever reaching it,
which is what a failover after a primary's crash loses.
"""

from __future__ import annotations

import signal
import time
import uuid
from typing import Any

import pytest
import redis

from anarchon.backend import Outcome
from anarchon_redis import RedisBackend, _replicas

pytestmark = pytest.mark.slow


def _cut_replication(primary: Any) -> None:
    client = redis.Redis(host="127.0.0.1", port=primary.port)
    try:
        client.client_kill_filter(_type="replica")
    finally:
        client.close()


def _promote(server: Any) -> None:
    client = redis.Redis(host="127.0.0.1", port=server.port)
    try:
        client.execute_command("REPLICAOF", "NO", "ONE")
        assert client.info("replication")["role"] == "master"
    finally:
        client.close()


@pytest.mark.parametrize("bad", [-1, True, 1.5, "1"])
def test_min_replicas_must_be_a_non_negative_integer(bad):
    with pytest.raises(ValueError, match="min_replicas="):
        RedisBackend(min_replicas=bad)


@pytest.mark.parametrize("bad", [0, -5, False, 2.0])
def test_replica_timeout_must_be_positive_milliseconds(bad):
    with pytest.raises(ValueError, match="replica_timeout_ms="):
        RedisBackend(min_replicas=1, replica_timeout_ms=bad)


async def test_a_claim_the_replica_acknowledged_is_won_and_survives_promotion(replicated, make_job, claim):
    primary, replica = replicated
    job = make_job("sync")
    a = RedisBackend(url=primary.url, prefix="t:rep:", min_replicas=1, replica_timeout_ms=2000)
    await a.start()
    try:
        (won,) = await a.claim([claim(job, 1000, "a")])
        assert won.outcome is Outcome.WON
    finally:
        await a.close()
    primary.stop(kill=True)
    _promote(replica)
    b = RedisBackend(url=replica.url, prefix="t:rep:")
    await b.start()
    try:
        (second,) = await b.claim([claim(job, 1000, "b")])
        assert second.outcome is Outcome.LOST, "the promoted replica forgot a claim that WAIT had confirmed"
    finally:
        await b.close()


async def test_without_min_replicas_a_promoted_replica_grants_a_won_slot_again(replicated, make_job, claim):
    """The failure the option exists for, shown on purpose: min_replicas=0 does not wait for the replica."""
    primary, replica = replicated
    job = make_job("sync")
    assert replica.proc is not None
    replica.proc.send_signal(signal.SIGSTOP)
    _cut_replication(primary)  # what asynchronous replication had not sent yet when the primary died
    a = RedisBackend(url=primary.url, prefix="t:rep:", min_replicas=0)
    await a.start()
    try:
        (first,) = await a.claim([claim(job, 1000, "a")])
        assert first.outcome is Outcome.WON
    finally:
        await a.close()
    primary.stop(kill=True)
    replica.proc.send_signal(signal.SIGCONT)
    _promote(replica)
    b = RedisBackend(url=replica.url, prefix="t:rep:")
    await b.start()
    try:
        (second,) = await b.claim([claim(job, 1000, "b")])
        assert second.outcome is Outcome.WON  # a second winner of slot 1000: the duplicate WAIT prevents
    finally:
        await b.close()


async def test_by_default_claims_wait_for_a_replica_while_the_server_has_or_just_had_one(
    replicated, redis_url, make_job, claim, monkeypatch
):
    """min_replicas="auto": WAIT for one replica while the primary has one, and a while after it left."""
    monkeypatch.setattr(_replicas, "STICKY_S", 5.0)  # 60 s by default: a switch-over's length
    primary, replica = replicated
    assert replica.proc is not None
    shared = f"t:rep-alone-{uuid.uuid4().hex[:8]}:"
    alone = RedisBackend(url=redis_url, prefix=shared)  # the shared server has never had a replica
    # The default min_replicas with a longer WAIT than the default 100 ms: what is tested is whether a claim
    # waits, and a replica slowed by a loaded machine took more than 100 ms to acknowledge (CI: UNKNOWN).
    # STICKY_S outlasts the held claim's WAIT, so the claims right after the cut still wait.
    a = RedisBackend(url=primary.url, prefix="t:rep:", replica_timeout_ms=1000)
    await alone.start()
    await a.start()
    try:
        assert a.min_replicas is None and alone.min_replicas is None  # auto
        assert (await alone.claim([claim(make_job("alone"), 1000, "a")]))[0].outcome is Outcome.WON
        (acked,) = await a.claim([claim(make_job("acked"), 1000, "a")])
        assert acked.outcome is Outcome.WON
        replica.proc.send_signal(signal.SIGSTOP)
        (held,) = await a.claim([claim(make_job("held"), 1000, "a")])
        assert held.outcome is Outcome.UNKNOWN, "the default did not wait for the connected replica"
        _cut_replication(primary)  # the paused replica cannot connect again: the primary has none now
        outcomes: list[Outcome] = []
        deadline = time.monotonic() + 20
        while not outcomes or outcomes[-1] is not Outcome.WON:
            assert time.monotonic() < deadline, f"claims still wait for a replica long gone: {outcomes}"
            (result,) = await a.claim([claim(make_job(f"after-{len(outcomes)}"), 1000, "a")])
            outcomes.append(result.outcome)
        # Right after the replica left, claims still waited (the old primary of a switch-over), then not.
        assert outcomes[0] is Outcome.UNKNOWN, outcomes
    finally:
        replica.proc.send_signal(signal.SIGCONT)
        await a.close()
        keys = [k async for k in alone._redis().scan_iter(match=f"{shared}*")]
        if keys:
            await alone._redis().delete(*keys)
        await alone.close()


async def test_a_claim_the_replica_did_not_acknowledge_is_unknown_and_never_granted_twice(replicated, make_job, claim):
    primary, replica = replicated
    job = make_job("sync", lease_ms=60_000)
    assert replica.proc is not None
    a = RedisBackend(url=primary.url, prefix="t:rep:", min_replicas=1, replica_timeout_ms=200)
    b = RedisBackend(url=primary.url, prefix="t:rep:", min_replicas=1, replica_timeout_ms=200)
    await a.start()
    await b.start()
    try:
        replica.proc.send_signal(signal.SIGSTOP)
        first, other = await a.claim([claim(job, 1000, "a"), claim(make_job("other"), 1000, "a")])
        assert first.outcome is Outcome.UNKNOWN
        assert other.outcome is Outcome.UNKNOWN
        (second,) = await b.claim([claim(job, 1000, "b")])
        assert second.outcome is Outcome.LOST  # the unconfirmed grant still holds the slot on the primary
    finally:
        replica.proc.send_signal(signal.SIGCONT)
        await a.close()
        await b.close()


async def test_a_renewal_the_replica_did_not_acknowledge_counts_as_not_renewed(replicated, make_job, claim):
    primary, replica = replicated
    job = make_job("sync", lease_ms=60_000)
    assert replica.proc is not None
    a = RedisBackend(url=primary.url, prefix="t:rep:", min_replicas=1, replica_timeout_ms=200)
    await a.start()
    try:
        (won,) = await a.claim([claim(job, 1000, "a")])
        assert won.outcome is Outcome.WON and won.grant is not None
        assert await a.renew([won.grant]) == [True]
        replica.proc.send_signal(signal.SIGSTOP)
        assert await a.renew([won.grant]) == [False]
    finally:
        replica.proc.send_signal(signal.SIGCONT)
        await a.close()


async def test_on_a_cluster_without_replicas_min_replicas_leaves_every_claim_unknown(cluster_url, make_job, claim):
    """One WAIT per node, pinned to it: a cluster with no replicas can never confirm a claim."""
    backend = RedisBackend(url=cluster_url, prefix="t:repc:", min_replicas=1, replica_timeout_ms=50)
    plain = RedisBackend(url=cluster_url, prefix="t:repc:")
    await backend.start()
    await plain.start()
    try:
        jobs = [make_job(f"j{i}") for i in range(6)]  # spread over the three nodes
        results = await backend.claim([claim(j, 5000, "a") for j in jobs])
        assert [r.outcome for r in results] == [Outcome.UNKNOWN] * len(jobs)
        again = await plain.claim([claim(j, 5000, "b") for j in jobs])
        assert [r.outcome for r in again] == [Outcome.LOST] * len(jobs)
    finally:
        await backend.close()
        await plain.close()


async def test_on_a_cluster_by_default_a_claim_waits_for_its_own_primarys_replica(
    replicated_cluster: Any, make_job: Any, claim: Any
) -> None:
    """``auto`` per primary: with one primary's replica stopped, the claims on that primary are unknown (never
    run) and the claims on the other primaries are won; ``min_replicas=0`` wins them all."""
    url, replicas = replicated_cluster
    waiting = RedisBackend(url=url, prefix="t:repcl:", replica_timeout_ms=100)
    eager = RedisBackend(url=url, prefix="t:repcl:", min_replicas=0)
    await waiting.start()
    await eager.start()
    try:
        jobs = [make_job(f"j{i}", overlap="allow") for i in range(12)]  # over the three primaries; each slot a grant
        assert {r.outcome for r in await waiting.claim([claim(j, 1000, "a") for j in jobs])} == {Outcome.WON}
        client = waiting._redis()
        port, stopped = next(iter(replicas.items()))
        held = {j.name for j in jobs if client.get_node_from_key(waiting._keys.job(j.name).state).port == port}
        assert held and len(held) < len(jobs), "the jobs must fall on the stopped replica's primary and others"
        stopped.proc.send_signal(signal.SIGSTOP)
        try:
            results = await waiting.claim([claim(j, 2000, "a") for j in jobs])
            outcomes = {j.name: r.outcome for j, r in zip(jobs, results, strict=True)}
            assert {n for n, o in outcomes.items() if o is Outcome.UNKNOWN} == held, outcomes
            assert all(o is Outcome.WON for n, o in outcomes.items() if n not in held), outcomes
            again = await eager.claim([claim(j, 3000, "b") for j in jobs])
            assert {r.outcome for r in again} == {Outcome.WON}, "min_replicas=0 does not wait"
        finally:
            stopped.proc.send_signal(signal.SIGCONT)
    finally:
        await waiting.close()
        await eager.close()
