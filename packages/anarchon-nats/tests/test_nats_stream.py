"""The stream: created on start() if missing, brought up to need if it exists."""

from __future__ import annotations

import asyncio
import contextlib
import uuid

import nats.js.errors
import pytest
from nats.js.api import DiscardPolicy, RetentionPolicy, StorageType, StreamConfig
from nats_helpers import make_job, now_ms, token

from anarchon import Scheduler
from anarchon.backend import Claim
from anarchon_nats import NatsBackend, StreamConflictError

pytestmark = pytest.mark.nats


async def test_start_creates_the_stream_over_prefix_with_the_documented_defaults(backends, names, client) -> None:
    await backends()
    info = await client.jetstream().stream_info(names.stream)
    assert info.config.subjects == [f"{names.prefix}>"]
    assert info.config.duplicate_window == 300.0
    assert info.config.max_msgs_per_subject == 1000
    assert info.config.num_replicas == 1
    assert info.config.storage == StorageType.FILE


async def test_the_new_stream_trims_by_count_per_subject_only(backends, names, client) -> None:
    """History is trimmed by count only: no age, total-count or byte limit that would drop runs sooner."""
    await backends(history_size=7)
    config = (await client.jetstream().stream_info(names.stream)).config
    assert config.max_msgs_per_subject == 7
    assert not config.max_age  # 0: no age limit (nats-py may also show it as None)
    assert config.max_msgs in (None, -1)
    assert config.max_bytes in (None, -1)
    assert config.retention == RetentionPolicy.LIMITS
    assert config.discard == DiscardPolicy.OLD  # a full subject drops its oldest run, never refuses a claim


async def test_options_reach_the_new_stream(backends, names, client) -> None:
    await backends(duplicate_window_ms=120_000, history_size=50)
    info = await client.jetstream().stream_info(names.stream)
    assert info.config.duplicate_window == 120.0
    assert info.config.max_msgs_per_subject == 50


async def test_an_existing_stream_with_other_settings_is_updated_and_keeps_the_rest(backends, names, client) -> None:
    js = client.jetstream()
    await js.add_stream(
        StreamConfig(
            name=names.stream,
            subjects=[f"{names.prefix[:-1]}-other.x"],
            duplicate_window=10,
            max_msgs_per_subject=5,
            max_bytes=64 * 1024 * 1024,
            description="the team's own stream",
        )
    )
    await backends()
    config = (await js.stream_info(names.stream)).config
    assert config.subjects == [f"{names.prefix[:-1]}-other.x", f"{names.prefix}>"]
    assert config.duplicate_window == 300.0
    assert config.max_msgs_per_subject == 1000
    assert config.max_bytes == 64 * 1024 * 1024
    assert config.description == "the team's own stream"


async def test_subjects_already_covered_by_a_wider_wildcard_are_not_added(backends, names, client) -> None:
    js = client.jetstream()
    wide = names.prefix.split(".")[0] + ".>"
    await js.add_stream(name=names.stream, subjects=[wide], duplicate_window=300, max_msgs_per_subject=1000)
    await backends()
    assert (await js.stream_info(names.stream)).config.subjects == [wide]


async def test_larger_limits_of_an_existing_stream_are_kept(backends, names, client) -> None:
    """Instances configured differently never undo each other: limits only go up."""
    js = client.jetstream()
    await js.add_stream(
        name=names.stream, subjects=[f"{names.prefix}>"], duplicate_window=600, max_msgs_per_subject=5000
    )
    await backends()
    config = (await js.stream_info(names.stream)).config
    assert config.duplicate_window == 600.0
    assert config.max_msgs_per_subject == 5000


async def test_an_unlimited_per_subject_limit_is_set_to_the_history_size(backends, names, client) -> None:
    js = client.jetstream()
    await js.add_stream(name=names.stream, subjects=[f"{names.prefix}>"], duplicate_window=300)
    await backends(history_size=200)
    assert (await js.stream_info(names.stream)).config.max_msgs_per_subject == 200


async def test_a_job_asking_for_more_history_raises_the_stream_limit_when_added(names, nats_url, client) -> None:
    js = client.jetstream()
    backend = NatsBackend(nats_url, stream=names.stream, prefix=names.prefix, history_size=100)
    scheduler = Scheduler(backend=backend)
    scheduler.add("small", "* * * * *", lambda: None, history_size=50)
    async with scheduler:
        assert (await js.stream_info(names.stream)).config.max_msgs_per_subject == 100
        scheduler.add("big", "* * * * *", lambda: None, history_size=2500)
        deadline = asyncio.get_running_loop().time() + 5
        while (await js.stream_info(names.stream)).config.max_msgs_per_subject != 2500:
            assert asyncio.get_running_loop().time() < deadline, "add() did not raise the per-subject limit"
            await asyncio.sleep(0.02)


