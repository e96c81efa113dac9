"""The conformance suite against the reference backend, MemoryBackend."""

from __future__ import annotations

import pytest

from anarchon.memory import MemoryBackend, MemoryStore
from anarchon_conformance import BackendFactory, BackendSuite, HistoryLimitTests, PlantForeignRecord


class TestMemoryBackend(BackendSuite, HistoryLimitTests):
    @pytest.fixture
    def backend_factory(self) -> BackendFactory:
        store = MemoryStore()  # one store per test: its own namespace
        return lambda: MemoryBackend(store)

    @pytest.fixture
    def plant_foreign_record(self) -> PlantForeignRecord:
        pytest.skip("the memory store holds Run objects of this process only: no other program can write to it")
