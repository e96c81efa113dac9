"""A fault-suite broker (``chaos.brokers``) of the benchmark's own, in a temporary directory, for one run.

The targets that measure on a private server (``rabbitmq``, ``postgres_private``,
and each backend's private targets) start and stop it alike; only which broker, and how a backend
reaches it, differ.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["PrivateServer"]


class PrivateServer:
    """Starts ``make(workdir)`` (a ``chaos.brokers.Broker``) in a fresh directory; ``stop()`` removes both."""

    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self.broker: Any = None
        self._workdir: Path | None = None

    async def start(self, make: Callable[[Path], Any]) -> Any:
        self._workdir = Path(tempfile.mkdtemp(prefix=self._prefix))
        self._workdir.chmod(0o755)  # PostgreSQL and RabbitMQ run as their own users when we are root
        self.broker = make(self._workdir)
        await asyncio.to_thread(self.broker.start)
        return self.broker

    async def stop(self) -> bool:
        """Stop the broker and remove its directory; ``True`` if one was running."""
        running = self.broker is not None
        if running:
            await asyncio.to_thread(self.broker.stop)
            self.broker = None
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None
        return running
