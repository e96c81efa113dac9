"""A stream at its limits: one error that names the cause and the fix, and what the outage cost.

JetStream refuses a message it has no room for, and stores nothing of it:

* ``maximum messages exceeded``, ``maximum bytes exceeded``, ``maximum messages
  per subject exceeded`` (10077): the stream has an operator's ``max_msgs``,
  ``max_bytes`` (or per-subject limit) with ``discard new``; anarchon creates its
  stream with ``discard old`` and neither limit, so this is an edit of the stream;
* ``insufficient resources`` (10023): the server's JetStream storage
  (``max_file_store``, ``max_memory_store``) is used up, by any stream;
* ``resource limits exceeded for account`` (10002): the account's JetStream limit.

A refused claim was not stored, so it is never won and nothing runs twice; but
every claim is refused until there is room, so no slot runs. The scheduler
logs the first failure of an outage and retries each batch until its slots are
``max_late_ms`` late. So the text it logs must say what is full, by which limit,
and what to change: :meth:`Outage.error` builds it once per outage and cause
(one stream lookup, for the figures), and the batch raises it as one
:class:`StreamFullError`. The results and the registry's puts say the same.

What the outage cost is known only here: the scheduler drops a slot it could
not claim in time without a word. :class:`Outage` keeps the slots whose claims
were refused; once claims are answered again it waits for the retries still
under way (the scheduler retries every 2 s at most) and logs once how many of
them were claimed late and how many were never claimed (not run here).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence

from nats.js import JetStreamContext
from nats.js.api import PubAck, StreamConfig, StreamState
from nats.js.errors import APIError

from anarchon.backend import Claim
from anarchon.errors import BackendUnavailableError
from anarchon.run import RunId

__all__ = ["Outage", "StreamFullError", "is_full"]

log = logging.getLogger("anarchon.nats")

#: "maximum messages/bytes (per subject) exceeded": a stream limit with discard new.
STORE_FAILED = 10077
#: "insufficient resources": the server's JetStream storage is used up.
SERVER_FULL = 10023
#: "resource limits exceeded for account".
ACCOUNT_FULL = 10002
#: "insufficient storage/memory resources available": the same two, met when a stream or bucket is made.
STORAGE_FULL, MEMORY_FULL = 10047, 10028
#: After the first claim answered again, how long the retries still under way get before the cost is stated.
SETTLE_S = 3.0
#: How long a cause's text (with its figures) is reused before it is looked up again.
TEXT_TTL_S = 60.0
#: How long naming the limit may wait for the stream or account lookup.
LOOKUP_S = 2.0


class StreamFullError(BackendUnavailableError):
    """JetStream refused to store a message for want of room: a claim refused so was not stored, so not won."""


def is_full(answer: object) -> bool:
    """Whether ``answer`` is JetStream refusing a message for want of room (and not for another reason)."""
    if not isinstance(answer, APIError):
        return False
    if answer.err_code == STORE_FAILED:
        return "maximum" in (answer.description or "")  # other store failures are not a full stream
    return answer.err_code in (SERVER_FULL, ACCOUNT_FULL, STORAGE_FULL, MEMORY_FULL)


async def _stream(js: JetStreamContext, stream: str) -> tuple[StreamConfig | None, StreamState | None]:
    try:
        info = await asyncio.wait_for(js.stream_info(stream), LOOKUP_S)
    except Exception:  # the error is still worth naming without the figures
        return None, None
    return info.config, info.state


def describe(stream: str, exc: APIError, config: StreamConfig | None, state: StreamState | None) -> str:
    """The cause, with the limit's value and what the stream holds, and the fix."""
    said = exc.description or ""
    held = f"it holds {state.messages} messages, {state.bytes} bytes" if state is not None else "figures unavailable"
    if exc.err_code == STORE_FAILED:
        if "per subject" in said:
            name, value, flag = "max_msgs_per_subject", config and config.max_msgs_per_subject, "--max-msgs-per-subject"
        elif "bytes" in said:
            name, value, flag = "max_bytes", config and config.max_bytes, "--max-bytes"
        else:
            name, value, flag = "max_msgs", config and config.max_msgs, "--max-msgs"
        shown = value if value is not None else "?"
        cause = f"NATS stream {stream!r} is full: {name} {shown} reached with discard new ({held})"
        fix = (
            f"raise the stream's {name} (`nats stream edit {stream} {flag}=...`; it keeps about 2 messages per run "
            "and history_size runs per job), or set `--discard old` as anarchon creates it, so the oldest "
            "history makes room"
        )
    elif exc.err_code == ACCOUNT_FULL:
        cause = f"the NATS account's JetStream storage limit is reached (stream {stream!r}: {held})"
        fix = "raise the account's JetStream limit (max_file, or max_mem), or free storage: purge or delete streams"
    else:
        cause = (
            "the NATS server's JetStream storage is used up (its jetstream max_file_store, or max_memory_store; "
            f"stream {stream!r}: {held})"
        )
        fix = (
            "raise max_file_store in the server's jetstream configuration (or give its store_dir more disk), "
            "or free storage: purge or delete unused streams"
        )
    return (
        f"{cause} [{said}, err_code {exc.err_code}]: every new claim is refused and not stored, so no slot runs "
        "and none runs twice; a slot is retried until max_late_ms late and runs once there is room. Fix: "
        f"{fix}. anarchon recovers by itself"
    )


