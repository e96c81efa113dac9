"""What a ``406 PRECONDITION_FAILED`` says about a queue that exists with other arguments.

RabbitMQ answers a declare whose arguments differ from the existing queue's
with the first argument that differs and its current value::

    inequivalent arg 'x-expires' for queue 'q' in vhost '/': received '300000' but current is '60000'
    inequivalent arg 'x-max-length' ... received the value '1' of type 'byte' but current is none

It checks ``x-expires`` before ``x-max-length``, ``x-max-length-bytes`` and
``x-overflow``, and those before ``x-queue-type``. So a declare can adopt the
current value of an argument that may differ between instances (a gate's
``x-expires`` from another ``slot_ttl_ms``, a stream's sizes from another
``history_size``, as the seed allows) and declare again: the next answer
names the next difference, and the one that may not differ is refused. A
queue is used only once a declare with its full, checked arguments succeeds,
never through a passive declare that would accept any queue of that name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Difference", "difference"]

_PATTERN = re.compile(
    r"inequivalent arg '(?P<arg>[^']+)' for queue .*?: received .*? but current is "
    r"(?:none|(?:the value )?'(?P<current>[^']*)')"
)


@dataclass(frozen=True)
class Difference:
    argument: str
    #: The existing queue's value as RabbitMQ printed it; ``None`` when the queue has none.
    current: str | None

    def integer(self) -> int | None:
        """The current value as an integer, or ``None`` when there is none or it is not one."""
        if self.current is None or not re.fullmatch(r"-?[0-9]{1,19}", self.current):
            return None
        return int(self.current)


def difference(exc: BaseException) -> Difference | None:
    """The argument a 406 names, or ``None`` when its text is not the one above."""
    match = _PATTERN.search(" ".join(str(a) for a in getattr(exc, "args", ())) or str(exc))
    if match is None:
        return None
    return Difference(match["arg"], match["current"])
