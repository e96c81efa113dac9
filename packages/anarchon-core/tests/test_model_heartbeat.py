"""Counterexamples the protocol model found in the heartbeat design (model/README.md), pinned.

Finding 2b (trail ``design-hb-no-revived``): a claim sent before a heartbeat
lapse, whose grant arrives after a beat revived the record, must not start:
the fleet may have taken the run over while the record was expired, and the
owner's deadline alone (moved on by the reviving beat) does not show it.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from anarchon import MemoryBackend, MemoryStore, Scheduler
from anarchon.liveness import LIVENESS_TTL_MS


@pytest.mark.asyncio
async def test_a_claim_sent_before_a_lapse_is_not_held_after_the_revival() -> None:
    a = Scheduler(MemoryBackend(MemoryStore()), instance_id="a")
    await a.start()
    heartbeat = a._heartbeat
    assert heartbeat is not None
    await asyncio.sleep(0.01)  # the monotonic clock moves past the first beat's acknowledgement
    sent_before = time.monotonic()  # the model's delayed claim: sent while the heartbeat holds
    assert heartbeat.held(sent_before)
    await heartbeat.stop(leave=False)  # beats fail: the lapse

    async def lapsed() -> None:
        while heartbeat.held(sent_before):  # the owner's deadline passes, within the TTL
            await asyncio.sleep(0.05)

    await asyncio.wait_for(lapsed(), LIVENESS_TTL_MS / 1000 + 2)
    assert await heartbeat.start(5)  # a beat revives the record and is acknowledged
    sent_after = time.monotonic()
    assert not heartbeat.held(sent_before), (
        "a grant whose claim was sent before the lapse would start after the revival: "
        "the fleet may have taken that run over meanwhile (model trail design-hb-no-revived)"
    )
    assert heartbeat.held(sent_after), "a claim sent after the revival is held again"
    await a.stop(grace_ms=500)
