"""The conformance suite on the shared NATS server: one stream and prefix per test."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator

import nats
import pytest

from anarchon.backend import Backend
from anarchon_conformance import BackendFactory, BackendSuite, HistoryLimitTests, PlantForeignRecord
from anarchon_nats import NatsBackend
from anarchon_nats._names import audit_stream, claims_subject, results_subject, schedules_stream

pytestmark = pytest.mark.nats


class TestNatsConformance(BackendSuite, HistoryLimitTests):
    @pytest.fixture
    async def backend_factory(self, nats_url: str) -> AsyncIterator[BackendFactory]:
        tag = uuid.uuid4().hex[:10]
        stream, prefix = f"CONF_{tag}", f"conf{tag}.cron."
        # history_size=1: the stream keeps the largest of the backend's and every job's size (the seed), so
        # a small backend size lets the suite's jobs decide, as its history-size test expects.
        self.prefix = prefix
        yield lambda: NatsBackend(nats_url, stream=stream, prefix=prefix, history_size=1)
        nc = await nats.connect(nats_url)
        try:
            # The backend's stream, the stored schedules', the audit trail's and the fleet registry's bucket.
            streams = (stream, schedules_stream(stream, prefix), audit_stream(stream, prefix), f"KV_{stream}_registry")
            for name in streams:
                with contextlib.suppress(nats.js.errors.NotFoundError):
                    await nc.jetstream().delete_stream(name)
        finally:
            await nc.close()

    @pytest.fixture
    def plant_foreign_record(self, nats_url: str) -> PlantForeignRecord:
        async def plant(backend: Backend, job: str, slot_ms: int) -> None:
            # Published by hand on the job's subjects: not JSON, a slot of 1e20 or Infinity, a bogus status,
            # and a claim whose start time is beyond datetime.
            def result(slot: str, status: str = "succeeded") -> bytes:
                return f'{{"v": 1, "token": "t", "job": "{job}", "slot_ms": {slot}, "status": "{status}", '.encode() + (
                    b'"instance": "x"}'
                )

            claim = (
                f'{{"v": 1, "job": "{job}", "slot_ms": {slot_ms + 5}, "instance": "x", "token": "t", '
                '"started_at_ms": 100000000000000000}'
            ).encode()
            nc = await nats.connect(nats_url)
            try:
                js = nc.jetstream()
                for body in (b"not json", result("1e20"), result("Infinity"), result(str(slot_ms), "bogus")):
                    await js.publish(results_subject(self.prefix, job), body)
                await js.publish(claims_subject(self.prefix, job), claim)
            finally:
                await nc.close()

        return plant
