"""What RabbitMQ promises (``capabilities.guarantees``, see :mod:`anarchon.guarantees`).

The claim tier's promise, from the seed: one instance wins each slot (a gate
queue that holds one message), a run whose instance dies is not run again,
and a gate remembers its winner for ``slot_ttl_ms``. A broker restart forgets
the gates; an instance whose connection dropped does not claim again the
slots due before the drop (``RESTART_MARGIN_MS``), so nothing runs twice as
long as the instances' clocks agree within that. Nothing here is read from
the broker: these follow from the backend's design and its options.
"""

from __future__ import annotations

from typing import ClassVar

from anarchon.backend import Finding

__all__ = ["GuaranteesMixin"]


class GuaranteesMixin:
    """``guarantees()`` for :class:`~anarchon_rabbitmq.RabbitMQBackend`."""

    slot_ttl_ms: int
    restart_margin_ms: ClassVar[int]

    async def guarantees(self) -> list[Finding]:
        return [
            Finding(
                "tier",
                True,
                "claim only: one instance wins each slot; a run whose instance dies is not run again and no "
                "missed slot is caught up (use Redis, PostgreSQL or SQLite for take-over and catch-up)",
            ),
            Finding(
                "memory",
                True,
                f"a gate queue remembers a slot's winner for slot_ttl_ms ({self.slot_ttl_ms} ms), longer than "
                "any job's jitter_ms + max_late_ms (checked when a job is added)",
            ),
            Finding(
                "restart",
                True,
                "a broker restart forgets the gates; an instance does not claim again the slots due before its "
                f"connection dropped, so nothing runs twice while the instances' clocks agree within "
                f"{self.restart_margin_ms} ms",
            ),
        ]
