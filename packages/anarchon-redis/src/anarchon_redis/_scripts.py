"""The Lua scripts: each lease operation is one atomic step on one job's keys.

They do what :class:`anarchon.memory.MemoryStore` does under its lock, on the
server's clock (``TIME``). A run record is JSON (``cjson``) with times in
epoch milliseconds; ``live`` holds exactly the running runs, scored by lease
expiry, so finding dead or live leases never scans history.

The sources are plain ``.lua`` files shipped in the wheel (``lua/``, helpers
in ``lua/helpers/``), loaded with :mod:`importlib.resources`. The one
templating step is explicit and below: a script is the helpers it names,
in that order, followed by its body. Helpers are not shared by every script
since a closure costs a script a microsecond or so on every call.

One job's broken keys stop only that job: a record that is not one of ours
is skipped (``decode``), a state hash whose numbers are not integers is an
error reply before anything is written (``read_state``), and the shared
hint is written with ``pcall`` so a wrong type there stops no claim.

On a single server the scripts also keep the per-prefix hint (job name ->
earliest lease expiry) up to date, passed as the last key: exact, or earlier
than the truth (then a take-over pass looks and sets it right), never later. On Redis Cluster that
key lives in another slot, so it is left out and the client keeps the hint
with ``TOUCH`` and ``SETTLE``; see :mod:`anarchon_redis.backend`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from importlib.resources import files

__all__ = [
    "AUDIT_APPEND",
    "BEAT",
    "CLAIM",
    "CLAIM_MANY",
    "CLAIM_PAUSED",
    "DUE",
    "FINISH",
    "FINISH_MANY",
    "GROUP_STATES",
    "HAND_OVER",
    "HISTORY",
    "LEAVE",
    "PAUSE",
    "PEEK",
    "PEEK_MANY",
    "PLACES",
    "REGISTER",
    "REGISTERED",
    "REGISTRY_KEEP",
    "RENEW",
    "REQUEST",
    "REQUESTS",
    "RESUME",
    "SCHEDULE_GET",
    "SCHEDULE_PUT",
    "SETTLE",
    "SET_GROUP",
    "TAKE_OVER",
    "TOUCH",
    "UNREGISTER",
    "Script",
    "load",
]

_LUA = files(__package__) / "lua"


@dataclass(frozen=True)
class Script:
    """A script's source and SHA1, computed locally: no load round trip needed.

    Callers send ``EVALSHA`` and fall back to ``EVAL`` (which also caches the
    script) on ``NOSCRIPT``: after a restart, failover, or on a new cluster node.
    """

    name: str
    source: str
    sha: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sha", hashlib.sha1(self.source.encode(), usedforsecurity=False).hexdigest())


def many(name: str, *helpers: str) -> Script:
    """Script ``name`` run once per call of a batch, in one script: for one server only (keys span slots).

    A pipeline of one ``EVALSHA`` per claim spent most of a 10,000-claim
    burst in the client packing the commands and parsing the replies one by
    one; one script per few hundred claims costs a command each. The body is
    ``lua/<name>.lua`` unchanged, as a function of ``KEYS`` and ``ARGV``
    (the rules live in one file); the helpers stay outside it, made once.
    """
    parts = [(_LUA / "helpers" / f"{h}.lua").read_text(encoding="utf-8") for h in (*helpers, "tell")]
    body = (_LUA / f"{name}.lua").read_text(encoding="utf-8")
    parts.append(f"local function one(KEYS, ARGV)\n{body}\nend")
    parts.append((_LUA / "helpers" / "many.lua").read_text(encoding="utf-8"))
    return Script(f"{name}_many", "\n".join(parts))


def load(name: str, *helpers: str) -> Script:
    """``lua/helpers/<helper>.lua`` for each helper, in order, then ``lua/<name>.lua``.

    A body that tells (helper ``tell``) runs as a function, so what it told is sent whichever
    ``return`` it left by.
    """
    parts = [(_LUA / "helpers" / f"{h}.lua").read_text(encoding="utf-8") for h in helpers]
    body = (_LUA / f"{name}.lua").read_text(encoding="utf-8")
    if "tell" in helpers:
        body = f"local function one(KEYS, ARGV)\n{body}\nend\nlocal reply = one(KEYS, ARGV)\nsend_told()\nreturn reply"
    parts.append(body)
    return Script(name, "\n".join(parts))


CLAIM = load("claim", "now_ms", "num", "drop_if_done", "trim", "has", "decode", "read_state", "dead", "tell")
CLAIM_MANY = many("claim", "now_ms", "num", "drop_if_done", "trim", "has", "decode", "read_state", "dead")
RENEW = load("renew", "now_ms", "num", "sync_hint", "decode", "owned")
FINISH = load("finish", "has", "sync_hint")
FINISH_MANY = many("finish", "has", "sync_hint")
HAND_OVER = load("hand_over", "now_ms", "num", "sync_hint", "decode", "owned")
TAKE_OVER = load("take_over", "now_ms", "num", "sync_hint", "next_expiry", "decode", "read_state", "dead")
HISTORY = load("history")
DUE = load("due", "now_ms", "num")
PEEK = load("peek")
PEEK_MANY = load("peek_many")
MARKS = load("marks")
TOUCH = load("touch", "now_ms", "num")
SETTLE = load("settle")
CLAIM_PAUSED = load("claim_paused", "now_ms", "num", "drop_if_done", "trim", "decode")
PAUSE = load("pause", "now_ms", "num")
RESUME = load("resume", "now_ms", "num")
REQUEST = load("request", "now_ms", "num")
REQUESTS = load("requests", "now_ms", "num")
BEAT = load("beat", "now_ms", "num")
LEAVE = load("leave", "now_ms", "num")
REGISTER = load("register", "now_ms", "num")
REGISTRY_KEEP = load("registry_keep", "now_ms", "num")
UNREGISTER = load("unregister")
REGISTERED = load("registered", "now_ms", "num")
SCHEDULE_PUT = load("schedule_put", "now_ms", "num")
SCHEDULE_GET = load("schedule_get")
SCHEDULE_FORGET = load("schedule_forget")
FORGET = load("forget", "now_ms", "num")
AUDIT_APPEND = load("audit_append")
PLACES = load("places", "now_ms", "holders")
SET_GROUP = load("set_group")
GROUP_STATES = load("group_states", "now_ms", "holders")
