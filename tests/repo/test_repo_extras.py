"""The meta-package's extras and the README's list of them cannot drift apart.

Every distribution of the monorepo that a user installs (the backends and the
packages above the core) has an extra, and the README's "Backends" sentence
names exactly the extras the meta-package declares.
"""

from __future__ import annotations

import re
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[2]
#: Distributions that are no extra on purpose: the core (always installed), the
#: meta-package itself, and the test suite for backend authors.
NOT_EXTRAS = {"anarchon-core", "anarchon", "anarchon-conformance"}


def _extras() -> dict[str, list[str]]:
    meta = tomllib.loads((ROOT / "packages/anarchon/pyproject.toml").read_text(encoding="utf-8"))
    return meta["project"]["optional-dependencies"]


def _distributions() -> set[str]:
    names = set()
    for pyproject in (ROOT / "packages").glob("*/pyproject.toml"):
        names.add(tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["name"])
    return names - NOT_EXTRAS


def test_every_distribution_has_an_extra_and_all_has_every_one() -> None:
    extras = _extras()
    wanted = _distributions()
    assert len(wanted) >= 8
    named = {re.split(r"[<>=!~\[ ]", req, maxsplit=1)[0] for reqs in extras.values() for req in reqs}
    assert wanted <= named, f"no extra installs {sorted(wanted - named)}"
    in_all = {re.split(r"[<>=!~\[ ]", req, maxsplit=1)[0] for req in extras["all"]}
    assert in_all == wanted, f"'all' misses {sorted(wanted - in_all)} or has {sorted(in_all - wanted)}"


def test_the_readme_names_exactly_the_declared_extras() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    sentence = re.search(r"\(extras\s+(`[^)]*`)\)", text)
    assert sentence, "README.md: no '(extras `a`, `b`, ...)' sentence found in the Backends section"
    listed = re.findall(r"`([a-z-]+)`", sentence.group(1))
    assert sorted(listed) == sorted(_extras()), f"README lists {listed}, the meta-package declares {sorted(_extras())}"
