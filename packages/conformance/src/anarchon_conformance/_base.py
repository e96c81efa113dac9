"""The fixtures every part of the suite shares, and the one a backend author provides."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, ClassVar

import pytest
import pytest_asyncio

from ._harness import BackendFactory, Conformance
from ._requires import unmet_requirement
from .plugin import record_backend

__all__ = ["SuiteBase"]

_PACKAGE = "anarchon_conformance"


class SuiteBase:
    """Base of every mixin: the ``backend_factory`` contract and the ``conformance`` fixture.

    Classes defined in this package are not collected themselves; a subclass
    defined anywhere else is, when its name matches pytest's ``Test*``.
    """

    __test__: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__test__" not in cls.__dict__:
            cls.__test__ = not cls.__module__.startswith(_PACKAGE)

    @pytest.fixture
    def backend_factory(self) -> BackendFactory:
        """Override me: return a callable that makes fresh, unstarted backend objects.

        Every object one call of this fixture's callable returns must share the
        test's one store and one namespace, isolated from every other test.
        """
        raise NotImplementedError(
            f"{type(self).__name__}.backend_factory must be overridden: define a pytest fixture "
            "`backend_factory` on the class that returns a callable making a fresh backend object "
            "(one per instance) on one store isolated for this test; see the anarchon-conformance README"
        )

    @pytest.fixture(autouse=True)
    def _anarchon_no_silent_override(self, request: pytest.FixtureRequest) -> None:
        """A standard test replaced in a subclass must say so with ``xfail`` and a reason.

        Otherwise ``def test_one_winner_…(self): pass`` would turn a failing
        backend green without a trace in the report.
        """
        name = request.node.originalname
        mro = type(self).__mro__
        owner = next((k for k in mro if name in k.__dict__), None)
        standard = any(name in k.__dict__ for k in mro if k.__module__.startswith(_PACKAGE))
        if owner is None or owner.__module__.startswith(_PACKAGE) or not standard:
            return
        if request.node.get_closest_marker("xfail") is None:
            pytest.fail(
                f"{owner.__qualname__}.{name} replaces a standard conformance test; mark the replacement "
                f'@pytest.mark.xfail(reason="…why this backend cannot pass it…") instead of hiding it',
                pytrace=False,
            )

    @pytest_asyncio.fixture
    async def conformance(
        self, request: pytest.FixtureRequest, backend_factory: BackendFactory
    ) -> AsyncIterator[Conformance]:
        """The test's backends: gated on capabilities, started on demand, all closed at teardown."""
        suite = Conformance(backend_factory)
        node = request.node
        where = node.nodeid.rsplit("::", 1)[0]
        record_backend(request.config, where, suite.describe())
        node.add_report_section("setup", "anarchon backend", suite.describe())
        reason = unmet_requirement(node, suite.capabilities, suite.name)
        if reason is not None:
            pytest.skip(reason)
        try:
            yield suite
        finally:
            await suite.close()