class Outage:
    """One backend's view of its full stream: the error text, the slots refused, what came of them.

    Idle, then *full* from the first refused claim, then *settling* from the
    first batch that shows the stream stores again, and idle once the cost is
    stated. A full stream still answers duplicates: an instance whose claim
    another stored just before the stream filled is told "duplicate", a good
    answer, and the scheduler would end its outage on it and log the next
    refusal as a new one (one warning per such batch, measured: 3 in 8 s). So
    while full, a batch answered only by duplicates of other instances' claims
    stored before the stream filled (sequence at most the stream's last when
    it filled) is no news: it raises the outage's error, and the claims are
    asked again until the stream stores or the slots are too late; either way
    this instance does not run them, as a "lost" answer would have said.
    """

    def __init__(self, stream: str) -> None:
        self.stream = stream
        #: Each cause's text and when it was made: reused for TEXT_TTL_S, so the figures stay those of now.
        self._texts: dict[tuple[str, int | None, str | None], tuple[str, float]] = {}
        self._since: float | None = None
        self._back: float | None = None
        #: The claims' refusal that started the outage, and the stream's last sequence then (``None``: unknown).
        self._cause: APIError | None = None
        self._full_seq: int | None = None
        #: Each refused slot and when it is past max_late_ms (epoch ms): no retry comes after that.
        self._refused: dict[RunId, int] = {}
        self._late = 0
        self._lost = 0
        self._summary: asyncio.TimerHandle | None = None

    async def error(self, js: JetStreamContext, exc: APIError, stream: str | None = None) -> StreamFullError:
        """The error for ``exc``, its text made once per cause and reused a while (no lookup per slot)."""
        stream = stream or self.stream
        key, now = (stream, exc.err_code, exc.description), time.monotonic()
        made = self._texts.get(key)
        if made is None or now - made[1] > TEXT_TTL_S:
            config, state = await _stream(js, stream)
            if stream == self.stream and state is not None and self._since is not None and self._full_seq is None:
                self._full_seq = state.last_seq
            made = self._texts[key] = (describe(stream, exc, config, state), now)
        return StreamFullError(made[0])

    async def check(
        self, js: JetStreamContext, acks: Sequence[PubAck | BaseException], claims: Sequence[Claim]
    ) -> None:
        """Raise for a batch some answer of which is an error; a full stream's refusal first, its slots counted."""
        failed = [a for a in acks if isinstance(a, BaseException)]
        if not failed:
            return
        full = next((a for a in failed if is_full(a)), None)
        if full is None:
            raise failed[0]
        assert isinstance(full, APIError)
        if self._since is None:
            self._since, self._cause = time.monotonic(), full
            self._texts.clear()  # a new outage: its figures, and the stream's last sequence, looked up now
        self._back = None
        if self._summary is not None:
            self._summary.cancel()  # full again before the last outage was stated: one outage
            self._summary = None
        now_ms = time.time_ns() // 1_000_000
        for c in claims:
            self._refused.setdefault(c.id, c.slot_ms + c.options.max_late_ms)
        for run_id in [r for r, past in self._refused.items() if past < now_ms]:
            del self._refused[run_id]  # never retried again: bounds the map to what can still run
            self._lost += 1
        raise await self.error(js, full) from None

    async def answered(
        self, js: JetStreamContext, acks: Sequence[PubAck | BaseException], claims: Sequence[Claim], won: bool
    ) -> None:
        """A batch was answered; raise if, while full, it shows nothing new (see the class), else count it."""
        if self._since is None:
            return
        last = self._full_seq
        stale = last is not None and all(
            isinstance(a, PubAck) and a.duplicate and a.seq is not None and a.seq <= last for a in acks
        )
        if stale and self._back is None and not won and self._cause is not None:
            raise await self.error(js, self._cause)
        for c in claims:
            if self._refused.pop(c.id, None) is not None:
                self._late += 1
        if self._back is None and not stale:  # stored since it filled: there is room again
            self._back = time.monotonic()
            self._summary = asyncio.get_running_loop().call_later(SETTLE_S, self.state)

    async def results(
        self, js: JetStreamContext, acks: Sequence[PubAck | BaseException]
    ) -> list[PubAck | BaseException]:
        """Results' answers, a full stream's refusal replaced by the outage's error."""
        full = next((a for a in acks if is_full(a)), None)
        if full is None:
            return list(acks)
        assert isinstance(full, APIError)
        if self._since is None:
            # A finish refused first starts the outage as a claim does: without its last sequence, the
            # stale duplicates that follow read as the stream storing again, and the outage was logged twice.
            self._since, self._cause = time.monotonic(), full
            self._texts.clear()
        error = await self.error(js, full)
        return [error if is_full(a) else a for a in acks]

    def state(self) -> None:
        """Log once what the outage cost: slots claimed late, and slots never claimed (not run here)."""
        if self._summary is not None:
            self._summary.cancel()
            self._summary = None
        if self._since is None:
            return
        lost = self._lost + len(self._refused)
        full_s = (self._back or time.monotonic()) - self._since
        log.log(
            logging.WARNING if lost else logging.INFO,
            "NATS stream %r: claims refused for want of room for %.1f s; of the slots refused, %d claimed late "
            "once there was room, %d never claimed (not run by this instance: past max_late_ms%s)",
            self.stream,
            full_s,
            self._late,
            lost,
            "" if self._back is not None else ", or the scheduler stopped while the stream was full",
            extra={"stream": self.stream, "full_s": full_s, "claimed_late": self._late, "not_run": lost},
        )
        self._texts.clear()
        self._refused.clear()
        self._since = self._back = self._cause = self._full_seq = None
        self._late = self._lost = 0
