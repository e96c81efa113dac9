"""The audit trail on NATS: a stream of its own, made by the first append only, trimmed by the server."""

from __future__ import annotations

import contextlib

import nats
import pytest
from nats.aio.client import Client

from anarchon_nats._names import audit_stream

pytestmark = pytest.mark.nats


def _entry(n: int) -> str:
    return f'{{"at_ms": {n}, "by": "t", "action": "pause", "job": "j", "reason": null, "detail": {{}}}}'


async def test_the_stream_is_made_by_the_first_append_and_keeps_the_newest(backends, names, client: Client):
    (backend,) = await backends(1)
    stream = audit_stream(names.stream, names.prefix)
    try:
        assert await backend.audit_entries(limit=5) == [], "a look reads nothing"
        with pytest.raises(nats.js.errors.NotFoundError):
            await client.jetstream().stream_info(stream)  # ... and makes nothing
        backend.audit_keep = 3
        ids = [await backend.audit_append("report" if n % 2 else "other", _entry(n)) for n in range(6)]
        assert ids == [1, 2, 3, 4, 5, 6]
        assert (await client.jetstream().stream_info(stream)).state.messages == 3
        assert [i for i, _ in await backend.audit_entries(limit=10)] == [6, 5, 4]
        assert [i for i, _ in await backend.audit_entries(limit=10, job="report")] == [6, 4]
        assert [i for i, _ in await backend.audit_entries(limit=10, before_id=6, job="other")] == [5]
    finally:
        with contextlib.suppress(nats.js.errors.NotFoundError):
            await client.jetstream().delete_stream(stream)
