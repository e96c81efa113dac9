"""The pytest plugin (entry point ``pytest11``): marker, and which backend each suite class ran on.

``pytest_report_header`` runs before any fixture could build a backend, so
each test's ``conformance`` fixture records the backend it got, and the
terminal summary prints one line per suite class: name, tier, capabilities.
Kept free of heavy imports: pytest loads this module in every session of a
project that has the suite installed.
"""

from __future__ import annotations

import pytest

__all__ = ["record_backend"]

_SEEN = pytest.StashKey[dict[str, str]]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "anarchon_requires(**capabilities): run only on backends whose capabilities match "
        '(use anarchon_conformance.requires("lease") or requires(lease=False))',
    )
    # The multi-process suite (FleetTests) is marked slow; registered here so a backend's own
    # project needs no pytest configuration to run it quietly.
    config.addinivalue_line("markers", "slow: a test that starts real processes and waits on their clock")
    config.stash[_SEEN] = {}


def record_backend(config: pytest.Config, where: str, description: str) -> None:
    """Remember which backend the suite class ``where`` ran against."""
    config.stash.setdefault(_SEEN, {})[where] = description


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    seen = config.stash.get(_SEEN, {})
    if not seen:
        return
    terminalreporter.section("anarchon conformance")
    for where, description in sorted(seen.items()):
        terminalreporter.write_line(f"{where}: {description}")
