"""What a crash of the cluster node holding the heartbeat key costs: every instance beats into it.

``python benchmarks/redis_heartbeat_node_down.py`` starts a Redis Cluster of 3
primaries and 3 replicas (``cluster-node-timeout`` 5000) on free ports and 3
instance processes with 30 every-second jobs (``jitter_ms=0``), kills with
``-9`` the primary that holds ``<prefix>instances`` after 6 s, lets the
replica take over, stops the fleet 25 s later, and reconciles the slots of
the jobs whose keys live on the *other* primaries (which never failed):
slots missed there are the heartbeat's doing.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import redis
from redis.cluster import RedisCluster

sys.path.insert(0, str(Path(__file__).parent))
from redis_kill9 import _cluster_port, _server

from anarchon_conformance.fleet import Fleet


def main(root: Path) -> None:
    ports = [_cluster_port() for _ in range(6)]
    opts = ("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--appendonly", "no",
            "--cluster-node-timeout", "5000")  # fmt: skip
    procs = {p: _server(p, root / f"n{p}", *opts) for p in ports}
    try:
        create = ["redis-cli", "--cluster", "create", *(f"127.0.0.1:{p}" for p in ports), "--cluster-replicas", "1"]
        subprocess.run([*create, "--cluster-yes"], check=True, capture_output=True, timeout=60)
        for p in ports:
            while redis.Redis(port=p).cluster("INFO").get("cluster_state") != "ok":
                time.sleep(0.1)
        time.sleep(2)
        prefix = f"nd:{uuid.uuid4().hex[:8]}:"
        rc = RedisCluster(host="127.0.0.1", port=ports[0])
        node = rc.get_node_from_key(f"{prefix}instances")
        victim = int(node.port)
        jobs = 30
        healthy = {f"job-{i:02d}" for i in range(jobs)
                   if int(rc.get_node_from_key(f"{prefix}{{job-{i:02d}}}:state").port) != victim}  # fmt: skip
        rc.close()
        kwargs = {"url": f"redis://127.0.0.1:{ports[0]}/0?cluster=true", "prefix": prefix}
        with Fleet(root / "fleet", backend_class="anarchon_redis:RedisBackend", backend_kwargs=kwargs,
                   instances=3, jobs=jobs, options={"jitter_ms": 0}) as f:  # fmt: skip
            f.start()
            time.sleep(6)
            killed = time.time()
            procs[victim].send_signal(signal.SIGKILL)
            procs[victim].wait()
            print(f"killed primary {victim} (holds {prefix}instances); {len(healthy)} of {jobs} jobs live elsewhere")
            time.sleep(25)
            f.stop()
            report = f.report(since_ms=int(killed * 1000) - 3000)
            ledger = f.ledger()
        lost = [r for r in report.missed_slots if r[0] in healthy]
        stale = [r for r in ledger if r["e"] == "lost" and r.get("job") in healthy]
        print(report.summary())
        print(f"slots missed on the healthy primaries: {len(lost)}; 'lost' events there: {len(stale)}")
        if lost:
            slots = sorted({s for _, s in lost})
            print(f"  from {(slots[0] / 1000 - killed):.1f} s to {(slots[-1] / 1000 - killed):.1f} s after the kill")
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.terminate()
                p.wait()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        main(Path(tmp))
