"""The claim path's view of pauses: a paused job's slots go to ``Backend.claim_paused``.

Every instance keeps the namespace's pauses as its control poll last read
them (:class:`~anarchon._control_loop.ControlLoop`, every
``CONTROL_POLL_MS``). A scheduled claim of a slot a known pause covers is
sent to ``claim_paused``, which checks the stored pause again in the same
atomic step that records the slot ``paused``; where the pause no longer
covers the slot (resumed meanwhile) the claim goes the usual way. So a resume
takes effect at once, and a pause on each instance at its next poll: a slot
claimed before an instance saw the pause runs, one claimed after does not.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .backend import Backend, Capabilities, Claim, ClaimResult
from .control import PauseState

__all__ = ["PauseGate"]


class PauseGate:
    """Stands in for the backend in the claim batcher: ``claim()`` and ``capabilities``."""

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self._pauses: dict[str, PauseState] = {}

    @property
    def capabilities(self) -> Capabilities:
        return self._backend.capabilities

    def known(self, job: str) -> PauseState | None:
        return self._pauses.get(job)

    def update(self, pauses: Iterable[PauseState]) -> None:
        """Replace what is known with a poll's answer (every stored pause of the namespace)."""
        self._pauses = {p.job: p for p in pauses}

    def learn(self, pause: PauseState) -> None:
        """One pause this instance just wrote itself: known before the next poll."""
        self._pauses[pause.job] = pause

    def _covered(self, claim: Claim) -> bool:
        pause = self._pauses.get(claim.job)
        return not claim.manual and pause is not None and pause.covers(claim.slot_ms)

    async def claim(self, claims: Sequence[Claim]) -> list[ClaimResult]:
        if not self._pauses or not any(self._covered(c) for c in claims):
            return await self._backend.claim(claims)
        routed = [i for i, c in enumerate(claims) if self._covered(c)]
        answers: list[ClaimResult | None] = [None] * len(claims)
        for i, answer in zip(routed, await self._backend.claim_paused([claims[i] for i in routed]), strict=True):
            answers[i] = answer
        rest = [i for i, answer in enumerate(answers) if answer is None]
        if rest:
            for i, answer in zip(rest, await self._backend.claim([claims[i] for i in rest]), strict=True):
                answers[i] = answer
        return [a for a in answers if a is not None]
