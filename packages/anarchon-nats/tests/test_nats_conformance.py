"""The conformance suite on the shared NATS server: one stream and prefix per test."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator

import nats
import pytest

from anarchon_conformance import BackendFactory, BackendSuite
from anarchon_nats import NatsBackend

pytestmark = pytest.mark.nats


class TestNatsConformance(BackendSuite):
    @pytest.fixture
    async def backend_factory(self, nats_url: str) -> AsyncIterator[BackendFactory]:
        tag = uuid.uuid4().hex[:10]
        stream, prefix = f"CONF_{tag}", f"conf{tag}.cron."
        # history_size=1: the stream keeps the largest of the backend's and every job's size (the seed), so
        # a small backend size lets the suite's jobs decide, as its history-size test expects.
        yield lambda: NatsBackend(nats_url, stream=stream, prefix=prefix, history_size=1)
        nc = await nats.connect(nats_url)
        try:
            with contextlib.suppress(nats.js.errors.NotFoundError):
                await nc.jetstream().delete_stream(stream)
        finally:
            await nc.close()
