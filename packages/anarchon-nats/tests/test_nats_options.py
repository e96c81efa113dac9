"""The seed's checks, each raised by Scheduler.add() before anything runs."""

from __future__ import annotations

import pytest

from anarchon import Scheduler
from anarchon.errors import InvalidJobError, UnsupportedOptionError
from anarchon_nats import NatsBackend


def _scheduler(**kw: object) -> Scheduler:
    return Scheduler(backend=NatsBackend(**kw))  # type: ignore[arg-type]


def test_jitter_plus_max_late_must_be_shorter_than_the_duplicate_window() -> None:
    scheduler = _scheduler(duplicate_window_ms=60_000)
    with pytest.raises(InvalidJobError) as err:
        scheduler.add("sync", "* * * * *", lambda: None, jitter_ms=2000, max_late_ms=58_000)
    message = str(err.value)
    assert "jitter_ms + max_late_ms = 2000 + 58000 = 60000 ms" in message
    assert "duplicate_window_ms=60000" in message
    assert "Lower jitter_ms or max_late_ms, or raise NatsBackend(duplicate_window_ms=...) above 60000" in message
    assert "sync" not in scheduler.jobs


def test_just_inside_the_window_is_accepted() -> None:
    scheduler = _scheduler(duplicate_window_ms=60_000)
    job = scheduler.add("sync", "* * * * *", lambda: None, jitter_ms=2000, max_late_ms=57_999)
    assert job.options.max_late_ms == 57_999


def test_the_defaults_fit_the_default_window() -> None:
    job = _scheduler().add("sync", "* * * * *", lambda: None)
    assert (job.options.jitter_ms, job.options.max_late_ms) == (2000, 60_000)


def test_the_default_options_are_checked_against_a_small_window() -> None:
    with pytest.raises(InvalidJobError, match="2000 \\+ 60000"):
        _scheduler(duplicate_window_ms=30_000).add("sync", "* * * * *", lambda: None)


def test_history_ttl_is_refused_because_history_is_trimmed_by_count_only() -> None:
    assert NatsBackend.capabilities.history_ttl is False
    with pytest.raises(UnsupportedOptionError, match="history_ttl_ms=.*trims history by count only") as err:
        _scheduler().add("sync", "* * * * *", lambda: None, history_ttl_ms=86_400_000)
    assert err.value.option == "history_ttl_ms"


@pytest.mark.parametrize("name", ["a.b", "a*", "a>", "a b", "", "x" * 101, "sync:1", "ä"])
def test_job_names_may_only_hold_letters_digits_underscore_and_dash(name: str) -> None:
    with pytest.raises(InvalidJobError, match="letters, digits"):
        _scheduler().add(name, "* * * * *", lambda: None)


@pytest.mark.parametrize(
    ("option", "value"),
    [("lease_ms", 30_000), ("max_takeovers", 2), ("overlap", "skip"), ("catch_up_ms", 60_000), ("hand_over", True)],
)
def test_lease_only_options_are_refused(option: str, value: object) -> None:
    with pytest.raises(UnsupportedOptionError) as err:
        _scheduler().add("sync", "* * * * *", lambda: None, **{option: value})
    message = str(err.value)
    assert option in message
    assert "only claims" in message
    assert "Redis, PostgreSQL or SQLite" in message


def test_the_claim_tier_values_of_lease_options_are_what_a_nats_job_gets() -> None:
    job = _scheduler().add("sync", "* * * * *", lambda: None)
    assert (job.options.overlap, job.options.catch_up_ms, job.options.hand_over) == ("allow", 0, False)


def test_capabilities_declare_a_claim_backend() -> None:
    caps = NatsBackend.capabilities
    assert (caps.lease, caps.history_ttl, caps.server_clock, caps.idempotent_claim, caps.multi_process) == (
        False,
        False,
        False,
        True,
        True,
    )
    assert caps.kind == "claim"
    assert NatsBackend.name == "nats"
    assert NatsBackend.url_schemes == ("nats", "tls")


def test_constructor_defaults_are_the_documented_ones() -> None:
    b = NatsBackend()
    assert b.servers == ["nats://localhost:4222"]
    assert b.connection is None
    assert (b.stream, b.prefix, b.duplicate_window_ms, b.history_size, b.replicas) == (
        "CRON",
        "cron.",
        300_000,
        1000,
        None,
    )
    assert NatsBackend(["nats://n1:4222", "nats://n2:4222"]).servers == ["nats://n1:4222", "nats://n2:4222"]


def test_check_job_does_no_io() -> None:
    """check_job is synchronous and runs on a backend that never started (no connection at all)."""
    backend = NatsBackend("nats://127.0.0.1:1", duplicate_window_ms=10_000)
    scheduler = Scheduler(backend=backend)
    with pytest.raises(InvalidJobError):
        scheduler.add("sync", "* * * * *", lambda: None, jitter_ms=0, max_late_ms=10_000)
    assert backend._nc is None
