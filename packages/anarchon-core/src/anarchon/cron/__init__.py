"""Cron schedules turned into slots: UTC epoch milliseconds that every instance derives alike.

A slot must not depend on when an instance started, or two instances would
claim different slots for the same run. So a schedule is defined as a set of
instants fixed by the expression and the zone alone, and every query asks for
the first member of that set after some instant. The pieces, one idea each:

- :mod:`.fields` reads one field as classic cron reads it, from a table of
  the fields (``a-a`` is the one value ``a``), and decides each extension;
- :mod:`.expression` reads the whole expression: aliases, five or six fields,
  cron's first-character rules for the day fields and for DST;
- :mod:`.days` says which calendar days match (the day rule, ``L``, ``W``, ``#``);
- :mod:`.matcher` finds the next matching wall time on a naive clock;
- :mod:`.timeline` finds where a zone's offset changes;
- :mod:`.spread` reads Jenkins' ``H``, a value hashed from the job's name;
- :mod:`.dst` names the DST policies (classic cron's rule is the default);
- :mod:`.fixed` reads ``@every 90s`` and ``@at <time>``, slots fixed in real time;
- :mod:`.schedule` maps wall times to instants with the job's DST policy.

The reading is tested against cronsim and a table of real cron behaviour,
never against another parser's expansion (croniter widened ``a-a``).
"""

from __future__ import annotations

from .dst import DST_POLICIES, DstPolicy
from .expression import CronNumberingWarning
from .schedule import Schedule

__all__ = ["DST_POLICIES", "CronNumberingWarning", "DstPolicy", "Schedule"]
