"""A TCP proxy on loopback that cuts, holds and slows one instance's broker link.

Each instance seat talks to its broker through its own :class:`Proxy`, so a
fault reaches exactly the instance it is aimed at. Modes act per direction:

``pass``   bytes flow as they come;
``hold``   bytes stop in the proxy (the kernel buffers behind them) until the
           mode changes; holding only broker→client keeps a claim's publish
           flowing and its confirm back, which is the lost-answer case;
``slow``   each chunk waits ``delay_ms`` before it is forwarded;
``drop``   every open connection is aborted (RST), and new ones are aborted as
           soon as they are accepted, until the mode changes.

:meth:`Proxy.hold_answers_after` arms a hold of broker→client that starts with
the next client→broker chunk (one carrying a given pattern, if asked): that
request reaches the broker, its answer does not — a claim published and not
confirmed, a renewal applied and not acknowledged.

The proxies of a scenario share one event loop in a daemon thread, so the
synchronous harness steers them with plain method calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

__all__ = ["Direction", "Mode", "Proxy", "ProxyLoop"]

Mode = Literal["pass", "hold", "slow", "drop"]
Direction = Literal["both", "c2b", "b2c"]
T = TypeVar("T")

CHUNK = 65_536


@dataclass(eq=False)
class _Link:
    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def abort(self) -> None:
        for writer in (self.client, self.upstream):
            transport = writer.transport
            with contextlib.suppress(Exception):
                sock = transport.get_extra_info("socket")
                if sock is not None:  # RST, as a cut cable or a firewall reset would look
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            transport.abort()
        for task in self.tasks:
            task.cancel()


class Proxy:
    """One listening port forwarding to one upstream ``host:port``."""

    def __init__(self, loop: ProxyLoop, upstream_port: int, upstream_host: str = "127.0.0.1") -> None:
        self._loop = loop
        self.upstream = (upstream_host, upstream_port)
        self.port = 0
        self._server: asyncio.Server | None = None
        self._links: set[_Link] = set()
        self._mode: dict[str, Mode] = {"c2b": "pass", "b2c": "pass"}
        self._delay_s = 0.0
        self._changed: asyncio.Event | None = None
        self._trigger: bytes | None = None
        self.triggered = threading.Event()
        self.accepted = 0

    # -- control, from the harness thread -------------------------------------------

    def start(self) -> int:
        self.port = self._loop.call(self._start())
        return self.port

    def set(self, mode: Mode, direction: Direction = "both", delay_ms: int = 0) -> None:
        self._loop.call(self._set(mode, direction, delay_ms))

    def heal(self) -> None:
        self.set("pass")

    def hold_answers_after(self, pattern: bytes = b"") -> None:
        """Hold broker→client from the next client→broker chunk containing ``pattern`` (any, if empty).

        The mode changes before that chunk is forwarded, so the request is
        sure to reach the broker while its answer is sure to be held.
        """
        self.triggered.clear()
        self._loop.call(self._arm(pattern))

    def cut(self) -> None:
        """Abort every open connection once; new ones pass."""
        self._loop.call(self._cut())

    def close(self) -> None:
        self._loop.call(self._close())

    @property
    def mode(self) -> dict[str, Mode]:
        return dict(self._mode)

    # -- the loop side ------------------------------------------------------------------

    async def _start(self) -> int:
        self._changed = asyncio.Event()
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return int(self._server.sockets[0].getsockname()[1])

    async def _set(self, mode: Mode, direction: Direction, delay_ms: int) -> None:
        if mode == "pass":
            self._trigger = None
        for d in ("c2b", "b2c") if direction == "both" else (direction,):
            self._mode[d] = mode
        self._delay_s = delay_ms / 1000
        if mode == "drop":
            await self._cut()
        assert self._changed is not None
        self._changed.set()
        self._changed = asyncio.Event()

    async def _arm(self, pattern: bytes) -> None:
        self._trigger = pattern

    async def _cut(self) -> None:
        for link in list(self._links):
            link.abort()
        self._links.clear()

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        await self._cut()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        if "drop" in self._mode.values():
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.wait_for(asyncio.open_connection(*self.upstream), 5)
        except (OSError, asyncio.TimeoutError):
            writer.transport.abort()  # the broker is down: the client sees a reset, as it would
            return
        link = _Link(writer, up_writer)
        self._links.add(link)
        link.tasks = [
            asyncio.ensure_future(self._pump(reader, up_writer, "c2b", link)),
            asyncio.ensure_future(self._pump(up_reader, writer, "b2c", link)),
        ]

    async def _pump(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, direction: str, link: _Link
    ) -> None:
        try:
            while True:
                data = await reader.read(CHUNK)
                if not data:
                    break
                while self._mode[direction] == "hold":
                    assert self._changed is not None
                    await self._changed.wait()
                if self._mode[direction] == "drop":
                    break
                if direction == "c2b" and self._trigger is not None and self._trigger in data:
                    self._trigger = None
                    await self._set("hold", "b2c", 0)
                    self.triggered.set()
                if self._mode[direction] == "slow" and self._delay_s:
                    await asyncio.sleep(self._delay_s)
                writer.write(data)
                await writer.drain()
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            link.abort()
            self._links.discard(link)


class ProxyLoop:
    """An event loop in a daemon thread that runs every proxy of a scenario."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="chaos-proxy", daemon=True)
        self._thread.start()

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 10.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def proxy(self, upstream_port: int) -> Proxy:
        p = Proxy(self, upstream_port)
        p.start()
        return p

    def close(self) -> None:
        async def _cancel_all() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        with contextlib.suppress(Exception):
            self.call(_cancel_all())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self.loop.close()
