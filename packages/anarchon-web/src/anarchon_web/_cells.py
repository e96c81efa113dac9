"""The strip's cells as HTML, built in Python: a page of 50 strips is 1,500 cells, and a Jinja2
macro call per cell cost most of the page's time. ``Markup.format`` escapes every value it puts in."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from markupsafe import Markup

from ._present import utc
from ._slots import OUTCOMES

__all__ = ["cells"]

_BLANK = Markup('<span class="cell blank"></span>')
_SPAN = Markup('<span class="cell o-{0}" title="{1}" data-outcome="{0}" data-slot="{2}"></span>')
_LINK = Markup('<a class="cell o-{0}{1}" href="{2}/runs/{3}" title="{4}" data-outcome="{0}" data-slot="{3}"></a>')


def _cell(base: str, s: Mapping[str, Any]) -> Markup:
    outcome = s["outcome"]
    if outcome not in OUTCOMES:  # never: outcomes come from _slots; refuse rather than print it
        raise ValueError(f"unknown outcome {outcome!r}")
    slot_ms = int(s["slot_ms"])
    words = f"{utc(slot_ms)} · {OUTCOMES[outcome]}"
    if s["instance"] is None:
        return _SPAN.format(outcome, words, slot_ms)
    attempt = int(s["attempt"])
    again = " again" if attempt > 1 else ""
    return _LINK.format(outcome, again, base, slot_ms, f"{words} · {s['instance']} attempt {attempt}")


def cells(base: str, slots: Iterable[Mapping[str, Any] | None]) -> Markup:
    """One strip (or timeline lane); ``None`` is an empty place in a lane."""
    return Markup("").join(_BLANK if s is None else _cell(base, s) for s in slots)
