"""The size rule of ARCHITECTURE.md as a test (the import rules are contracts that ``make lint`` checks).

A newcomer who wants to change one behaviour should find one file of about a
hundred lines; 500 is the ceiling for the core and for every backend. The three
backend classes still above it are listed with what splits them, and the list
must shrink: an entry whose module has come under the ceiling fails too, so it
cannot outlive its reason.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
CEILING = 500
SOURCES = [
    "anarchon-core",
    "anarchon-sqlite",
    "anarchon-redis",
    "anarchon-postgres",
    "anarchon-rabbitmq",
    "anarchon-nats",
]
#: module (from packages/) -> why it is still over the ceiling.
OVER = {
    "anarchon-postgres/src/anarchon_postgres/backend.py": "the class and its statements, to be split by role",
    "anarchon-redis/src/anarchon_redis/backend.py": "the class and its scripts' calls, to be split by role",
    "anarchon-nats/src/anarchon_nats/backend.py": "the class and its history reads, to be split by role",
}


def _modules() -> dict[str, int]:
    found = {}
    for package in SOURCES:
        for path in sorted((ROOT / "packages" / package / "src").rglob("*.py")):
            found[str(path.relative_to(ROOT / "packages"))] = len(path.read_text(encoding="utf-8").splitlines())
    return found


def test_every_module_of_the_core_and_the_backends_keeps_under_the_ceiling() -> None:
    modules = _modules()
    assert len(modules) > 50, "the walk found too few modules to mean anything"
    over = {name: lines for name, lines in modules.items() if lines > CEILING and name not in OVER}
    assert not over, f"modules over {CEILING} lines: {over}; split them by role (ARCHITECTURE.md)"


@pytest.mark.parametrize("name", sorted(OVER))
def test_a_listed_exception_is_still_needed(name: str) -> None:
    lines = _modules().get(name)
    assert lines is not None, f"{name} is gone: remove it from OVER"
    assert lines > CEILING, f"{name} has {lines} lines now: remove it from OVER"
