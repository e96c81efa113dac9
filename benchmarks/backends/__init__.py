"""One module per backend: its raw primitive, how to build instances, how to clean up.

Modules are imported only when their backend is asked for, so a missing
client library costs only that backend's figures.
"""

from __future__ import annotations

import importlib

from .._target import Target

__all__ = ["DEFAULT", "NAMES", "load"]

#: Every backend, in the order the report lists them.
NAMES = ("memory", "sqlite", "redis", "postgres", "rabbitmq", "nats", "postgres_private", "nats_pypi")
#: Measured when ``--backends`` is not given: those on the machine's own servers. The private
#: servers (``postgres_private``: initdb's defaults; ``nats_pypi``: a newer nats-server,
#: downloaded) run only when asked for.
DEFAULT = NAMES[:-2]


def load(name: str) -> Target:
    if name not in NAMES:
        raise ValueError(f"unknown backend {name!r}; choose from {', '.join(NAMES)}")
    target: Target = importlib.import_module(f"{__name__}.{name}").TARGET
    return target
