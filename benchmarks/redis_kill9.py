"""How long after ``kill -9`` a dead instance's run is taken over on Redis, with the default options.

``python benchmarks/redis_kill9.py [single|cluster] [KILLS]`` starts its own
``redis-server`` (or a three-node Redis Cluster) on free ports, then a fleet
of 3 instance processes (the conformance fleet harness) with 50 every-second
jobs (``jitter_ms=0``) and a job that runs 3 s every 5 s, all with the default
``lease_ms`` (30 s). ``KILLS`` times (default 3) it kills with ``-9`` the
instance that starts the slow job, waits until another instance runs that
slot again, prints the delay and starts a replacement; at the end it
reconciles the ledger (slots missed, run twice, skipped for overlap).
"""

from __future__ import annotations

import random
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import redis

from anarchon_conformance import free_port
from anarchon_conformance.fleet import Fleet

MODE = sys.argv[1] if len(sys.argv) > 1 else "single"
KILLS = int(sys.argv[2]) if len(sys.argv) > 2 else 3


def _server(port: int, directory: Path | str, *extra: str) -> subprocess.Popen[bytes]:
    """A private redis-server on ``port`` (the other Redis benchmarks start theirs with it too)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(directory), "--save", "", *extra]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis(port=port)
    for _ in range(200):
        try:
            client.ping()
            return proc
        except redis.RedisError:
            time.sleep(0.05)
    raise RuntimeError(f"redis-server on {port} did not start")


def _cluster_port() -> int:
    """A free port whose cluster bus port (port + 10000) is free too."""
    while True:
        port = random.randint(20_000, 40_000)
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port + 10_000))
        except OSError:
            continue
        return port


def _servers(root: Path) -> tuple[list[subprocess.Popen[bytes]], str]:
    if MODE == "single":
        port = free_port()
        return [_server(port, root / "single")], f"redis://127.0.0.1:{port}/0"
    ports = [_cluster_port() for _ in range(3)]
    cluster = ("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--appendonly", "no")
    procs = [_server(p, root / f"node{i}", *cluster) for i, p in enumerate(ports)]
    create = ["redis-cli", "--cluster", "create", *(f"127.0.0.1:{p}" for p in ports), "--cluster-replicas", "0"]
    subprocess.run([*create, "--cluster-yes"], check=True, capture_output=True, timeout=60)
    for p in ports:
        while redis.Redis(port=p).cluster("INFO").get("cluster_state") != "ok":
            time.sleep(0.1)
    return procs, f"redis://127.0.0.1:{ports[0]}/0?cluster=true"


def _slow_start(r: dict[str, object]) -> bool:
    return r["e"] == "start" and r.get("job") == "job-slow"


def main(root: Path, url: str) -> None:
    kwargs = {"url": url, "prefix": f"k9:{uuid.uuid4().hex[:8]}:"}
    backend = {"backend_class": "anarchon_redis:RedisBackend", "backend_kwargs": kwargs}
    with Fleet(
        root / "fleet",
        **backend,
        instances=3,
        jobs=50,
        options={"jitter_ms": 0},
        slow_cron="*/5 * * * * *",
        slow_seconds=3,
        slow_options={"jitter_ms": 0},
    ) as f:
        f.start()
        time.sleep(2)
        took = []
        first_slot = None
        after = 0
        for _ in range(KILLS):
            first = f.wait_for(lambda r, a=after: _slow_start(r) and r["slot"] > a and r["attempt"] == 1, 60)
            killed_at = f.kill(f.member(first["instance"]))
            second = f.wait_for(lambda r, s=first["slot"]: _slow_start(r) and r["slot"] == s and r["attempt"] > 1, 60)
            first_slot = first_slot or first["slot"]
            took.append(second["t"] - killed_at)
            print(f"{MODE}: slot {first['slot']} of job-slow taken over {took[-1]} ms after kill -9", flush=True)
            f.restart()
            after = first["slot"]
        time.sleep(3)
        f.stop()
        report = f.report(since_ms=first_slot)
    print(f"{MODE}: take-over after kill -9: {sorted(took)} ms; {report.summary()}")
    if report.missed:
        print(f"missed: {report.missed_slots}")
    for row in report.rows:
        if len(row.runs) > 1 and sum(r[2] == "succeeded" for r in row.runs) > 1:
            print(f"  ended twice (the first owner's finish was lost to the kill): {row.job}@{row.slot_ms} {row.runs}")
            break


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        procs, url = _servers(Path(tmp))
        try:
            main(Path(tmp), url)
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait()
