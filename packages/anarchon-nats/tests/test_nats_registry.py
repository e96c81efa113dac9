"""The fleet registry's reads on NATS: a read that misses a live instance's head does not make it gone.

Reading the heads is one ordered consumer. Once in CI, under load, the
conformance suite's rolling-deploy test saw the instance whose older
definition had yielded a job run one more slot of it: its yield had lapsed
for a moment, and a read that missed the newer instance's head is the one
way found for that (an earlier form of this read did miss heads under load).
A reader now keeps each head it has read until the head's put is
``REGISTRY_TTL_MS`` old, unless a read sees the entry removed.
"""

from __future__ import annotations

import time
from typing import Any

from anarchon.fleet import REGISTRY_TTL_MS


async def _live(reader: Any) -> list[str]:
    return [instance for instance, _head, _seen in await reader.registered()]


async def test_a_read_that_misses_a_live_head_keeps_the_instance(backends: Any) -> None:
    writer_a, writer_b, reader = await backends(3)
    await writer_a.register("a", "head-a", "[]")
    await writer_b.register("b", "head-b", "[]")
    assert await _live(reader) == ["a", "b"]

    read = reader._last_heads

    async def missing_b() -> Any:  # what the consumer delivered in that read: b's head not among it
        heads, gone = await read()
        heads.pop("b")
        return heads, gone

    reader._last_heads = missing_b
    assert await _live(reader) == ["a", "b"], "one read that missed b's head took b for gone"
    reader._last_heads = read
    await writer_b.unregister("b")
    assert await _live(reader) == ["a"], "a removal the read saw must end the entry at once"


async def test_a_head_read_before_goes_once_its_put_is_older_than_the_ttl(backends: Any) -> None:
    writer, reader = await backends(2)
    await writer.register("a", "head-a", "[]")
    now = time.time_ns() // 1_000_000
    reader._read_heads["stale"] = ("head-stale", now - REGISTRY_TTL_MS - 1)  # read once, never put again
    assert await _live(reader) == ["a"]
    assert "stale" not in reader._read_heads
