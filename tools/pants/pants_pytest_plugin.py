"""A pytest plugin for Pants' test runs only (pants.toml: ``[pytest] args``).

Pants runs each test file in its own pytest process and deselects the tests
marked slow (the pip matrix runs those). A file whose tests are all slow then
ends with pytest's exit code 5, "no tests collected", which Pants reports as a
failure; this turns that one case into a pass. Without a ``-m`` expression an
empty file still fails.
"""

from __future__ import annotations

import pytest


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and session.config.getoption("markexpr"):
        session.exitstatus = pytest.ExitCode.OK
