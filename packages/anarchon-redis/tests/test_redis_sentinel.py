"""Redis Sentinel: the ``redis+sentinel://`` URL, the suite's claims through it, and failovers Sentinel runs.

A private primary, one replica and three Sentinels on free ports, started once for the module (no
persistence: replication alone keeps the claims); every wait polls the servers with a deadline. The
failover tests come last: they move the primary, and each test asks the Sentinels where it is.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from anarchon import Scheduler
from anarchon.backend import Outcome
from anarchon.urls import redact_url
from anarchon_conformance import BackendFactory, ClaimTests, LeaseTests, eventually, free_port
from anarchon_redis import RedisBackend, _replicas
from anarchon_redis._sentinel import SentinelPrimary, target

from .conftest import RedisServer, wait_ping

pytestmark = pytest.mark.redis

SERVICE = "anarchon"


# -- the URL (no server) -------------------------------------------------------------------------


def test_the_url_names_the_sentinels_the_service_and_the_database() -> None:
    url = "redis+sentinel://u:p%40ss@s1:26380,s2,[::1]:5000/billing/3?prefix=b:&socket_timeout=2&sentinel_password=sp"
    backend = RedisBackend.from_url(url)
    assert backend.prefix == "b:" and backend.min_replicas is None  # the defaults hold: claims wait for a replica
    t = target(backend._url)
    assert t.sentinels == [("s1", 26380), ("s2", 26379), ("::1", 5000)] and t.service == "billing"
    assert t.connection == {"username": "u", "password": "p@ss", "db": 3, "socket_timeout": 2.0}
    assert t.sentinel == {"socket_timeout": 2.0, "password": "sp"}
    shown = repr(backend)
    assert "p%40ss" not in shown and "p@ss" not in shown and "sentinel_password=sp" not in shown
    assert "redis+sentinel://u:***@s1:26380" in shown and "sentinel_password=***" in shown
    assert isinstance(backend._redis(), SentinelPrimary)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("redis+sentinel:///mymaster", "names no Sentinel"),
        ("redis+sentinel://s1:26379", "names no service"),
        ("redis+sentinel://s1:26379/", "names no service"),
        ("redis+sentinel://s1:26379/0", "the service name '0' .* is a number: the database comes after"),
        ("redis+sentinel://s1:abc/mymaster", "the Sentinel port in 's1:abc' .* must be a number from 1 to 65535"),
        ("redis+sentinel://s1:70000/mymaster", "the Sentinel port in 's1:70000'"),
        ("redis+sentinel://s1:26379,,s2/mymaster", "the Sentinel address '' .* has no host"),
        ("redis+sentinel://s1/mymaster/zero", "the database .* must be a number after the service name"),
        ("redis+sentinel://s1/mymaster/0/1", "the database .* must be a number"),
        ("redis+sentinel://s1/mymaster?db=x", "must be a number"),
        ("redis+sentinel://s1/mymaster?cluster=true", "cluster=true .* Sentinel watches one primary"),
        ("redis+sentinel://s1/mymaster?ssl_ca_certs=/ca.pem", "TLS is not offered through a redis\\+sentinel"),
        ("redis+sentinel://s1/mymaster?prefx=a:", "unknown option 'prefx'.*sentinel_password"),
        ("redis+sentinel://s1/mymaster?sweep_ms=soon", "sweep_ms='soon' in the Redis URL's query must be an integer"),
        ("redis+sentinel://s1/mymaster?min_replicas=-1", "min_replicas="),
    ],
)
def test_a_bad_url_is_refused_naming_the_part_and_the_fix(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RedisBackend.from_url(url)


def test_a_password_is_never_shown_even_in_a_refusal() -> None:
    with pytest.raises(ValueError, match="percent-encode") as info:
        RedisBackend.from_url("redis+sentinel://:se#cret@s1:26379/mymaster")
    assert "se#cret" not in str(info.value) and "cret" not in str(info.value)
    with pytest.raises(ValueError, match="port") as bad_port:
        RedisBackend.from_url("redis+sentinel://:secret@s1:x/mymaster")
    assert "secret" not in str(bad_port.value)
    assert redact_url("redis+sentinel://:secret@s1,s2/m?sentinel_password=other") == (
        "redis+sentinel://:***@s1,s2/m?sentinel_password=***"
    )


def test_cluster_mode_is_refused_with_a_sentinel_url() -> None:
    with pytest.raises(ValueError, match="cluster=True with a redis\\+sentinel:// URL"):
        RedisBackend("redis+sentinel://s1/mymaster", cluster=True)


def test_the_scheme_reaches_the_redis_backend() -> None:
    scheduler = Scheduler(backend="redis+sentinel://s1/mymaster?prefix=x:")
    assert isinstance(scheduler.backend, RedisBackend) and scheduler.backend.prefix == "x:"


# -- what the replica watch learns (no server) ---------------------------------------------------


def _info(role: str, replid: str, *states: str) -> dict[str, Any]:
    info: dict[str, Any] = {"role": role, "master_replid": replid, "connected_slaves": len(states)}
    for i, state in enumerate(states):
        info[f"slave{i}"] = {"ip": "127.0.0.1", "port": 7000 + i, "state": state, "offset": 1, "lag": 0}
    return info


def test_only_an_online_replica_counts_for_the_wait() -> None:
    assert _replicas.online(_info("master", "a", "wait_bgsave")) == 0  # syncing: it cannot acknowledge yet
    assert _replicas.online(_info("master", "a", "online", "send_bulk")) == 1
    assert _replicas.online({"role": "master", "connected_slaves": 2}) == 2  # not itemised: the count


def test_a_demoted_primarys_answer_teaches_the_watch_nothing() -> None:
    watch = _replicas.ReplicaWatch()
    watch.learn(_info("master", "old", "online"))
    assert watch.needed(time.monotonic()) == 1
    watch.learn(_info("slave", "new"))  # the old primary, now the new one's replica: no replica, a new history
    assert watch.needed(time.monotonic()) == 1 and watch.connected == 1


def test_a_short_wait_is_excused_only_on_a_primary_with_no_replica_in_its_history() -> None:
    watch = _replicas.ReplicaWatch()
    watch.learn(_info("master", "old", "online"))
    assert not watch.excused(_info("master", "old"))  # a switch-over's old primary, its replica promoted
    assert not watch.excused(_info("slave", "promoted"))  # a replica: nothing granted there
    assert not watch.excused(None)  # no INFO answer: not excused
    assert not watch.excused(_info("master", "other", "online"))  # its replica did not acknowledge
    assert watch.excused(_info("master", "promoted", "wait_bgsave"))  # promoted after a crash; its replica syncs
    assert watch.needed(time.monotonic()) == 0  # and the watch learnt it: the next claims do not wait


# -- a primary, a replica and three Sentinels ----------------------------------------------------


class SentinelSet:
    """The servers of the module, and where the Sentinels say the primary is."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.nodes = [RedisServer(root / "node0", "--appendonly", "no"), RedisServer(root / "node1")]
        self.sentinel_ports: list[int] = []
        self.sentinels: list[subprocess.Popen[bytes]] = []

    def url(self, prefix: str) -> str:
        hosts = ",".join(f"127.0.0.1:{p}" for p in self.sentinel_ports)
        return f"redis+sentinel://{hosts}/{SERVICE}/0?prefix={prefix}"

    def start(self) -> None:
        primary, replica = self.nodes
        primary.start()
        replica.args = ("--appendonly", "no", "--replicaof", "127.0.0.1", str(primary.port))
        replica.start()
        self.synced(primary.port)
        for i in range(3):
            port = free_port()
            d = self.root / f"sentinel{i}"
            d.mkdir(parents=True)
            (d / "sentinel.conf").write_text(
                f"port {port}\nbind 127.0.0.1\ndir {d}\nlogfile sentinel.log\n"
                f"sentinel monitor {SERVICE} 127.0.0.1 {primary.port} 2\n"
                f"sentinel down-after-milliseconds {SERVICE} 1000\n"
                f"sentinel failover-timeout {SERVICE} 3000\n"
                f"sentinel parallel-syncs {SERVICE} 1\n"
            )
            self.sentinel_ports.append(port)
            self.sentinels.append(
                subprocess.Popen(
                    ["redis-server", str(d / "sentinel.conf"), "--sentinel"],
                    cwd=d,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        for port in self.sentinel_ports:
            wait_ping(port)
        self.until(self.settled, 30, "every Sentinel sees the other two and the replica")

    def stop(self) -> None:
        for proc in self.sentinels:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        for node in self.nodes:
            node.stop(kill=True)

    @staticmethod
    def until(check: Any, timeout_s: float, what: str) -> Any:
        deadline = time.monotonic() + timeout_s
        while True:
            value = check()
            if value:
                return value
            assert time.monotonic() < deadline, f"{what}: not after {timeout_s:.0f} s"
            time.sleep(0.1)

    def _sentinel(self, port: int) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=port, socket_timeout=2, decode_responses=True)

    def primary_port(self) -> int | None:
        """The primary's port when every Sentinel names the same one, else ``None``."""
        ports = set()
        for port in self.sentinel_ports:
            client = self._sentinel(port)
            try:
                address = client.sentinel_get_master_addr_by_name(SERVICE)
                ports.add(int(address[1]) if address else None)
            except redis.RedisError:
                return None
            finally:
                client.close()
        return ports.pop() if len(ports) == 1 else None

    def settled(self) -> bool:
        """Every Sentinel agrees on a healthy primary, knows the other two and one replica that is up."""
        if self.primary_port() is None:
            return False
        for port in self.sentinel_ports:
            client = self._sentinel(port)
            try:
                master = client.sentinel_master(SERVICE)
                replicas = client.sentinel_slaves(SERVICE)
            except redis.RedisError:
                return False
            finally:
                client.close()
            healthy = [r for r in replicas if not r["is_sdown"] and r.get("master-link-status") == "ok"]
            if master["num-other-sentinels"] < 2 or master["is_sdown"] or master["is_odown"] or len(healthy) != 1:
                return False
        return True

    def node(self, port: int) -> RedisServer:
        return next(n for n in self.nodes if n.port == port)

    def synced(self, port: int) -> None:
        client = redis.Redis(host="127.0.0.1", port=port)
        try:
            self.until(lambda: client.wait(1, 500) >= 1, 20, f"the replica of port {port} caught up")
        finally:
            client.close()

    def promoted(self, old: int) -> int:
        return int(self.until(lambda: (p := self.primary_port()) not in (None, old) and p, 30, "Sentinel promoted"))

    def rejoin(self, old: RedisServer, primary: int) -> None:
        """Start a killed primary again as the new one's replica, and wait until Sentinel counts it."""
        old.args = ("--appendonly", "no", "--replicaof", "127.0.0.1", str(primary))
        old.start()
        self.synced(primary)
        self.until(self.settled, 30, "the old primary is a healthy replica again")

    def raw(self, port: int) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=port, decode_responses=True)


