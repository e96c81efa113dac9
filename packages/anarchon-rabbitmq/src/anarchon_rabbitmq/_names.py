"""Queue names and arguments, built only from checked parts.

A job name is checked by the core (``[A-Za-z0-9_-]{1,100}``), the prefix here,
and a slot is an integer, so no name below can carry a character the user did
not agree to. Job names hold no ``.``, so ``<job>.slot.<ms>``,
``<job>.manual.<ms>`` and ``<job>.history`` of different jobs never collide.
"""

from __future__ import annotations

import re

__all__ = ["check_prefix", "check_slot_ttl_ms", "gate_arguments", "gate_queue", "history_queue"]

PREFIX_PATTERN = re.compile(r"[A-Za-z0-9_.:-]{1,100}")

#: RabbitMQ refuses to declare names starting with ``amq.`` (ACCESS_REFUSED).
_RESERVED = "amq."

#: x-expires is an Erlang timer; longer values are refused by the broker.
MAX_SLOT_TTL_MS = 2**32 - 1


def check_prefix(prefix: object) -> str:
    if not isinstance(prefix, str) or not PREFIX_PATTERN.fullmatch(prefix):
        raise ValueError(
            f"prefix={prefix!r} is not allowed: use 1 to 100 letters, digits, '_', '-', '.' or ':' "
            "(it starts every queue name), for example prefix='cron.' or prefix='billing.cron.'"
        )
    if prefix.startswith(_RESERVED) or _RESERVED.startswith(prefix):
        raise ValueError(
            f"prefix={prefix!r} is not allowed: RabbitMQ reserves queue names starting with 'amq.', "
            "and this prefix could form one; choose another, for example prefix='cron.'"
        )
    return prefix


def check_slot_ttl_ms(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SLOT_TTL_MS:
        raise ValueError(
            f"slot_ttl_ms={value!r} must be an integer number of milliseconds between 1 and "
            f"{MAX_SLOT_TTL_MS} (the gate queue's x-expires); for example slot_ttl_ms=300_000 (5 minutes)"
        )
    return value


def gate_queue(prefix: str, job: str, slot_ms: int, *, manual: bool = False) -> str:
    """The gate queue of one run: scheduled slots and manual runs never share one."""
    return f"{prefix}{job}.{'manual' if manual else 'slot'}.{int(slot_ms)}"


def history_queue(prefix: str, job: str) -> str:
    return f"{prefix}{job}.history"


def gate_arguments(slot_ttl_ms: int) -> dict[str, object]:
    """The three arguments of the seed, nothing more: other instances must declare the same."""
    return {"x-max-length": 1, "x-overflow": "reject-publish", "x-expires": slot_ttl_ms}
