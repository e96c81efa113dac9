"""The checks of the seed, raised at add(), and the constructor's own checks."""

from __future__ import annotations

import pytest

from anarchon import Scheduler
from anarchon.errors import InvalidJobError, UnsupportedOptionError
from anarchon.plugins import PluginManager
from anarchon_rabbitmq import RabbitMQBackend

pytestmark = pytest.mark.rabbitmq


def scheduler(**backend_options) -> Scheduler:
    # add() does no I/O: these checks need no broker.
    return Scheduler(backend=RabbitMQBackend(**backend_options))


def test_jitter_plus_max_late_must_be_shorter_than_slot_ttl():
    s = scheduler(slot_ttl_ms=60_000)
    with pytest.raises(InvalidJobError) as info:
        s.add("sync", "* * * * *", lambda: None, jitter_ms=2000, max_late_ms=58_000)
    message = str(info.value)
    assert "jitter_ms + max_late_ms = 2000 + 58000 = 60000" in message
    assert "slot_ttl_ms=60000" in message
    assert "lower max_late_ms or jitter_ms, or raise slot_ttl_ms" in message
    assert info.value.option == "max_late_ms"
    s.add("sync", "* * * * *", lambda: None, jitter_ms=2000, max_late_ms=57_999)  # one ms shorter is fine


def test_the_defaults_are_safe_with_the_default_slot_ttl():
    job = scheduler().add("sync", "* * * * *", lambda: None)
    assert job.options.jitter_ms + job.options.max_late_ms < 300_000


def test_a_longer_slot_ttl_allows_a_longer_max_late():
    scheduler(slot_ttl_ms=15 * 60_000).add("sync", "* * * * *", lambda: None, max_late_ms=10 * 60_000)
    with pytest.raises(InvalidJobError):
        scheduler().add("sync", "* * * * *", lambda: None, max_late_ms=10 * 60_000)


def test_history_ttl_is_refused_because_history_is_trimmed_by_size():
    assert RabbitMQBackend.capabilities.history_ttl is False
    with pytest.raises(UnsupportedOptionError) as info:
        scheduler().add("sync", "* * * * *", lambda: None, history_ttl_ms=86_400_000)
    assert info.value.option == "history_ttl_ms" and "history_size" in str(info.value)


@pytest.mark.parametrize("name", ["has.dot", "has space", "", "x" * 101, "slash/y", "ünï"])
def test_job_names_may_only_hold_letters_digits_underscore_and_dash(name):
    with pytest.raises(InvalidJobError) as info:
        scheduler().add(name, "* * * * *", lambda: None)
    assert info.value.option == "name"


@pytest.mark.parametrize(
    ("option", "value"),
    [("lease_ms", 30_000), ("max_takeovers", 1), ("overlap", "skip"), ("catch_up_ms", 60_000), ("hand_over", True)],
)
def test_lease_only_options_are_refused(option, value):
    assert RabbitMQBackend.capabilities.lease is False
    with pytest.raises(UnsupportedOptionError) as info:
        scheduler().add("sync", "* * * * *", lambda: None, **{option: value})
    message = str(info.value)
    assert info.value.option == option and "only claims" in message
    assert "Redis, PostgreSQL or SQLite" in message


def test_claim_tier_values_of_lease_options_are_accepted():
    job = scheduler().add("sync", "* * * * *", lambda: None, overlap="allow", catch_up_ms=0, hand_over=False)
    assert (job.options.overlap, job.options.catch_up_ms, job.options.hand_over) == ("allow", 0, False)


@pytest.mark.parametrize(
    "prefix", ["", "amq.", "amq.cron.", "a", "am", "amq", "has space", "x/y", "é.", "p" * 101, None, 7]
)
def test_the_prefix_is_checked(prefix):
    with pytest.raises(ValueError, match="prefix"):
        RabbitMQBackend(prefix=prefix)


@pytest.mark.parametrize("prefix", ["cron.", "billing.cron.", "a:b-c_d.", "amqx.", "AMQ."])
def test_safe_prefixes_are_accepted(prefix):
    assert RabbitMQBackend(prefix=prefix).prefix == prefix


@pytest.mark.parametrize("ttl", [0, -1, 1.5, "300000", True, 2**32])
def test_slot_ttl_is_checked(ttl):
    with pytest.raises(ValueError, match="slot_ttl_ms"):
        RabbitMQBackend(slot_ttl_ms=ttl)


def test_defaults_url_schemes_and_registration():
    backend = RabbitMQBackend()
    assert (backend.url, backend.prefix, backend.slot_ttl_ms) == ("amqp://localhost", "cron.", 300_000)
    caps = RabbitMQBackend.capabilities
    assert (caps.lease, caps.history_ttl, caps.server_clock, caps.multi_process) == (False, False, False, True)
    assert caps.idempotent_claim is True
    assert RabbitMQBackend.url_schemes == ("amqp", "amqps")
    plugins = PluginManager()
    assert plugins.backends()["rabbitmq"] is RabbitMQBackend
    from_url = plugins.backend_from_url("amqps://cron:pw@rabbit.internal/")
    assert isinstance(from_url, RabbitMQBackend) and from_url.url == "amqps://cron:pw@rabbit.internal/"
    assert "pw" not in repr(from_url)
    with pytest.raises(ValueError, match="AMQP URL"):
        RabbitMQBackend(url="redis://x")
    with pytest.raises(TypeError, match="aio-pika connection"):
        RabbitMQBackend(connection=object())  # type: ignore[arg-type]


def test_the_seeds_import_from_anarchon_gives_this_backend():
    import anarchon

    assert anarchon.RabbitMQBackend is RabbitMQBackend
    scheduler = anarchon.Scheduler(backend=anarchon.RabbitMQBackend(url="amqp://rabbit.internal"))
    assert isinstance(scheduler.backend, RabbitMQBackend) and scheduler.backend.url == "amqp://rabbit.internal"
