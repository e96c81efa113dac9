"""How commands reach Redis: one script, a pipeline (``NOSCRIPT`` answers sent again as ``EVAL``), ``WAIT``,
and a call awaited so that the caller's cancellation is never lost. Redis's ``OOM`` refusal comes back as
:class:`~._full.RedisFullError`, which names the cause and the fix (:mod:`._full`).

Mixed into :class:`~anarchon_redis.RedisBackend`, as every optional part of a
backend here is (:mod:`._control`, :mod:`._backfill`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from redis.exceptions import NoScriptError, OutOfMemoryError, ResponseError

from . import _replicas
from . import _scripts as S
from ._full import Full, refused_for_memory

if TYPE_CHECKING:
    from ._names import Keyspace

__all__ = ["PER_SCRIPT", "Call", "CallsMixin", "each_reply", "keep_cancellation", "many_call"]

Call = tuple[S.Script, list[str], list[Any]]
T = TypeVar("T")

#: Calls per ``many()`` script (``CLAIM_MANY``, ``FINISH_MANY``) on one server: a few ms of the
#: server's time each, so other clients' commands (and the other instances' claims) get in between.
PER_SCRIPT = 250


def many_call(script: S.Script, part: Sequence[Call], hint: list[str]) -> Call:
    """One ``many()`` script for calls of one script (``lua/helpers/many.lua``), the shared hint last."""
    per_keys = len(part[0][1]) - len(hint)
    keys = [key for _, k, _ in part for key in k[:per_keys]]
    args: list[Any] = [per_keys, len(part[0][2]), *(arg for _, _, a in part for arg in a)]
    return script, keys + hint, args


def each_reply(reply: Any, n: int) -> list[Any]:
    """The ``n`` calls' own replies of a ``many()`` script; a script that failed as a whole fails each call."""
    return reply if isinstance(reply, list) and len(reply) == n else [reply] * n


