"""Redis backend for anarchon: leases in atomic Lua scripts, on Redis and Redis Cluster."""

from __future__ import annotations

from .backend import RedisBackend

__all__ = ["RedisBackend"]
