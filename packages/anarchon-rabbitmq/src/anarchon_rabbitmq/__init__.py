"""RabbitMQ backend for anarchon: claim-only, per-run gate queues with publisher confirms."""

from __future__ import annotations

from .backend import RabbitMQBackend

__all__ = ["RabbitMQBackend"]
