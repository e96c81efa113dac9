"""anarchon-nats: the NATS JetStream backend for anarchon (claim only)."""

from __future__ import annotations

from ._stream import StreamConflictError
from .backend import NatsBackend

__all__ = ["NatsBackend", "StreamConflictError"]