@pytest.fixture(scope="module")
def sentinels(tmp_path_factory: pytest.TempPathFactory, redis_binaries: None) -> Iterator[SentinelSet]:
    servers = SentinelSet(tmp_path_factory.mktemp("sentinel"))
    try:
        servers.start()
        yield servers
    finally:
        servers.stop()


class Namespace:
    def __init__(self, url: str) -> None:
        self.url = url

    def make(self) -> RedisBackend:
        return RedisBackend(url=self.url)

    async def cleanup(self) -> None:
        backend = self.make()
        client = backend._redis()
        try:
            async for key in client.scan_iter(match=f"{backend.prefix}*", count=1000):
                await client.delete(key)
        finally:
            await backend.close()


class TestRedisSentinelConformance(ClaimTests, LeaseTests):
    """The suite's claim and lease parts through the Sentinel URL, with the default options."""

    @pytest.fixture
    async def backend_factory(self, sentinels: SentinelSet) -> AsyncIterator[BackendFactory]:
        namespace = Namespace(sentinels.url(f"t:sent:{uuid.uuid4().hex[:10]}:"))
        try:
            yield namespace.make
        finally:
            await namespace.cleanup()


async def test_start_claims_and_closes_through_the_sentinels(sentinels: SentinelSet, make_job, claim) -> None:
    prefix = f"t:sent:{uuid.uuid4().hex[:8]}:"
    backend = RedisBackend(url=sentinels.url(prefix))
    await backend.start()
    try:
        (won,) = await backend.claim([claim(make_job("one"), 1000, "a")])
        assert won.outcome is Outcome.WON
        primary = sentinels.primary_port()
        assert primary is not None
        raw = sentinels.raw(primary)
        try:
            assert raw.exists(f"{prefix}{{one}}:runs")  # written on the primary the Sentinels name
        finally:
            raw.close()
        client = backend._redis()
        pools = [s.connection_pool for s in client.connection_pool.sentinel_manager.sentinels]
        links = [c for p in pools for c in [*p._available_connections, *p._in_use_connections]]
        assert any(c.is_connected for c in links)  # the primary was found by asking a Sentinel
    finally:
        await backend.close()
    assert not any(c.is_connected for c in links), "closing the backend left connections to the Sentinels open"


