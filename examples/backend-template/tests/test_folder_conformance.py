"""The anarchon conformance suite against FolderBackend: one fresh folder per test."""

import pytest
from anarchon_conformance import BackendSuite, FleetTests

from anarchon_folder import FolderBackend


class TestFolderBackend(BackendSuite):
    @pytest.fixture
    def backend_factory(self, tmp_path):
        return lambda: FolderBackend(tmp_path / "store")


class TestFolderFleet(FleetTests):
    @pytest.fixture
    def fleet_backend(self, tmp_path):
        return {"backend": f"folder://{tmp_path / 'store'}"}
