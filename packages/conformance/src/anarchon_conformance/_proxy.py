"""A loopback TCP proxy between a backend and its server, whose link a test can break in the ways networks do.

One class for every fault test of the repository (a backend's own, the fault
suite's seats) and for a third party's: pass the server's address, point the
backend at ``127.0.0.1:proxy.port``, then steer. Each direction has a mode:

``pass``
    bytes flow as they come.
``hold``
    bytes stop in the proxy (the kernel buffers behind them) until the mode
    changes. Holding only ``down`` (server to client) lets a request through
    and keeps its answer: the lost-answer case.
``slow``
    each chunk waits ``delay_ms`` before it is forwarded.
``silence``
    bytes vanish and new connections wait, and nobody is told: a partition
    as both ends see it. :meth:`restore` then aborts the connections that
    lived through it, as TCP would have broken them.
``drop``
    every open connection is aborted (RST), and new ones as soon as they are
    accepted, until the mode changes.

:meth:`hold_answers_after` arms a hold of ``down`` that starts with the next
``up`` chunk (one holding a given pattern, if asked): that request reaches
the server, its answer does not. A subclass sees and may edit every chunk
(:meth:`upstream_chunk`, :meth:`downstream_chunk`) with per-connection state
(:class:`Link`), to act on a protocol's frames.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Direction", "FaultProxy", "Link", "Mode"]

Mode = Literal["pass", "hold", "slow", "silence", "drop"]
#: ``up``: client to server; ``down``: server to client.
Direction = Literal["both", "up", "down"]
CHUNK = 65_536


@dataclass(eq=False)
class Link:
    """One proxied connection: its two ends, and room for a subclass's state (``state``)."""

    client: asyncio.StreamWriter
    server: asyncio.StreamWriter
    state: dict[str, Any] = field(default_factory=dict)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def abort(self) -> None:
        for writer in (self.client, self.server):
            transport = writer.transport
            with contextlib.suppress(Exception):
                sock = transport.get_extra_info("socket")
                if sock is not None:  # RST, as a cut cable or a firewall reset would look
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            transport.abort()
        for task in self.tasks:
            task.cancel()


class FaultProxy:
    """Listens on a free port of 127.0.0.1 and forwards to ``host:port``; see the module for the modes."""

    def __init__(self, host: str, port: int, *, ssl: Any = None, on_held: Callable[[], None] | None = None) -> None:
        self.target = (host, port)
        self.ssl = ssl
        self.port = 0
        #: Connections accepted, and those that reached the server.
        self.accepted = 0
        self.connections = 0
        self._on_held = on_held
        self._server: asyncio.Server | None = None
        self._links: set[Link] = set()
        self._mode: dict[str, Mode] = {"up": "pass", "down": "pass"}
        self._delay_s = 0.0
        self._changed = asyncio.Event()
        self._trigger: bytes | None = None

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0, ssl=self.ssl)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        self.cut()
        self._set("pass", "both")

    @property
    def mode(self) -> dict[str, Mode]:
        return dict(self._mode)

    # -- steering -----------------------------------------------------------------

    def set(self, mode: Mode, direction: Direction = "both", delay_ms: int = 0) -> None:
        """Put ``direction`` in ``mode`` (``drop`` also aborts what is open)."""
        self._set(mode, direction, delay_ms)
        if mode == "drop":
            self.cut()

    def silence(self) -> None:
        """Both directions ``silence``: a partition nobody is told of."""
        self.set("silence")

    def restore(self) -> None:
        """Everything passes again; connections that lived through a silence or a hold are aborted."""
        if any(mode in ("silence", "hold") for mode in self._mode.values()):
            self.cut()
        self.set("pass")

    def cut(self) -> None:
        """Abort every open connection once (RST); the mode stays."""
        for link in list(self._links):
            link.abort()
        self._links.clear()

    def hold_answers_after(self, pattern: bytes = b"") -> None:
        """Hold ``down`` from the next ``up`` chunk containing ``pattern`` (any chunk, if empty).

        The mode changes before that chunk is forwarded, so the request is sure
        to reach the server while its answer is sure to be held.
        """
        self._trigger = pattern

    # -- for subclasses -------------------------------------------------------------

    def accepted_client(self, writer: asyncio.StreamWriter) -> None:
        """A client connected (its TLS, if the proxy terminates it, is in ``writer.get_extra_info``)."""

    def upstream_chunk(self, link: Link, data: bytes) -> bytes:
        """A client-to-server chunk about to be forwarded; return what to forward."""
        return data

    def downstream_chunk(self, link: Link, data: bytes) -> bytes:
        """A server-to-client chunk about to be forwarded; return what to forward."""
        return data

    # -- the loop side ----------------------------------------------------------------

    def _set(self, mode: Mode, direction: Direction, delay_ms: int = 0) -> None:
        if mode == "pass":
            self._trigger = None
        for d in ("up", "down") if direction == "both" else (direction,):
            self._mode[d] = mode
        self._delay_s = delay_ms / 1000
        self._changed.set()
        self._changed = asyncio.Event()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        self.accepted_client(writer)
        while "silence" in self._mode.values():  # a new connection waits out the partition
            await self._changed.wait()
        if "drop" in self._mode.values():
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.wait_for(asyncio.open_connection(*self.target), 5)
        except (OSError, asyncio.TimeoutError):
            writer.transport.abort()  # the server is down: the client sees a reset, as it would
            return
        self.connections += 1
        link = Link(writer, up_writer)
        if "drop" in self._mode.values():  # dropped while the server was being reached
            link.abort()
            return
        self._links.add(link)
        link.tasks = [
            asyncio.ensure_future(self._pump(reader, up_writer, "up", link)),
            asyncio.ensure_future(self._pump(up_reader, writer, "down", link)),
        ]

    async def _pump(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, direction: str, link: Link
    ) -> None:
        ended = False
        try:
            while data := await reader.read(CHUNK):
                while self._mode[direction] == "hold":
                    await self._changed.wait()
                mode = self._mode[direction]
                if mode == "drop":
                    break
                if mode == "silence":
                    continue  # bytes vanish
                if direction == "up" and self._trigger is not None and self._trigger in data:
                    self._trigger = None
                    self._set("hold", "down")
                    if self._on_held is not None:
                        self._on_held()
                if mode == "slow" and self._delay_s:
                    await asyncio.sleep(self._delay_s)
                data = self.upstream_chunk(link, data) if direction == "up" else self.downstream_chunk(link, data)
                if data:
                    writer.write(data)
                    await writer.drain()
            ended = True
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            if ended:  # one end closed: the other is closed too, after what was sent (FIN, not RST)
                writer.close()
            else:
                link.abort()
            if all(task.done() or task is asyncio.current_task() for task in link.tasks):
                self._links.discard(link)
