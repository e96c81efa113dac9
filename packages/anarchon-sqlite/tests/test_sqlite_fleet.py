"""Real instance processes sharing one SQLite file: the conformance suite's multi-process part."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from anarchon_conformance import FleetTests

pytestmark = pytest.mark.slow


class TestSQLiteFleet(FleetTests):
    @pytest.fixture
    def fleet_backend(self, tmp_path: Path) -> dict[str, Any]:
        return {"backend": f"sqlite:///{tmp_path / 'shared.sqlite3'}"}