class CallsMixin:
    """Mixed into :class:`~anarchon_redis.RedisBackend`."""

    cluster: bool
    min_replicas: int | None
    _replica_watch: _replicas.ReplicaWatch | _replicas.ClusterReplicaWatch
    replica_timeout_ms: int
    _keys: Keyspace
    _full: Full

    if TYPE_CHECKING:  # the backend's own, used here

        def _redis(self) -> Any: ...

    async def _call(self, script: S.Script, keys: list[str], args: list[Any]) -> Any:
        client = self._redis()
        try:
            try:
                return await client.evalsha(script.sha, len(keys), *keys, *args)
            except NoScriptError:
                return await client.eval(script.source, len(keys), *keys, *args)
        except OutOfMemoryError as exc:
            raise await self._full.error(client, keys[0] if keys else "") from exc

    async def _calls(self, calls: Sequence[Call], *, strict: int | None = None) -> list[Any]:
        """Run scripts in one pipeline; ``NOSCRIPT`` answers are sent again as ``EVAL``.

        ``NOSCRIPT`` means the script did not run, so sending it again is safe.
        An error in the first ``strict`` replies (all by default) is raised; the
        others are left in the list for the caller.
        """
        if len(calls) == 1:
            script, keys, args = calls[0]
            try:
                return [await self._call(script, keys, args)]
            except ResponseError as exc:
                if strict is None or strict > 0:
                    raise
                return [exc]
        return (await self._piped(calls, strict, 0))[0]

    def _replicas_to_wait(self) -> int | dict[str, int]:
        """How many replicas a write waits for now (per primary on a cluster): ``min_replicas``, or ``"auto"``'s."""
        if self.min_replicas is None:  # "auto": one replica while one is connected (per primary on a cluster)
            return self._replica_watch.wait_for(self._redis())
        return self.min_replicas

    async def _calls_waited(self, calls: Sequence[Call], *, strict: int | None = None) -> tuple[list[Any], list[bool]]:
        """:meth:`_calls`, and per call whether its write reached ``min_replicas`` (``WAIT``, :mod:`._replicas`)."""
        wait = self._replicas_to_wait()
        if not (any(wait.values()) if isinstance(wait, dict) else wait):
            return await self._calls(calls, strict=strict), [True] * len(calls)
        results, reached = await self._piped(calls, strict, wait)
        if not all(reached):
            self._replica_watch.stale()
        return results, reached

    async def _piped(
        self, calls: Sequence[Call], strict: int | None, wait: int | Mapping[str, int]
    ) -> tuple[list[Any], list[bool]]:
        results, reached = await self._pipeline([(s.sha, k, a, False) for s, k, a in calls], wait)
        missing = [i for i, r in enumerate(results) if isinstance(r, NoScriptError)]
        if missing:
            commands = [(calls[i][0].source, calls[i][1], calls[i][2], True) for i in missing]
            again, again_reached = await self._pipeline(commands, wait)
            for i, result, ok in zip(missing, again, again_reached, strict=True):
                results[i], reached[i] = result, ok
        for i, result in enumerate(results):
            if refused_for_memory(result):
                results[i] = await self._full.error(self._redis(), calls[i][1][0])
        for result in results[:strict]:
            if isinstance(result, Exception):
                raise result
        return results, reached

    async def _calls_apart(self, calls: Sequence[Call]) -> list[Any]:
        """Like :meth:`_calls`, each error left as that call's reply: the batcher hands them out.

        On one server the finishes of a batch go as ``FINISH_MANY`` scripts of
        up to :data:`PER_SCRIPT`: one script call per batch instead of one per
        run (a script call costs the server more than the few commands of a
        finish), as claims go as ``CLAIM_MANY``.
        """
        finishes = [i for i, call in enumerate(calls) if call[0] is S.FINISH]
        if self.cluster or len(finishes) < 2:  # on a cluster the runs' keys span slots
            return await self._calls(calls, strict=0)
        hint = self._hint()
        parts = [finishes[i : i + PER_SCRIPT] for i in range(0, len(finishes), PER_SCRIPT)]
        sent = [call for call in calls if call[0] is not S.FINISH]
        sent += [many_call(S.FINISH_MANY, [calls[i] for i in part], hint) for part in parts]
        replies = await self._calls(sent, strict=0)
        out: list[Any] = [None] * len(calls)
        others = iter(replies[: len(sent) - len(parts)])
        for i, call in enumerate(calls):
            if call[0] is not S.FINISH:
                out[i] = next(others)
        for part, reply in zip(parts, replies[len(sent) - len(parts) :], strict=True):
            for i, answer in zip(part, each_reply(reply, len(part)), strict=True):
                refused = refused_for_memory(answer)  # a refusal inside the script comes back per call
                out[i] = await self._full.error(self._redis(), calls[i][1][0]) if refused else answer
        return out

    async def _pipeline(
        self, commands: list[_replicas.Command], replicas: int | Mapping[str, int] = 0
    ) -> tuple[list[Any], list[bool]]:
        # auto on one server: a WAIT that fell short may be excused (ReplicaWatch.excused)
        watch = self._replica_watch if self.min_replicas is None else None
        one = watch if isinstance(watch, _replicas.ReplicaWatch) else None
        return await _replicas.pipeline(self._redis(), self.cluster, commands, replicas, self.replica_timeout_ms, one)

    def _hint(self) -> list[str]:
        """The hint as a script's last key, on one server only (it is another slot on a cluster)."""
        return [] if self.cluster else [self._keys.hint]


async def keep_cancellation(call: Awaitable[T]) -> T:
    """Await ``call`` in a task of its own, so a cancellation of the caller is never lost.

    redis-py can swallow a cancellation that arrives while it opens a
    connection (its connect timeout absorbs it), and the caller then carries
    on as if nothing had happened: the scheduler's clock-skew check went on to
    sleep its whole minute, and ``stop()`` right after ``start()`` took 60 s.
    ``asyncio.wait`` raises the caller's cancellation whatever the inner call does.
    """
    task = asyncio.ensure_future(call)
    try:
        await asyncio.wait((task,))
    except asyncio.CancelledError:
        task.cancel()
        task.add_done_callback(_retrieve)
        raise
    return task.result()


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()
