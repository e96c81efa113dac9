"""The README a backend author follows names every mixin the suite runs and every capability it reads."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from anarchon import Capabilities
from anarchon_conformance import BackendSuite

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def test_every_mixin_of_the_suite_is_in_the_readme_table() -> None:
    mixins = [c.__name__ for c in BackendSuite.__mro__[1:] if c.__name__.endswith("Tests")]
    assert len(mixins) >= 16
    missing = [m for m in mixins if f"| `{m}` |" not in README]
    assert not missing, f"README.md's table of mixins lacks {missing}"


def test_every_capability_is_in_the_readme_example() -> None:
    missing = [f.name for f in dataclasses.fields(Capabilities) if f"        {f.name}=" not in README]
    assert not missing, f"README.md's Capabilities(...) example lacks {missing}"


def test_the_readme_says_a_lease_backend_subclasses_lease_backend() -> None:
    assert "LeaseBackend" in README
