"""DST policies: what a job does with a wall time that comes twice (fall back) or never (spring forward).

Two questions decide every case, as ICU's repeated and skipped wall-time
options do: does a *repeated* wall time run once (at its first occurrence) or
at each occurrence, and does a *skipped* wall time run at the first instant
after the gap or not at all. Each policy is one answer to both, for every
expression alike; only ``cron`` asks the expression:

- ``cron`` (the default): ``wall`` or ``real``, by cron's first-character rule;
- ``wall``: a repeated wall time once, at its first occurrence; a skipped one
  at the first instant after the gap;
- ``real``: a repeated wall time at each occurrence; a skipped one not at all;
- ``twice``: a repeated wall time at each occurrence; a skipped one at the
  first instant after the gap;
- ``skip``: a repeated wall time once, at its first occurrence; a skipped one
  not at all.

``wall`` is what classic cron does to a job whose minute and hour fields do
not start with ``*``, ``real`` what it does to any other job. ``twice``
never misses a wall time; ``skip`` never runs one twice and never runs at a
time the expression does not name. Several skipped times of one gap run once,
at its end, and with a run due at that instant anyway they are that run.
"""

from __future__ import annotations

from typing import Literal

__all__ = ["DST_POLICIES", "DstPolicy", "dst_rules"]

DstPolicy = Literal["cron", "wall", "real", "twice", "skip"]

#: policy -> (a repeated wall time runs once, a skipped wall time runs at the gap's end); None: by the expression.
_RULES: dict[str, tuple[bool, bool] | None] = {
    "cron": None,
    "wall": (True, True),
    "real": (False, False),
    "twice": (False, True),
    "skip": (True, False),
}
#: The policies, the default first, each with what it does in a few words.
DST_POLICIES: dict[str, str] = {
    "cron": "classic cron: 'wall' for a job whose minute and hour fields do not start with *, else 'real'",
    "wall": "a repeated wall time runs once, a skipped one at the end of the gap",
    "real": "every instant whose local time matches: a repeated wall time twice, a skipped one never",
    "twice": "a repeated wall time runs at each occurrence, a skipped one at the end of the gap",
    "skip": "a repeated wall time runs once, a skipped one never",
}


def dst_rules(policy: str, wall_clock: bool) -> tuple[bool, bool]:
    """(run a repeated wall time once, run a skipped wall time at the gap's end) for ``policy``.

    ``wall_clock`` is cron's first-character rule for the expression, which
    only ``cron`` consults. Raises ``ValueError`` naming the policies.
    """
    if not isinstance(policy, str) or policy not in _RULES:
        choices = "; ".join(f"{name!r}: {what}" for name, what in DST_POLICIES.items())
        raise ValueError(f"dst={policy!r} is not a DST policy; use one of {choices}")
    rules = _RULES[policy]
    return (wall_clock, wall_clock) if rules is None else rules
