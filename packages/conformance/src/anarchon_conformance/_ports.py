"""Free ports on loopback for the private servers a test starts."""

from __future__ import annotations

import random
import socket

__all__ = ["free_port"]

#: Below Linux's ephemeral range (32768-60999), where no client's own port lands.
_LOW, _HIGH = 12_000, 32_000
_handed_out: set[int] = set()


def free_port(avoid: set[int] | None = None) -> int:
    """A port free now on 127.0.0.1, never one this process handed out before.

    Port 0 is the usual answer, and it is wrong here: a server binds only
    later, so two servers of one cluster were once given the same port, and an
    ephemeral port can meanwhile become some client's own.
    """
    for _ in range(1000):
        port = random.randint(_LOW, _HIGH)
        if port in _handed_out or (avoid and port in avoid):
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise RuntimeError(f"no free port between {_LOW} and {_HIGH} on 127.0.0.1")
