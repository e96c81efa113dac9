"""The audit trail in Redis: its two keys under one hash tag, ids past a lost counter, the trim."""

from __future__ import annotations

from anarchon_redis import RedisBackend


def _entry(n: int) -> str:
    return f'{{"at_ms": {n}, "by": "t", "action": "pause", "job": "j", "reason": null, "detail": {{}}}}'


async def test_ids_go_on_past_a_lost_counter_and_the_stream_is_trimmed(store):
    backend: RedisBackend = await store.backend()
    trail, counter = backend._keys.audit
    assert trail.split(":")[-2] == counter.split(":")[-2] == "{audit}", "one hash tag: one slot on a cluster"
    first = [await backend.audit_append("report", _entry(n)) for n in range(3)]
    assert first == [1, 2, 3]
    await backend._redis().delete(counter)  # lost by hand: the next id still comes after the stream's last
    assert await backend.audit_append("report", _entry(3)) == 4
    backend.audit_keep = 1
    for n in range(300):  # MAXLEN ~ trims whole macro nodes (100 entries each by default)
        await backend.audit_append("other", _entry(n))
    length = await backend._redis().xlen(trail)
    assert 1 <= length < 304, f"the stream was not trimmed: {length} entries"
    assert [i for i, _ in await backend.audit_entries(limit=2)] == [304, 303]
    assert [i for i, _ in await backend.audit_entries(limit=5, job="report")] == [], "trimmed away"
