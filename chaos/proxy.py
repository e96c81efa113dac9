"""Each instance seat's broker link: the shared fault proxy, steered from the harness thread.

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
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Literal, TypeVar

from anarchon_conformance.testing import FaultProxy

__all__ = ["Direction", "Mode", "Proxy", "ProxyLoop"]

Mode = Literal["pass", "hold", "slow", "drop"]
#: client to broker (``c2b``), broker to client (``b2c``): the shared proxy's ``up`` and ``down``.
Direction = Literal["both", "c2b", "b2c"]
_DIRECTIONS: dict[str, Any] = {"both": "both", "c2b": "up", "b2c": "down"}
T = TypeVar("T")


async def _run(step: Callable[[], T]) -> T:
    return step()


class Proxy:
    """One listening port forwarding to one upstream ``host:port``: a
    :class:`~anarchon_conformance.testing.FaultProxy` on the scenario's :class:`ProxyLoop`."""

    def __init__(self, loop: ProxyLoop, upstream_port: int, upstream_host: str = "127.0.0.1") -> None:
        self._loop = loop
        #: Set when an armed hold (:meth:`hold_answers_after`) began: the request went out, its answer is held.
        self.triggered = threading.Event()
        self._proxy = FaultProxy(upstream_host, upstream_port, on_held=self.triggered.set)
        self.port = 0

    @property
    def upstream(self) -> tuple[str, int]:
        return self._proxy.target

    @upstream.setter
    def upstream(self, target: tuple[str, int]) -> None:
        """Where new connections go (a failover moves the seat to the promoted server)."""
        self._proxy.target = target

    @property
    def accepted(self) -> int:
        return self._proxy.accepted

    @property
    def mode(self) -> dict[str, str]:
        names = {"up": "c2b", "down": "b2c"}
        return {names[d]: m for d, m in self._proxy.mode.items()}

    def start(self) -> int:
        self.port = self._loop.call(self._proxy.start())
        return self.port

    def set(self, mode: Mode, direction: Direction = "both", delay_ms: int = 0) -> None:
        self._loop.call(_run(lambda: self._proxy.set(mode, _DIRECTIONS[direction], delay_ms)))

    def heal(self) -> None:
        self.set("pass")

    def hold_answers_after(self, pattern: bytes = b"") -> None:
        """Hold broker→client from the next client→broker chunk containing ``pattern`` (any, if empty)."""
        self.triggered.clear()
        self._loop.call(_run(lambda: self._proxy.hold_answers_after(pattern)))

    def cut(self) -> None:
        """Abort every open connection once; new ones pass."""
        self._loop.call(_run(self._proxy.cut))

    def close(self) -> None:
        self._loop.call(self._proxy.close())


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
