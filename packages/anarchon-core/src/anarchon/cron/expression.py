"""A whole cron expression: aliases, the five or six fields, and cron's two first-character rules.

Classic cron decides two things by the first character of a field, not by
what the field expands to:

- **the day rule**: day-of-month and day-of-week are ANDed when either field
  starts with ``*`` and ORed when both are restricted (``0 0 */2 * 1`` is odd
  Mondays; ``0 0 1,15 * 1`` is the 1st, the 15th and every Monday);
- **the DST rule**: a job is wall-clock unless its minute or hour field starts
  with ``*`` (``0 1-23/2 * * *`` is wall-clock, ``0 */2 * * *`` follows real
  time); :mod:`anarchon.cron.schedule` applies it under the default DST
  policy, ``dst="cron"`` (:mod:`anarchon.cron.dst` has the others).

Six-field expressions put seconds first and keep cron's weekday numbering; a
Quartz expression pasted as it is would silently mean another weekday, so
``?`` is refused and a numbered ``n#k``/``nL`` warns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .fields import DAY, HOUR, MINUTE, MONTH, NUMBERING, SECOND, WEEKDAY, Field, FieldError, parse_field

__all__ = ["HINT", "CronNumberingWarning", "Expression", "parse_expression"]

HINT = (
    "use 5 fields (minute hour day month weekday), 6 with seconds first, @hourly/@daily/@weekly/@monthly/@yearly, "
    "@every 90s (an interval) or @at 2026-12-24T18:00:00+01:00 (one time)"
)

ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

# Cron reads one line; fields are separated by spaces and tabs. Any other
# whitespace or control character inside the expression is refused rather
# than guessed at (a newline usually means two expressions pasted together).
_SEPARATORS = re.compile(r"[ \t]+")
_OTHER_WHITESPACE = re.compile(r"[^\S \t]|[\x00-\x08\x0a-\x1f\x7f]")
_QUARTZ_WEEKDAY = re.compile(r"[0-9](#|L)", re.IGNORECASE)


class CronNumberingWarning(UserWarning):
    """A six-field expression numbers a weekday with ``#`` or ``L``: maybe Quartz's numbering was meant."""


@dataclass(frozen=True)
class Expression:
    """The parsed fields; ``seconds`` is None for five-field expressions (second 0).

    ``warning`` is the text of a :class:`CronNumberingWarning` to give whoever
    uses the expression, or None.
    """

    seconds: Field | None
    minute: Field
    hour: Field
    day: Field
    month: Field
    weekday: Field
    warning: str | None = None

    @property
    def wall_clock(self) -> bool:
        """Cron's DST rule: wall-clock unless the minute or hour field starts with ``*``."""
        return not (self.minute.star or self.hour.star)

    @property
    def days_and(self) -> bool:
        """Cron's day rule: AND the two day fields when either starts with ``*``, else OR them."""
        return self.day.star or self.weekday.star


def parse_expression(cron: str, name: str | None = None) -> Expression:
    """Read ``cron``; raise ``ValueError`` naming the expression, what is wrong and how to write it.

    ``name`` is the job's name, which ``H`` fields hash (:mod:`anarchon.cron.spread`).
    """

    def invalid(reason: str) -> ValueError:
        return ValueError(f"cron expression {cron!r} is invalid: {reason}; {HINT}")

    text = cron.strip()
    if _OTHER_WHITESPACE.search(text):
        raise invalid("it holds a newline, a control character or unusual whitespace; keep it on one line")
    if text.startswith("@"):
        alias = text.lower()
        if alias not in ALIASES:
            raise invalid(f"{text} is not a supported alias")
        text = ALIASES[alias]
    fields = _SEPARATORS.split(text) if text else []
    if not fields:
        raise invalid("it is empty")
    if len(fields) == 7:
        raise invalid("it has 7 fields; a year field (Quartz's seventh) is not supported")
    if len(fields) not in (5, 6):
        raise invalid(f"it has {len(fields)} field{'s' if len(fields) != 1 else ''}")
    specs = (SECOND, MINUTE, HOUR, DAY, MONTH, WEEKDAY)[6 - len(fields) :]
    parsed: list[Field] = []
    for spec, field_text in zip(specs, fields, strict=True):
        try:
            parsed.append(parse_field(field_text, spec, name))
        except FieldError as exc:
            raise invalid(f"the {spec.name} field {field_text!r}: {exc}") from None
    warning = None
    if len(fields) == 6 and _QUARTZ_WEEKDAY.search(fields[5]):
        warning = (
            f"cron expression {cron!r}: in the day-of-week field {fields[5]!r}, {NUMBERING}; "
            "write the weekday as a name (FRI#3, FRIL) to say which one is meant and silence this warning"
        )
    seconds = parsed[0] if len(fields) == 6 else None
    minute, hour, day, month, weekday = parsed[-5:]
    return Expression(seconds, minute, hour, day, month, weekday, warning)
