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
    "BEAT",
    "CLAIM",
    "CLAIM_MANY",
    "CLAIM_PAUSED",
    "DUE",
    "FINISH",
    "HAND_OVER",
    "HISTORY",
    "LEAVE",
    "PAUSE",
    "PEEK",
    "PEEK_MANY",
    "RENEW",
    "REQUEST",
    "REQUESTS",
    "RESUME",
    "SETTLE",
    "TAKE_OVER",
    "TOUCH",
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


#: The loop of :func:`many`: ARGV starts with the keys and the arguments per call; the shared hint is the
#: last key. Each call runs in ``pcall``, so an error on one job's keys is that call's reply alone, as in
#: a pipeline; a plain loss comes back as ``0`` (the commonest answer, and the cheapest to parse).
_MANY = """
local per_keys, per_args = tonumber(ARGV[1]), tonumber(ARGV[2])
local calls = (#ARGV - 2) / per_args
local hint = #KEYS > calls * per_keys and KEYS[#KEYS] or nil
local out = {}
for i = 0, calls - 1 do
  local keys, args = {}, {}
  for j = 1, per_keys do keys[j] = KEYS[i * per_keys + j] end
  keys[per_keys + 1] = hint
  for j = 1, per_args do args[j] = ARGV[2 + i * per_args + j] end
  local ok, reply = pcall(one, keys, args)
  if not ok then
    reply = type(reply) == 'table' and reply.err and reply or {err = tostring(reply)}
  elseif type(reply) == 'table' and reply[1] == 'lost' and #reply == 1 then
    reply = 0
  end
  out[#out + 1] = reply
end
return out
"""


def many(name: str, *helpers: str) -> Script:
    """Script ``name`` run once per call of a batch, in one script: for one server only (keys span slots).

    A pipeline of one ``EVALSHA`` per claim spent most of a 10,000-claim
    burst in the client packing the commands and parsing the replies one by
    one; one script per few hundred claims costs a command each. The body is
    ``lua/<name>.lua`` unchanged, as a function of ``KEYS`` and ``ARGV``
    (the rules live in one file); the helpers stay outside it, made once.
    """
    parts = [(_LUA / "helpers" / f"{h}.lua").read_text(encoding="utf-8") for h in helpers]
    body = (_LUA / f"{name}.lua").read_text(encoding="utf-8")
    parts.append(f"local function one(KEYS, ARGV)\n{body}\nend")
    return Script(f"{name}_many", "\n".join(parts) + _MANY)


def load(name: str, *helpers: str) -> Script:
    """``lua/helpers/<helper>.lua`` for each helper, in order, then ``lua/<name>.lua``."""
    parts = [(_LUA / "helpers" / f"{h}.lua").read_text(encoding="utf-8") for h in helpers]
    parts.append((_LUA / f"{name}.lua").read_text(encoding="utf-8"))
    return Script(name, "\n".join(parts))


CLAIM = load("claim", "now_ms", "num", "drop_if_done", "trim", "has", "decode", "read_state", "dead")
CLAIM_MANY = many("claim", "now_ms", "num", "drop_if_done", "trim", "has", "decode", "read_state", "dead")
RENEW = load("renew", "now_ms", "num", "sync_hint", "decode", "owned")
FINISH = load("finish", "has", "sync_hint")
HAND_OVER = load("hand_over", "now_ms", "num", "sync_hint", "decode", "owned")
TAKE_OVER = load("take_over", "now_ms", "num", "sync_hint", "next_expiry", "decode", "read_state", "dead")
HISTORY = load("history")
DUE = load("due", "now_ms", "num")
PEEK = load("peek")
PEEK_MANY = load("peek_many")
TOUCH = load("touch", "now_ms", "num")
SETTLE = load("settle")
CLAIM_PAUSED = load("claim_paused", "now_ms", "num", "drop_if_done", "trim", "decode")
PAUSE = load("pause", "now_ms", "num")
RESUME = load("resume", "now_ms", "num")
REQUEST = load("request", "now_ms", "num")
REQUESTS = load("requests", "now_ms", "num")
BEAT = load("beat", "now_ms", "num")
LEAVE = load("leave", "now_ms", "num")