# -- failovers -----------------------------------------------------------------------------------


async def test_after_a_switch_over_claims_go_to_the_new_primary_and_a_replicated_grant_holds(
    sentinels: SentinelSet, make_job, claim
) -> None:
    """``SENTINEL FAILOVER``, then the old primary demoted at once: its ``READONLY`` moves the client over."""
    prefix = f"t:sent:{uuid.uuid4().hex[:8]}:"
    job, moved = make_job("switch"), make_job("moved")
    a, b = RedisBackend(url=sentinels.url(prefix)), RedisBackend(url=sentinels.url(prefix))
    await a.start()
    await b.start()
    try:
        old = sentinels.primary_port()
        assert old is not None
        (first,) = await a.claim([claim(job, 1000, "a")])
        assert first.outcome is Outcome.WON  # WAIT saw it on the replica
        client = sentinels._sentinel(sentinels.sentinel_ports[0])
        try:
            client.execute_command("SENTINEL", "FAILOVER", SERVICE)
        finally:
            client.close()
        new = sentinels.promoted(old)
        demote = sentinels.raw(old)
        try:  # what Sentinel does seconds later; a's connection is still on it
            demote.execute_command("REPLICAOF", "127.0.0.1", str(new))
        finally:
            demote.close()
        (again,) = await b.claim([claim(job, 1000, "b")])
        assert again.outcome is Outcome.LOST, "the promoted replica granted a slot WAIT had confirmed"

        async def granted_on_the_new_primary() -> bool:
            try:
                (result,) = await a.claim([claim(moved, 2000, "a", token="moved-a")])  # retried as itself
            except redis.ConnectionError as exc:  # READONLY: the connection is closed, the next one asks Sentinel
                refused.append(str(exc))
                return False
            assert result.outcome in (Outcome.WON, Outcome.UNKNOWN), result
            return result.outcome is Outcome.WON

        refused: list[str] = []
        await eventually(granted_on_the_new_primary, 15, what="a claim through the demoted primary's client won")
        assert all("previous master is now a slave" in r for r in refused), refused
        raw = sentinels.raw(new)
        try:
            assert raw.hexists(f"{prefix}{{moved}}:runs", "2000")
        finally:
            raw.close()
        sentinels.until(sentinels.settled, 30, "the old primary is the new one's replica")
    finally:
        await a.close()
        await b.close()


