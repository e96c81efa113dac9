"""The guarantee report names each Redis setting under which a slot can run twice, with its fix.

Private servers only: the settings are changed with ``CONFIG SET`` between two
reports, so each test shows the finding come and go with its cause.
"""

from __future__ import annotations

import pytest
import redis

from anarchon.guarantees import Finding, check_findings
from anarchon_redis import RedisBackend

pytestmark = pytest.mark.slow


async def _report(url: str, **kwargs: object) -> dict[str, Finding]:
    backend = RedisBackend(url=url, **kwargs)  # type: ignore[arg-type]
    await backend.start()
    try:
        return {f.topic: f for f in check_findings(await backend.guarantees())}
    finally:
        await backend.close()


def _config(port: int, **settings: str) -> None:
    client = redis.Redis(host="127.0.0.1", port=port)
    try:
        for key, value in settings.items():
            client.config_set(key.replace("_", "-"), value)
    finally:
        client.close()


async def test_a_server_that_keeps_nothing_on_disk_is_named_and_an_aof_clears_it(unstarted_server):
    unstarted_server.args = ("--appendonly", "no")
    unstarted_server.start()
    found = (await _report(unstarted_server.url))["persistence"]
    assert not found.ok and "keeps nothing on disk" in found.detail and "one slot per job is not run" in found.detail
    assert found.fix == "set appendonly yes (appendfsync everysec)"
    _config(unstarted_server.port, save="3600 1")
    found = (await _report(unstarted_server.url))["persistence"]
    assert not found.ok and found.detail.startswith("snapshots only (save 3600 1)")
    _config(unstarted_server.port, appendonly="yes", appendfsync="everysec")
    found = (await _report(unstarted_server.url))["persistence"]
    assert found.ok and "appendfsync everysec" in found.detail


async def test_an_eviction_policy_that_can_drop_a_claim_is_named(private_server):
    assert (await _report(private_server.url))["eviction"].ok
    _config(private_server.port, maxmemory="100mb", maxmemory_policy="allkeys-lru")
    found = (await _report(private_server.url))["eviction"]
    assert not found.ok and "allkeys-lru" in found.detail and "noeviction" in found.fix


async def test_replicas_that_claims_do_not_wait_for_are_named_and_min_replicas_clears_it(replicated):
    primary, replica = replicated
    found = (await _report(primary.url))["replicas"]  # min_replicas=auto, the default: waits for one
    assert found.ok and "one of 1 replica(s) has it (min_replicas auto)" in found.detail
    found = (await _report(primary.url + "?min_replicas=0"))["replicas"]
    assert not found.ok and found.detail.startswith("1 replica(s), and claims do not wait for them")
    assert "min_replicas=1" in found.fix
    found = (await _report(primary.url + "?min_replicas=1"))["replicas"]
    assert found.ok and "1 of 1 replica(s)" in found.detail
    found = (await _report(primary.url, min_replicas=2))["replicas"]
    assert not found.ok and "but 1 are connected" in found.detail
    role = (await _report(replica.url))["role"]
    assert not role.ok and "replica (read-only)" in role.detail and "primary" in role.fix
