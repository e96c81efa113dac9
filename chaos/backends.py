"""Every backend's fault-suite brokers, found through the backends' manifests.

Each first-party backend's brokers live in its folder
(``packages/<backend>/chaos/<module>.py``, named by its manifest's
``[chaos] module``), which :mod:`chaos` adds to its package path, so
``chaos.redis`` is ``packages/anarchon-redis/chaos/redis.py``. Each such
module lists its ``BROKERS`` (a private server for the fault scenario) and
its ``FAILOVER`` referees (a replicated one for the failover scenario).
"""

from __future__ import annotations

import importlib

from scripts.backends import load

from .brokers import Broker
from .replicated import Replicated

__all__ = ["BROKERS", "FAILOVER_BROKERS", "FAILOVER_ORDER", "ORDER"]

_MODULES = [importlib.import_module(f"{__package__}.{m.name}") for m in load()]

#: backend name -> its private broker, for ``python -m chaos``.
BROKERS: dict[str, type[Broker]] = {b.name: b for module in _MODULES for b in module.BROKERS}
#: name -> a replicated referee, for ``python -m chaos.failover``.
FAILOVER_BROKERS: dict[str, type[Replicated]] = {b.name: b for module in _MODULES for b in module.FAILOVER}
#: The order reports list them in: the backends' manifests' ``order``.
ORDER = list(BROKERS)
FAILOVER_ORDER = list(FAILOVER_BROKERS)
