"""The guarantee report of one NATS server: file storage keeps claims, memory storage is named."""

from __future__ import annotations

from nats.js.api import StorageType, StreamConfig

from anarchon.guarantees import check_findings


async def test_one_server_on_file_storage_keeps_every_claim_across_a_restart(backends) -> None:
    (b,) = await backends(1)
    report = {f.topic: f for f in check_findings(await b.guarantees())}
    assert report["storage"].ok and "file storage" in report["storage"].detail
    assert report["replicas"].ok and "sync_interval" in report["replicas"].detail


async def test_a_stream_kept_in_memory_is_named_with_its_fix(backends, names, client) -> None:
    """A stream someone made on memory storage before the fleet started: the backend uses it, the report says so."""
    subject = f"{names.prefix}>"
    await client.jetstream().add_stream(StreamConfig(name=names.stream, subjects=[subject], storage=StorageType.MEMORY))
    (b,) = await backends(1)
    (storage,) = [f for f in await b.guarantees() if f.topic == "storage"]
    assert not storage.ok and "kept in memory" in storage.detail and "file storage" in storage.fix
