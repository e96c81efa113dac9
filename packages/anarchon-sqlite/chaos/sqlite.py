"""The fault suite's SQLite: a file of the scenario's own (no server to kill).

Found by :mod:`chaos.backends` through this backend's manifest (``[chaos]``);
the bases are :mod:`chaos.brokers` and :mod:`chaos.replicated`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chaos.brokers import Broker
from chaos.replicated import Replicated


class SQLiteBroker(Broker):
    """No server: the "broker" is the database file; its faults are write-lock stalls."""

    name = "sqlite"
    backend_class = "anarchon_sqlite:SQLiteBackend"
    restartable = False
    networked = False
    persistence_note = "WAL file; a held write lock stands in for a cut (no network)"

    @property
    def path(self) -> Path:
        return self.workdir / "anarchon.sqlite3"

    def start(self) -> None:
        pass

    def backend_kwargs(self, port: int, namespace: str) -> dict[str, Any]:
        return {"path": str(self.path)}


#: The scenario's brokers, and the failover scenario's replicated referees.
BROKERS: tuple[type[Broker], ...] = (SQLiteBroker,)
FAILOVER: tuple[type[Replicated], ...] = ()
