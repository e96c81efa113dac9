"""The newest slot of each job this client was answered about: how a claim tells a Redis that forgot it.

A Redis without persistence (the machine's default) restarts empty. A claim
of a slot that another instance won just before would then find no record and
win again: measured with the defaults, 3 instances x 20 every-second jobs and
a restart of 0.5 s ran 13 slots twice. Every answer to a scheduled claim
means the job's mark is at least that slot (the mark only grows), so every
claim carries the newest slot this client was answered about. A claim that
finds the mark missing or below it (Redis restarted empty or from an older
snapshot, or its keys were deleted) is answered ``forgotten``: the slot is
not run (it may have been won before), the mark is set to it so every other
claim of it loses too, and the job's counter goes on from the clock
(``fencing_floor``), above the tokens the lost state gave. About one slot
per job is the price of a restart that lost claims, stated in the log once
per batch, and nothing runs twice.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from anarchon.backend import Claim

from ._records import text

__all__ = ["KnownJobs"]

log = logging.getLogger("anarchon.redis")


class KnownJobs:
    def __init__(self) -> None:
        self._marks: dict[str, int] = {}

    def mark(self, job: str) -> int:
        """The claim's ``known`` number: the newest scheduled slot of ``job`` answered to this client, or 0."""
        return self._marks.get(job, 0)

    def heard(self, job: str, slot_ms: int) -> None:
        """Another instance's claim decided this slot (``watch_decided``): the mark is at least it, as for an answer.

        An instance that hears a slot decided sends no claim for it (ranked claims), so
        without this its number lagged behind the slots the fleet decided: after an empty
        restart its catch-up claim of a slot won just before (whose notice it missed) found
        a mark set lower by another claim and won again (3 slots twice in the fault test).
        """
        if slot_ms > self._marks.get(job, 0):
            self._marks[job] = slot_ms

    def answered(self, c: Claim, reply: Any) -> bool:
        """Note an answer; ``True`` when it says Redis had forgotten the job (the claim is lost)."""
        if not c.manual and c.slot_ms > self._marks.get(c.job, 0):
            self._marks[c.job] = c.slot_ms
        return isinstance(reply, list) and len(reply) == 1 and text(reply[0]) == "forgotten"

    @staticmethod
    def report(forgotten: Sequence[Claim], where: str) -> None:
        if not forgotten:
            return
        names = sorted({c.job for c in forgotten})
        log.warning(
            "%s has lost what it had decided about %d job(s) (%s): restarted empty or from an old snapshot, "
            "or its keys were deleted. The slots claimed now are not run, so that none runs twice; the next "
            "ones run as usual. Keep claims across restarts with appendonly yes (anarchon check says so)",
            where,
            len(names),
            ", ".join(names[:5]) + (" …" if len(names) > 5 else ""),
        )