async def test_prepare_takes_the_largest_of_the_backend_and_every_job(backends, names, client) -> None:
    (b,) = await backends(history_size=300)
    js = client.jetstream()
    await b.prepare([make_job("a", history_size=10), make_job("b", history_size=700), make_job("c", history_size=20)])
    assert (await js.stream_info(names.stream)).config.max_msgs_per_subject == 700
    await b.prepare([make_job("d", history_size=100)])
    assert (await js.stream_info(names.stream)).config.max_msgs_per_subject == 700


async def test_history_is_trimmed_by_count_per_job(backends) -> None:
    (b,) = await backends(history_size=3)
    job, other = make_job("trim", history_size=3), make_job("other", history_size=3)
    await b.claim([Claim(job, s, "a", token(), now_ms()) for s in range(1, 8)])
    await b.claim([Claim(other, 1, "a", token(), now_ms())])
    assert [r.slot_ms for r in await b.history("trim")] == [7, 6, 5]
    assert [r.slot_ms for r in await b.history("other")] == [1]


async def test_many_instances_starting_at_once_share_one_stream(backends, names, client) -> None:
    instances = await backends(8)
    assert len(instances) == 8
    names_now = await client.jetstream().streams_info()
    assert [s.config.name for s in names_now].count(names.stream) == 1


async def test_subjects_owned_by_another_stream_give_a_clear_error(names, nats_url, client) -> None:
    js = client.jetstream()
    squatter = f"{names.stream}_X"
    await js.add_stream(name=squatter, subjects=[f"{names.prefix}>"])
    try:
        backend = NatsBackend(nats_url, stream=names.stream, prefix=names.prefix)
        with pytest.raises(StreamConflictError, match=r"Choose another stream= or prefix="):
            await backend.start()
        await backend.close()
    finally:
        await js.delete_stream(squatter)


@pytest.mark.parametrize("stream", ["", "CR.ON", "CR ON", "CR*", "CR>", "a/b", "x" * 65, 7])
def test_a_bad_stream_name_is_refused_at_construction(stream: object) -> None:
    with pytest.raises(ValueError, match=r"stream=.*for example stream='BILLING_CRON'"):
        NatsBackend(stream=stream)  # type: ignore[arg-type]


@pytest.mark.parametrize("prefix", ["", "cron", ".cron.", "cron..", "cr*.", "cron.>.", "$JS.", "a b.", "x" * 200 + "."])
def test_a_bad_prefix_is_refused_at_construction(prefix: str) -> None:
    with pytest.raises(ValueError, match=r"prefix=.*for example prefix='billing.cron.'"):
        NatsBackend(prefix=prefix)


@pytest.mark.parametrize(
    ("option", "value"),
    [("duplicate_window_ms", 0), ("history_size", 0), ("history_size", 1.5), ("replicas", 0), ("replicas", 6)],
)
def test_bad_numbers_are_refused_at_construction(option: str, value: object) -> None:
    with pytest.raises(ValueError, match=option):
        NatsBackend(**{option: value})  # type: ignore[arg-type]


async def test_a_claim_for_a_job_never_prepared_still_raises_the_limit(backends, names, client) -> None:
    """Callers that skip prepare() (direct API use) still get the job's history size."""
    (b,) = await backends(history_size=5)
    (r,) = await b.claim([Claim(make_job("big", history_size=50), 1, "a", token(), now_ms())])
    assert r.won
    assert (await client.jetstream().stream_info(names.stream)).config.max_msgs_per_subject == 50


async def test_instances_racing_to_create_a_new_stream_all_start(nats_url, client) -> None:
    # Two creates racing can be answered "subjects overlap" (not "name in use") by NATS 2.9, or
    # "error creating store for stream" (500) while the winner's store is made: both seen under Pants.
    js = client.jetstream()
    for _ in range(25):
        tag = uuid.uuid4().hex[:10]
        backends = [NatsBackend(nats_url, stream=f"R_{tag}", prefix=f"r{tag}.cron.") for _ in range(8)]
        try:
            await asyncio.gather(*(b.start() for b in backends))
        finally:
            await asyncio.gather(*(b.close() for b in backends), return_exceptions=True)
            with contextlib.suppress(nats.js.errors.NotFoundError):
                await js.delete_stream(f"R_{tag}")


@pytest.mark.parametrize(
    ("version", "warns"),
    [
        ("2.9.10", True),
        ("2.2.0", True),
        ("2.10.0", False),
        ("2.15.1", False),
        ("3.0.0", False),
        ("0.0.0", False),
        ("", False),
    ],
)
def test_a_server_older_than_2_10_is_named_with_the_fix(version: str, warns: bool) -> None:
    from anarchon_nats._version import old_server_warning

    warning = old_server_warning(version)
    assert (warning is not None) is warns
    if warning:
        assert f"nats-server {version}" in warning and "2.10 or later" in warning and "#4043" in warning


async def test_start_warns_once_when_the_shared_server_is_older_than_2_10(backends, client, caplog) -> None:
    server = client.connected_server_version
    old = (server.major, server.minor) < (2, 10)
    with caplog.at_level("WARNING", logger="anarchon.nats"):
        await backends()
    said = [r.getMessage() for r in caplog.records if "removes a job's oldest history message" in r.getMessage()]
    assert len(said) == (1 if old else 0), said
