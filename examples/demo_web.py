"""The demo fleet, left running, and its dashboard: every slot, who ran it, and the take-over.

Three instance processes share a new SQLite file (four every-second jobs and
``job-slow``, every 5 s taking 3 s), as in ``make demo``. The instance that
first runs ``job-slow`` is killed with SIGKILL; another takes that run over.
Meanwhile the dashboard of this fleet is served, and its address printed.
Ctrl-C stops the fleet and the dashboard.

    make demo-web        # or: .venv/bin/python examples/demo_web.py --port 8000 [--seconds 120]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import uvicorn

import anarchon_web
from anarchon import Scheduler
from anarchon_conformance.fleet import Fleet

JOBS = 4
OPTIONS = {"jitter_ms": 200, "lease_ms": 1500}


def dashboard_of(url: str, fleet: Fleet) -> Scheduler:
    """A scheduler holding the fleet's jobs (never started): the dashboard reads its backend."""
    scheduler = Scheduler(url)
    for name in fleet.job_names():
        cron = fleet.slow_cron if name.endswith("slow") and fleet.slow_cron else fleet.cron
        scheduler.add(name, cron, lambda: None, **OPTIONS)
    return scheduler


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--seconds", type=float, default=0, help="stop after this long (default: at Ctrl-C)")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="anarchon-demo-web-"))
    url = f"sqlite:///{workdir / 'demo.sqlite3'}"
    with Fleet(workdir, backend=url, instances=3, jobs=JOBS, options=OPTIONS, slow_cron="*/5 * * * * *",
               slow_seconds=3.0) as fleet:  # fmt: skip
        fleet.start()
        print(f"anarchon demo-web: 3 instances share {url}")
        app = anarchon_web.app(dashboard_of(url, fleet), title="demo fleet", open_backend=True, backend_url=url)
        server = uvicorn.Server(uvicorn.Config(app, host=args.host, port=args.port, log_level="warning"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        while not server.started:
            if not thread.is_alive():
                print(f"the dashboard could not listen on {args.host}:{args.port}; pick another --port")
                return 1
            time.sleep(0.05)
        print(f"dashboard: http://{args.host}:{args.port}/")
        first = fleet.wait_for(lambda r: r["e"] == "start" and r["job"] == "job-slow", timeout=30)
        fleet.kill(fleet.member(first["instance"]))
        print(f"  killed {first['instance']} with SIGKILL while it ran job-slow; watch its slot turn 'taken over'")
        print("  Ctrl-C to stop")
        try:
            deadline = time.monotonic() + args.seconds if args.seconds else None
            while deadline is None or time.monotonic() < deadline:
                time.sleep(0.2)
        except KeyboardInterrupt:
            pass
        server.should_exit = True
        fleet.stop()
        thread.join(10)
    shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
