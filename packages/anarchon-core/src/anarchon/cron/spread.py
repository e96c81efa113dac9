"""Jenkins' ``H``: a field value chosen by a stable hash of the job's name, to spread jobs without randomness.

Ten thousand ``0 * * * *`` jobs all fire at :00; ``H * * * *`` gives each job
its own minute, the same on every instance and after every restart, because
the value is derived from the job name alone. The hash is SHA-256 of the
name and the field's name (never Python's ``hash()``, which is salted per
process), so ``H H * * *`` picks an independent minute and hour, and every
``H`` of one field uses the same offset (``H(0-29),H(30-59)`` runs twice an
hour, 30 minutes apart).

The forms, as Jenkins writes them:

- ``H``: one value of the field; in the day-of-month field one of 1-28 (every
  month has those), in the day-of-week field one of 0-6;
- ``H(a-b)``: one value of ``a``-``b``;
- ``H/step`` and ``H(a-b)/step``: every ``step`` from a hashed start among the
  first ``step`` values of the range.

What cannot work is refused by :func:`hashed`: a day-of-month range past 28
(the job would skip the months without that day), a step longer than the
range, ``H`` mixed with ``L``, ``W`` or ``#``, and ``H`` without a job name.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable

__all__ = ["HASH_FORMS", "hashed", "mentions_hash", "name_hash"]

HASH_FORMS = "H, H/step, H(a-b) or H(a-b)/step"
_TOKEN = r"[0-9]+|[A-Za-z]+"  # noqa: S105 - a number or a name, no secret
_HASHED = re.compile(rf"H(?:\(({_TOKEN})-({_TOKEN})\))?(?:/([0-9]+))?", re.ASCII | re.IGNORECASE)
_MENTION = re.compile(r"(?<![A-Za-z])H(?![A-Za-z])", re.ASCII | re.IGNORECASE)
#: The largest day of month that every month has.
SAFE_DAY = 28


def name_hash(name: str, field: str) -> int:
    """A 64-bit hash of the job name and the field, the same in every process and on every machine."""
    digest = hashlib.sha256(f"{name}\x00{field}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def mentions_hash(cron: str) -> bool:
    """Whether ``cron`` may hold an ``H`` element (so its slots depend on the job name); ``THU`` does not."""
    return _MENTION.search(cron) is not None


def hashed(
    element: str,
    field: str,
    bounds: tuple[int, int],
    value: Callable[[str], int],
    name: str | None,
    error: Callable[[str], Exception],
) -> range | None:
    """The values of an ``H`` element, or None when ``element`` is not one.

    ``bounds`` are the field's (low, high), ``value`` reads a number or name of
    the field, ``error`` makes the field's exception from a reason.
    """
    if element[:1] not in ("H", "h"):
        return None
    match = _HASHED.fullmatch(element)
    if match is None:
        raise error(f"{element!r} is not understood; an H element is written {HASH_FORMS} (no L, W or #)")
    if name is None:
        raise error(
            f"{element!r}: H picks a value from the job's name, and this schedule has none; "
            "add the job with Scheduler.add(), or pass Schedule(..., name='the-job')"
        )
    first, last, step_text = match.groups()
    low, high = bounds
    if first is not None:
        low, high = value(first), value(last)
        if high < low:
            raise error(f"the range in {element!r} wraps around; H(a-b) needs a <= b")
        if field == "day-of-month" and high > SAFE_DAY:
            raise error(
                f"{element!r} could pick day {high}, which some months lack, and the job would not run in "
                f"them; keep the range within 1-{SAFE_DAY} (bare H does), or use L for the last day"
            )
    elif field == "day-of-month":
        high = SAFE_DAY
    elif field == "day-of-week":
        high = 6  # 7 is Sunday again: 0-6 keeps the seven days equally likely
    span = high - low + 1
    offset = name_hash(name, field)
    if step_text is None:
        return range(low + offset % span, low + offset % span + 1)
    step = int(step_text)
    if step == 0:
        raise error(f"the step in {element!r} is 0; a step is 1 or more")
    if step >= span:
        raise error(
            f"the step {step} in {element!r} is not shorter than its range {low}-{high} ({span} values), so "
            f"H would name one value; write {element.split('/')[0]} for one hashed value"
        )
    return range(low + offset % step, high + 1, step)
