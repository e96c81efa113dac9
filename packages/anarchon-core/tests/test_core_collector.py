"""The cyclic collector is deferred around bursts of work, never held off indefinitely."""

from __future__ import annotations

import gc
import types

import pytest

from anarchon import _collector
from anarchon._collector import CollectionDeferred


def test_overlapping_deferrals_cannot_hold_the_collector_past_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr(_collector, "time", types.SimpleNamespace(monotonic=lambda: now[0]))
    assert gc.isenabled()
    first = CollectionDeferred().__enter__()
    assert not gc.isenabled()
    now[0] += _collector.MAX_HELD_S / 2
    second = CollectionDeferred().__enter__()  # within the bound: nests
    first.end()
    assert not gc.isenabled(), "the second deferral still holds"
    now[0] += _collector.MAX_HELD_S
    third = CollectionDeferred().__enter__()  # the collector was held past the bound: refused
    second.end()
    assert gc.isenabled(), "a deferral asked for past the bound kept the collector off"
    third.end()
    assert gc.isenabled()
    with CollectionDeferred():  # a fresh run of deferrals holds again
        assert not gc.isenabled()
    assert gc.isenabled()