@pytest.mark.slow
async def test_a_fleet_runs_no_slot_twice_across_a_sentinel_failover(sentinels: SentinelSet) -> None:
    """Three schedulers, default options; the primary is killed and Sentinel promotes the replica."""
    prefix = f"t:sent-fleet:{uuid.uuid4().hex[:8]}:"
    url = sentinels.url(prefix)
    jobs = [f"tick{i}" for i in range(4)]
    ran: list[tuple[str, int, str]] = []
    schedulers = []
    for n in range(3):
        scheduler = Scheduler(RedisBackend(url=url), instance_id=f"s-{n}")
        for name in jobs:
            scheduler.add(name, "* * * * * *", lambda ctx, name=name, n=n: ran.append((name, ctx.slot_ms, f"s-{n}")))
        schedulers.append(scheduler)

    def slots_after(after_ms: int) -> dict[str, int]:
        return {name: sum(1 for j, slot, _ in ran if j == name and slot > after_ms) for name in jobs}

    old = sentinels.primary_port()
    assert old is not None
    await asyncio.gather(*(s.start() for s in schedulers))
    try:
        began = time.time_ns() // 1_000_000
        await eventually(lambda: min(slots_after(began).values()) >= 2, 15, what="every job ran before the failover")
        killed = time.time_ns() // 1_000_000
        sentinels.node(old).stop(kill=True)
        new = await asyncio.to_thread(sentinels.promoted, old)
        promoted = time.time_ns() // 1_000_000
        await eventually(
            lambda: min(slots_after(promoted).values()) >= 3, 15, what="every job ran 3 slots on the new primary"
        )
        resumed = min(min(s for j, s, _ in ran if j == name and s > promoted) for name in jobs)
        await asyncio.to_thread(sentinels.rejoin, sentinels.node(old), new)  # a replica again: claims wait for it
        rejoined = time.time_ns() // 1_000_000
        await eventually(lambda: min(slots_after(rejoined).values()) >= 2, 15, what="jobs run with the replica back")
    finally:
        await asyncio.gather(*(s.stop() for s in schedulers))
    twice = {k: n for k, n in Counter((j, s) for j, s, _ in ran).items() if n > 1}
    assert not twice, f"slots run twice across the failover: {twice}"
    assert resumed - promoted < 10_000, "slots after the promotion did not run within 10 s"
    assert killed > began
    reader = RedisBackend(url=url)
    await reader.start()
    try:
        for name in jobs:  # the history on the new primary: each slot run after the promotion, by its runner
            recorded = {r.slot_ms: r.instance for r in await reader.history(name, limit=500)}
            late = [(s, i) for j, s, i in ran if j == name and promoted + 1000 < s < rejoined]
            assert late and all(recorded.get(s) == i for s, i in late), (name, late, recorded)
    finally:
        await Namespace(url).cleanup()
        await reader.close()
