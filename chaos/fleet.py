"""The conformance fleet, with seats: each seat has its own broker link and clock.

A *seat* is a place for one instance process: its backend talks through the
seat's proxy and its clock carries the seat's skew. A killed instance is
replaced on the same seat, so faults aimed at a seat's link keep meaning one
instance, and the ledger names each process ``i<n>-s<seat>``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from anarchon_conformance.fleet import Fleet, Member

__all__ = ["ChaosFleet", "LedgerTail"]

ROOT = Path(__file__).resolve().parent.parent


class ChaosFleet(Fleet):
    """A :class:`Fleet` whose instances get per-seat backend kwargs and skews."""

    def __init__(
        self,
        workdir: Path,
        *,
        backend_class: str,
        seat_kwargs: Sequence[dict[str, Any]],
        seat_skews_ms: Sequence[int],
        **kwargs: Any,
    ) -> None:
        env = dict(kwargs.pop("env", None) or {})
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
        super().__init__(
            workdir,
            backend_class=backend_class,
            backend_kwargs=dict(seat_kwargs[0]),
            instances=len(seat_kwargs),
            env=env,
            **kwargs,
        )
        base = self._argv_base
        at = base.index("--backend-kwargs")
        del base[at : at + 2]
        self.seat_kwargs = [dict(k) for k in seat_kwargs]
        self.seat_skews = list(seat_skews_ms)
        self.seat_of: dict[str, int] = {}
        self.occupant: dict[int, Member] = {}
        self._next_seat: int | None = None

    def _seat(self) -> int:
        return self._next_seat if self._next_seat is not None else len(self.occupant)

    def member_argv(self, index: int, instance: str) -> list[str]:
        seat = self._seat()
        kwargs = ["--backend-kwargs", json.dumps(self.seat_kwargs[seat])]
        return [*self._argv_base, *kwargs, "--id", instance, "--skew-ms", str(self.seat_skews[seat])]

    def member_name(self, index: int) -> str:
        return f"i{index + 1}-s{self._seat()}"

    def _spawn(self) -> Member:
        seat = self._seat()
        member = super()._spawn()
        self.occupant[seat] = member
        self.seat_of[member.instance] = seat
        return member

    def spawn_on(self, seat: int) -> Member:
        """Start a new instance on ``seat`` without waiting for it (the ledger's ``ready`` line says when)."""
        self._next_seat = seat
        try:
            return self._spawn()
        finally:
            self._next_seat = None


class LedgerTail:
    """Reads the ledger incrementally, so the harness can watch it every few ms."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._partial = b""
        self.records: list[dict[str, Any]] = []

    def poll(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        with open(self.path, "rb") as f:
            f.seek(self._offset)
            data = f.read()
        self._offset += len(data)
        data = self._partial + data
        lines = data.split(b"\n")
        self._partial = lines.pop()
        new = [json.loads(line) for line in lines if line.strip()]
        self.records.extend(new)
        return new
