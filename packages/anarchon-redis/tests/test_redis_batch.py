"""Claims due together go out as a few CLAIM_MANY scripts on one server: each claim keeps its own answer."""

from __future__ import annotations

import time

from anarchon.backend import Outcome, fencing_floor
from anarchon_redis import _scripts as S

from .conftest import Store, claim, make_job


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
