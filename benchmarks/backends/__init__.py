"""One module per backend target: its raw primitive, how to build instances, how to clean up.

The in-memory target lives here; each first-party backend's targets live in
its own folder (``packages/<backend>/benchmarks/<target>.py``), named by its
manifest's ``[bench]`` table, and are found through this package's path, so
``benchmarks.backends.redis`` is ``packages/anarchon-redis/benchmarks/redis.py``.
Modules are imported only when their backend is asked for, so a missing client
library costs only that backend's figures.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from scripts.backends import load as manifests

from .._target import Target

__all__ = ["CLAIM_TARGET", "DEFAULT", "NAMES", "load"]

_MANIFESTS = manifests()
__path__ += [str(Path(__file__).resolve().parents[2] / "packages" / m.folder / "benchmarks") for m in _MANIFESTS]

_OWN = tuple(name for m in _MANIFESTS for name in m.bench["targets"])
_PRIVATE = tuple(name for m in _MANIFESTS for name in m.bench["private"])
#: Every target, in the order the report lists them.
NAMES = ("memory", *_OWN, *_PRIVATE)
#: Measured when ``--backends`` is not given: those on the machine's own servers. The private
#: servers (a PostgreSQL with initdb's defaults, a newer broker downloaded…) run only when asked for.
DEFAULT = ("memory", *_OWN)
#: claim / raw primitive, p50 and 16-way (the issue's targets on a 2-core machine), per target.
CLAIM_TARGET = {name: float(m.bench["claim_target"]) for m in _MANIFESTS for name in m.bench["targets"]}


def load(name: str) -> Target:
    if name not in NAMES:
        raise ValueError(f"unknown backend {name!r}; choose from {', '.join(NAMES)}")
    target: Target = importlib.import_module(f"{__name__}.{name}").TARGET
    return target
