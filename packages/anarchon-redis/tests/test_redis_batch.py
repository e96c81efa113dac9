"""Claims due together go out as a few CLAIM_MANY scripts on one server: each claim keeps its own answer."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any

from anarchon.backend import Outcome, fencing_floor
from anarchon.run import RunStatus
from anarchon_redis import _scripts as S

from .conftest import RedisServer, Store, claim, make_job


async def test_a_batch_over_several_scripts_answers_each_claim_alone(single: Store) -> None:
    """600 claims (three scripts) with one job's state broken: that claim unknown, the others decided as alone."""
    a, b = await single.backend(), await single.backend()
    jobs = [make_job(f"batch-{i:03d}") for i in range(600)]
    raw = single.raw()
    try:
        await raw.set(f"{single.prefix}{{batch-300}}:state", "junk")  # a wrong type: the script errors
    finally:
        await raw.aclose()
    started = time.time_ns() // 1_000_000
    first = await a.claim([claim(j, 1000, "a") for j in jobs])
    assert [r.outcome for r in first].count(Outcome.WON) == 599
    assert first[300].outcome is Outcome.UNKNOWN
    again = [claim(j, 1000, "b") for j in jobs] + [claim(jobs[0], 2000, "b")]
    second = await b.claim(again)
    assert {r.outcome for i, r in enumerate(second[:600]) if i != 300} == {Outcome.LOST}
    assert second[600].outcome is Outcome.SKIPPED  # the first slot's run still holds its lease
    grants = [r.grant for r in first if r.grant is not None]
    assert sorted(g.job for g in grants) == sorted(j.name for j in jobs if j.name != "batch-300")
    assert all(g.fencing >= fencing_floor(started) and g.slot_ms == 1000 for g in grants)  # new counters


def test_the_batch_script_runs_the_claim_script_unchanged() -> None:
    """The rules live in claim.lua alone: CLAIM_MANY holds its body verbatim."""
    body = (S._LUA / "claim.lua").read_text(encoding="utf-8")
    assert body in S.CLAIM_MANY.source
    assert S.CLAIM_MANY.sha != S.CLAIM.sha


async def test_finishes_of_one_batch_go_as_one_script_each_answered_alone(private_server: RedisServer) -> None:
    """Finishes gathered together: one FINISH_MANY script; a stale token's finish is refused, the rest recorded.

    On a server of its own: its script calls are counted, and nothing else may make any.
    """
    single = Store(private_server.url, "single")
    a = await single.backend()
    jobs = [make_job(f"fin-{i:03d}") for i in range(300)]  # two scripts: 250 and 50
    results = await a.claim([claim(j, 1000, "a") for j in jobs])
    grants = [r.grant for r in results if r.grant is not None]
    assert len(grants) == len(jobs)
    runs = [(await a.history(g.job))[0].replace(status=RunStatus.SUCCEEDED) for g in grants]
    stale = replace(grants[7], token="not-the-token")
    raw = single.raw()
    try:
        await raw.script_load(S.FINISH_MANY.source)  # counted once: EVALSHA, not NOSCRIPT then EVAL
        before = await _script_calls(raw)
        answers = await asyncio.gather(
            *(a.finish(stale if i == 7 else g, run) for i, (g, run) in enumerate(zip(grants, runs, strict=True)))
        )
        calls = await _script_calls(raw) - before
    finally:
        await raw.aclose()
    assert answers == [i != 7 for i in range(len(jobs))], "each finish answered as if sent alone"
    assert calls == 2, f"{len(jobs)} finishes of one batch took {calls} script calls, not 2 FINISH_MANY"
    assert (await a.history("fin-000"))[0].status is RunStatus.SUCCEEDED
    assert (await a.history("fin-007"))[0].status is RunStatus.RUNNING
    await a.close()


async def _script_calls(raw: Any) -> int:
    stats = await raw.info("commandstats")
    return sum(int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in ("evalsha", "eval"))


def test_the_finish_batch_script_runs_the_finish_script_unchanged() -> None:
    body = (S._LUA / "finish.lua").read_text(encoding="utf-8")
    assert body in S.FINISH_MANY.source


async def test_the_slots_one_batch_script_decides_are_told_in_one_message(private_server: RedisServer) -> None:
    """Ranked claims: 600 slots won in three CLAIM_MANY scripts are three PUBLISH, each listing its slots.

    One message per slot was 1,000 messages a second to every instance at 1,000 every-second
    jobs, more than an instance read before its later ranks' claims came due.
    """
    single = Store(private_server.url, "single")
    a = await single.backend()
    jobs = [make_job(f"told-{i:03d}") for i in range(600)]
    raw = single.raw()
    listener = single.raw()
    try:
        pubsub = listener.pubsub()
        await pubsub.subscribe(f"{single.prefix}decided")
        await pubsub.get_message(timeout=1)  # the subscription's confirmation
        before = await _calls(raw, "publish")
        results = await a.claim([claim(j, 1000, "a") for j in jobs])
        published = await _calls(raw, "publish") - before
        messages = []
        while len(messages) < published:
            message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=5)
            assert message is not None, f"heard {len(messages)} of {published} messages"
            messages.append(message["data"])
        await pubsub.aclose()
    finally:
        await raw.aclose()
        await listener.aclose()
        await a.close()
    assert all(r.outcome is Outcome.WON for r in results)
    assert published == 3, f"600 slots decided by three scripts were told in {published} messages"
    heard = sorted(line for m in messages for line in m.split("\n"))
    assert heard == sorted(f"told-{i:03d} 1000" for i in range(600))


async def _calls(raw: Any, command: str) -> int:
    stats = await raw.info("commandstats")
    return int(stats.get(f"cmdstat_{command}", {}).get("calls", 0))
