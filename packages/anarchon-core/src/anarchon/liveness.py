"""Instance liveness, apart from run leases: a heartbeat per instance.

A run's lease (``lease_ms``, 30 s by default) bounds an owner that is alive but
stalled; it is far too long to wait for an owner that is *dead*: every slot of
an every-second job would be skipped for overlap with the dead run until the
lease ran out. So each instance of a lease backend that offers it also keeps
one heartbeat record in the store, ``alive_until = store clock + TTL``,
renewed every :data:`HEARTBEAT_MS` (every :data:`IDLE_HEARTBEAT_MS` while the
instance holds no run, see :mod:`anarchon.heartbeat`) from a thread and a
connection of its own (a busy event loop, a sync job hogging it, does not stop
the heartbeat; only a dead, frozen or cut-off process does).

The store then applies one more rule (see :mod:`anarchon.backend`): a running
run whose owner has a record and that record expired (``alive_until`` before
the store's now) counts as expired, for take-over, for the abandon-older step
of a claim and for the overlap skip, whatever its lease says. An owner with
no record at all counts as alive: its runs wait for their lease, as before.

The owner's side of the bargain (found by the protocol model, model/README.md):
an instance presumes every run it holds lost once four fifths of
:data:`LIVENESS_TTL_MS` passed since it *sent* its last acknowledged beat,
and does not start a grant whose claim it sent before such a lapse. A record
that expired comes back with the next beat that arrives (the upsert always
writes); runs the owner gave up stay given up.

A silent store condemns nobody. When the referee itself was out (a failover,
a restart that kept its data, a network cut of the whole fleet, a stall of
every host), no instance could beat, so every record expired at once, the
live owners' with the dead ones'; the first beat to arrive would otherwise
report them all dead and take over runs whose owners are alive and are only
waiting for the referee to record them. So a beat that finds the store
silent for longer than :data:`SILENCE_SHARE` of the TTL (no beat from
anyone: the newest record's ``alive_until - ttl`` is that long ago) first
renews every record that was alive at that newest beat to ``now + 2 * TTL``:
one TTL for each instance to find the referee again (a Sentinel is asked
every second), one as usual. etcd renews its leases on a leader change for
the same reason. It only ever delays a take-over, so it cannot make a run
twice; a process that died during the outage is taken over two TTLs (3 s)
after the referee is back. Only a fleet whose every heartbeat is slower than
half a TTL for good keeps renewing a dead record; its runs then wait for
their lease, as without heartbeats. A claim or take-over that reaches the
store before that first beat likewise counts an expired record as dead only
while some record is alive.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

__all__ = [
    "HEARTBEAT_MS",
    "IDLE_HEARTBEAT_MS",
    "LIVENESS_TTL_MS",
    "RETAIN_DEAD_MS",
    "SILENCE_SHARE",
    "Beat",
    "Heart",
    "after_silence",
    "soonest_expiry",
]

#: How often an instance renews its heartbeat record while it holds a run.
HEARTBEAT_MS = 250
#: How often an instance that holds no run renews it, on a store whose beat tells when the next
#: record of another instance expires (:attr:`Beat.next_expiry_ms`): the beat that would report
#: that instance dead is sent at its expiry, so the fleet notices a death as early as with beats
#: every :data:`HEARTBEAT_MS`. Below half the TTL, so a fleet of idle instances never looks silent
#: (:func:`after_silence`).
IDLE_HEARTBEAT_MS = 500
#: How long the store keeps a record alive after a beat arrives: six beats, so
#: about a second of failed or slow beats is tolerated before the fleet takes
#: this instance's runs over, and a killed instance is noticed within 1.5 s.
LIVENESS_TTL_MS = 1500
#: How long an expired record is kept (and reported dead) before it is deleted.
#: A run of an owner whose record is gone waits for its lease, so this only
#: needs to outlast the take-over poll of some live instance.
RETAIN_DEAD_MS = 600_000
#: A store that heard no beat from anyone for longer than this share of the TTL
#: was itself out (or every host stalled): see the module's docstring.
SILENCE_SHARE = 0.5


def after_silence(alive: Mapping[str, int], now_ms: int, ttl_ms: int) -> dict[str, int]:
    """The records a beat at ``now_ms`` renews before its own (none unless the store was silent).

    ``alive`` maps every instance to its ``alive_until``. The reference for
    the stores written in SQL or Lua, which apply the same rule in their own
    beat statement or script.
    """
    if not alive:
        return {}
    last = max(alive.values()) - ttl_ms
    if now_ms - last <= ttl_ms * SILENCE_SHARE:
        return {}
    return {name: now_ms + 2 * ttl_ms for name, until in alive.items() if until >= last}


def soonest_expiry(alive: Mapping[str, int], instance: str, now_ms: int) -> int | None:
    """Milliseconds from ``now_ms`` until the first record of another instance that is still alive expires.

    The reference for :attr:`Beat.next_expiry_ms` (``alive`` as after the beat: every
    instance to its ``alive_until``); ``None`` when no other instance is alive.
    """
    left = [until - now_ms for name, until in alive.items() if name != instance and until >= now_ms]
    return min(left) if left else None


@dataclass(frozen=True)
class Beat:
    """What one heartbeat learnt: the instances the store now holds dead.

    ``dead`` maps each instance whose record expired within
    :data:`RETAIN_DEAD_MS` to its ``alive_until`` (store clock, epoch ms). A
    store that cannot check an owner inside the claim's atomic step (a Redis
    Cluster script cannot read a key of another slot) passes these pairs to it:
    a run whose owner is listed counts as dead only if it was last granted or
    renewed before that ``alive_until``, so a stale list never condemns a run
    the owner took after coming back.
    """

    dead: Mapping[str, int] = field(default_factory=dict)
    #: Milliseconds from the store's now until the first record of another live instance expires
    #: (:func:`soonest_expiry`), ``None`` when there is none. Filled by a heart whose
    #: :attr:`Heart.tells_next_expiry` says so; the others' instances beat every
    #: :data:`HEARTBEAT_MS` whether or not they hold a run.
    next_expiry_ms: int | None = None


class Heart(abc.ABC):
    """One instance's heartbeat on a connection of its own.

    Built by :meth:`anarchon.backend.LeaseBackend.heart`; every method is
    called from the heartbeat thread's own event loop, never the scheduler's,
    so :meth:`open` must make a new connection (pool) there, and nothing may be
    shared with the backend object but plain data.
    """

    #: Whether :meth:`beat` fills :attr:`Beat.next_expiry_ms`; only then may an instance that
    #: holds no run beat every :data:`IDLE_HEARTBEAT_MS` instead of every :data:`HEARTBEAT_MS`.
    tells_next_expiry: ClassVar[bool] = False

    @abc.abstractmethod
    async def open(self) -> None:
        """Connect; create the heartbeat table or key space if missing."""

    @abc.abstractmethod
    async def beat(self, instance: str, ttl_ms: int) -> Beat:
        """Set ``instance``'s record to ``store now + ttl_ms`` (create or revive it).

        Also delete records dead for longer than :data:`RETAIN_DEAD_MS`, and
        return the others that are dead. Raises when the store cannot be
        reached: the caller counts that beat as not acknowledged.
        """

    @abc.abstractmethod
    async def leave(self, instance: str) -> None:
        """Expire ``instance``'s record now (a clean stop): its leftover runs are taken over at once."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Close what :meth:`open` opened."""
