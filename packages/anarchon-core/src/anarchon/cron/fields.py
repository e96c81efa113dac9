"""One field of a cron expression, read as classic cron (Vixie cron, cronie) reads it.

The grammar is cron's: a field is a comma-separated list of elements, each
``*``, a value or a range ``a-b``, optionally followed by ``/step``. A range
``a-a`` is the one value ``a`` (croniter widened it to the whole field, which
is why this parser exists). What cron does not have is decided here, one
element kind at a time (the core README has the table):

- accepted extensions: ``N/step`` (``N-max/step``, as Quartz and cronsim read
  it), ``L``, ``L-n``, ``LW`` and ``nW`` in the day-of-month field, ``n#k`` and
  ``nL`` in the day-of-week field, and a weekday range ending in ``SUN``/``0``
  (``FRI-SUN``, ``7-SUN``), which cronie reads as ending at 7;
- refused: wrap-around ranges (``22-2``), steps longer than the field's whole
  span (``*/90`` in minutes reads as "every 90 minutes", which cron cannot
  express: it would run at minute 0 only), Quartz's ``?``, and the random
  ``R`` (croniter's) and ``~`` (cronie's): every instance must derive the
  same slots.

Jenkins' ``H`` is accepted: a value hashed from the job's name, the same on
every instance (:mod:`anarchon.cron.spread`).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from dataclasses import field as dataclass_field

from .spread import hashed

__all__ = ["DAY", "HOUR", "MINUTE", "MONTH", "SECOND", "WEEKDAY", "Field", "FieldError", "FieldSpec", "parse_field"]

NUMBERING = (
    "weekdays are numbered the cron way, 0 or 7 = Sunday, 1 = Monday ... 6 = Saturday, "
    "not Quartz's 1 = Sunday ... 7 = Saturday (Quartz's 6#3, the third Friday, is 5#3 or FRI#3 here)"
)


class FieldError(ValueError):
    """A field that does not parse; the expression-level message adds the expression and the hint."""


@dataclass(frozen=True)
class FieldSpec:
    """One row of the field table: name, bounds and the names accepted for values (``names[i]`` is ``low + i``)."""

    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()


SECOND = FieldSpec("second", 0, 59)
MINUTE = FieldSpec("minute", 0, 59)
HOUR = FieldSpec("hour", 0, 23)
DAY = FieldSpec("day-of-month", 1, 31)
MONTH = FieldSpec("month", 1, 12, ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"))
WEEKDAY = FieldSpec("day-of-week", 0, 7, ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"))


@dataclass(frozen=True)
class Field:
    """What one field names: plain values plus the calendar rules of the day fields.

    Weekdays are folded to 0-6 (7 is Sunday, as 0). ``star`` is cron's
    first-character test: the field's text starts with ``*`` (so ``*/2`` counts
    as unrestricted for the day rule and the DST rule).
    """

    text: str
    values: frozenset[int]
    last: frozenset[int] = frozenset()  # L-n: n days before the month's last day (L is L-0)
    nearest: frozenset[int] = frozenset()  # nW: the weekday nearest the nth
    last_weekday: bool = False  # LW: the month's last Monday-to-Friday
    nth: frozenset[tuple[int, int]] = frozenset()  # (weekday, k) for weekday#k
    last_of: frozenset[int] = frozenset()  # weekdays w of wL: the month's last w

    @property
    def star(self) -> bool:
        return self.text.startswith("*")


_TOKEN = r"[0-9]+|[A-Za-z]+"  # noqa: S105 - a number or a name, no secret
_ELEMENT = re.compile(rf"(?:(\*)|({_TOKEN})(?:-({_TOKEN}))?)(?:/([0-9]+))?", re.ASCII)
_LAST = re.compile(r"L(?:-([0-9]+))?", re.ASCII | re.IGNORECASE)
_NEAREST = re.compile(r"([0-9]+)W", re.ASCII | re.IGNORECASE)
_NTH = re.compile(r"([0-9]+|[A-Za-z]{3})#([0-9]+)", re.ASCII)
_LAST_OF = re.compile(r"([0-9]+|[A-Za-z]{3})L", re.ASCII | re.IGNORECASE)
_RANDOM_REFUSED = (
    "R and ~ (random) fields are not supported: every instance must derive the same slots; "
    "H spreads jobs with a value hashed from the job's name instead (H, H/15, H(0-29))"
)
_RANDOM = re.compile(r"R(\(.*\))?(/[0-9]+)?", re.ASCII | re.IGNORECASE)


def _value(token: str, spec: FieldSpec) -> int:
    if token.isdigit():
        value = int(token)
        if not spec.low <= value <= spec.high:
            raise FieldError(f"{value} is out of range {spec.low}-{spec.high}")
        return value
    if not spec.names:
        raise FieldError(f"{token!r} is not a number; names are allowed only in the month and day-of-week fields")
    try:
        return spec.low + spec.names.index(token.upper())
    except ValueError:
        raise FieldError(
            f"{token!r} is not a {spec.name} name; use {' '.join(spec.names)} (any case) or {spec.low}-{spec.high}"
        ) from None


def _range(element: str, spec: FieldSpec) -> range:
    match = _ELEMENT.fullmatch(element)
    if match is None:
        if spec not in (DAY, WEEKDAY) and re.search(r"[#LW]", element, re.IGNORECASE):
            raise FieldError(f"{element!r}: L, W and # belong to the day-of-month and day-of-week fields")
        extra = {DAY: ", L, L-n, LW or nW", WEEKDAY: ", n#k or nL"}.get(spec, "")
        syntax = f"*, a value or a range a-b, each with an optional /step{extra}"
        raise FieldError(f"{element!r} is not understood; write {syntax}")
    star, first, last, step_text = match.groups()
    if star:
        low, high = spec.low, spec.high
    else:
        low = _value(first, spec)
        high = _value(last, spec) if last is not None else (spec.high if step_text else low)
        if high < low and spec is WEEKDAY and high == 0:
            high = 7  # cronie: FRI-SUN and 7-SUN end at the second Sunday
        if high < low:
            raise FieldError(
                f"the range {element!r} wraps around; write it as two ranges, {first}-{spec.high},{spec.low}-{last}"
            )
    step = 1
    if step_text is not None:
        step = int(step_text)
        if step == 0:
            raise FieldError(f"the step in {element!r} is 0; a step is 1 or more")
        if step > spec.high - spec.low:
            raise FieldError(
                f"the step {step} in {element!r} is longer than the whole {spec.name} field "
                f"({spec.low}-{spec.high}), so it names only {low}: steps start again in every hour, day, "
                f"month or week, so cron cannot say 'every {step}'; write {low} if that is what is meant"
            )
    return range(low, high + 1, step)


@dataclass
class _Parts:
    """What the elements of one field add up to, before it is frozen into a :class:`Field`."""

    values: set[int] = dataclass_field(default_factory=set)
    last: set[int] = dataclass_field(default_factory=set)
    nearest: set[int] = dataclass_field(default_factory=set)
    last_weekday: bool = False
    nth: set[tuple[int, int]] = dataclass_field(default_factory=set)
    last_of: set[int] = dataclass_field(default_factory=set)


def _day_special(element: str, parts: _Parts) -> bool:
    """Day-of-month extensions (Quartz's; cronsim reads L and LW too): L, L-n, LW, nW."""
    if element.upper() == "LW":
        parts.last_weekday = True
        return True
    if match := _LAST.fullmatch(element):
        back = int(match[1] or 0)
        if back > 30:
            raise FieldError(f"{element!r} counts back {back} days; L-n takes n from 0 to 30")
        parts.last.add(back)
        return True
    if match := _NEAREST.fullmatch(element):
        parts.nearest.add(_value(match[1], DAY))
        return True
    return False


def _weekday_special(element: str, parts: _Parts) -> bool:
    """Day-of-week extensions (Quartz's, also cronsim's): n#k and nL, with cron's numbering."""
    if match := _NTH.fullmatch(element):
        k = int(match[2])
        if not 1 <= k <= 5:
            raise FieldError(f"{element!r}: the k of weekday#k is 1 to 5 (a month has at most five of a weekday)")
        parts.nth.add((_value(match[1], WEEKDAY) % 7, k))
        return True
    if match := _LAST_OF.fullmatch(element):
        parts.last_of.add(_value(match[1], WEEKDAY) % 7)
        return True
    if element.upper() == "L":
        raise FieldError("a lone L in the day-of-week field is Quartz's Saturday; write 6 or SAT (5L: the last Friday)")
    return False


def parse_field(text: str, spec: FieldSpec, name: str | None = None) -> Field:
    """Read one field; raise :class:`FieldError` saying what is wrong with it and how to write it.

    ``name`` is the job's name, from which ``H`` elements take their value. A field
    without ``H`` does not depend on it and is read once (100,000 stored schedules
    share a handful of distinct fields; reading each again was a fifth of a start).
    """
    if "H" in text or "h" in text:
        return _parse_field(text, spec, name)
    return _parse_plain(text, spec)


@functools.lru_cache(maxsize=4096)
def _parse_plain(text: str, spec: FieldSpec) -> Field:
    return _parse_field(text, spec, None)


def _parse_field(text: str, spec: FieldSpec, name: str | None) -> Field:
    if "?" in text:
        raise FieldError(f"'?' is Quartz syntax, which anarchon does not read; write * (and note: {NUMBERING})")
    if "~" in text or any(_RANDOM.fullmatch(element) for element in text.split(",")):
        raise FieldError(_RANDOM_REFUSED)
    parts = _Parts()
    for element in text.split(","):
        if not element:
            raise FieldError("it has an empty list element; separate values with single commas")
        if spec is DAY and _day_special(element, parts):
            continue
        if spec is WEEKDAY and _weekday_special(element, parts):
            continue
        spread = hashed(element, spec.name, (spec.low, spec.high), lambda token: _value(token, spec), name, FieldError)
        parts.values.update(spread if spread is not None else _range(element, spec))
    values = {v % 7 for v in parts.values} if spec is WEEKDAY else parts.values
    return Field(
        text=text,
        values=frozenset(values),
        last=frozenset(parts.last),
        nearest=frozenset(parts.nearest),
        last_weekday=parts.last_weekday,
        nth=frozenset(parts.nth),
        last_of=frozenset(parts.last_of),
    )
