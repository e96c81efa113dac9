"""Gating tests on what a backend declares, never on its name.

A test says which capabilities it needs with one marker; the suite's fixture
reads the backend's :class:`~anarchon.backend.Capabilities` and skips with a
reason that names both the capability and the backend, so a skipped test in
a report explains itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import TypeVar

import pytest

from anarchon.backend import Capabilities

__all__ = ["MARKER", "gated", "requires", "unmet_requirement"]

MARKER = "anarchon_requires"

_FLAGS = frozenset(f.name for f in fields(Capabilities))


def _check(name: str) -> str:
    if name not in _FLAGS:
        raise ValueError(f"unknown capability {name!r}; the capabilities are {', '.join(sorted(_FLAGS))}")
    return name


def requires(*needed: str, **flags: bool) -> pytest.MarkDecorator:
    """Run the decorated test only where the backend's capabilities match.

    ``@requires("lease")`` needs the flag on; ``@requires(lease=False)`` needs
    it off (the other tier's negative tests); both forms combine.
    """
    wanted = {_check(name): True for name in needed}
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise TypeError(f"requires({name}={value!r}): give True or False")
        wanted[_check(name)] = value
    if not wanted:
        raise TypeError('requires() needs at least one capability, e.g. requires("lease")')
    mark: pytest.MarkDecorator = getattr(pytest.mark, MARKER)(**wanted)
    return mark


C = TypeVar("C", bound=type)


def gated(*needed: str, **flags: bool) -> Callable[[C], C]:
    """Class-level :func:`requires`: every ``test_*`` the class itself defines needs these
    capabilities, and is an asyncio test.

    A mark on the class would not do: the suite's tiers are mixins of one
    class, and pytest merges a base class's marks into every test of its
    subclasses, the other tiers' tests included.
    """
    mark = requires(*needed, **flags)

    def gate(cls: C) -> C:
        for name, test in list(vars(cls).items()):
            if name.startswith("test_") and callable(test):
                setattr(cls, name, pytest.mark.asyncio(mark(test)))
        return cls

    return gate


def unmet_requirement(node: pytest.Item, capabilities: Capabilities, backend: str) -> str | None:
    """The skip reason for this test on this backend, or ``None`` to run it."""
    for mark in node.iter_markers(MARKER):
        for name, wanted in mark.kwargs.items():
            have = bool(getattr(capabilities, name))
            if have == wanted:
                continue
            tier = f"{capabilities.kind} tier"
            if wanted:
                return f"needs capability {name!r}; backend {backend!r} ({tier}) does not declare it"
            return f"only for backends without {name!r}; backend {backend!r} ({tier}) declares it"
    return None
