"""RabbitMQ backend for anarchon: claim-only, per-run gate queues with publisher confirms."""

from __future__ import annotations

from .backend import ForeignQueueError, RabbitMQBackend

__all__ = ["ForeignQueueError", "RabbitMQBackend"]
