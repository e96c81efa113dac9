"""The audit trail in Redis: a stream and its counter, under one hash tag.

``<prefix>{audit}:trail`` is a stream with one entry per action (fields
``job`` and ``entry``), its ids ``<n>-0`` where ``n`` comes from
``<prefix>{audit}:counter``, so the contract's ids are whole numbers that
only grow; one script appends (:file:`lua/audit_append.lua`) and trims the
stream to about :data:`~anarchon.audit.AUDIT_KEEP` (``MAXLEN ~``: at least
that many stay, in O(1)). Reading newest first is ``XREVRANGE`` with
``COUNT``; by job, pages of the stream are read newest first and filtered
here, at most the whole trail once (an operator's command, not a poll).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from anarchon.audit import AUDIT_KEEP
from anarchon.options import check_job_name

from . import _scripts as S
from ._records import text

if TYPE_CHECKING:
    from ._names import Keyspace

__all__ = ["AuditMixin"]

#: Stream entries read per ``XREVRANGE`` while filtering by job.
PAGE = 1000


class AuditMixin:
    """Mixed into :class:`~anarchon_redis.RedisBackend`."""

    _keys: Keyspace
    #: How many entries the stream keeps, at least (a test may lower it).
    audit_keep: int = AUDIT_KEEP

    if TYPE_CHECKING:  # the backend's own, used here

        async def _call(self, script: S.Script, keys: list[str], args: list[Any]) -> Any: ...

        def _redis(self) -> Any: ...

    async def audit_append(self, job: str, entry: str) -> int:
        check_job_name(job)
        return int(await self._call(S.AUDIT_APPEND, list(self._keys.audit), [job, entry, self.audit_keep]))

    async def audit_entries(
        self, *, limit: int, before_id: int | None = None, job: str | None = None
    ) -> list[tuple[int, str]]:
        trail = self._keys.audit[0]
        out: list[tuple[int, str]] = []
        end = "+" if before_id is None else f"({before_id}-0"
        while len(out) < limit:
            want = limit - len(out) if job is None else PAGE
            page = await self._redis().xrevrange(trail, end, "-", count=want)
            for stream_id, fields in page:
                fields = {text(k): v for k, v in fields.items()}
                if job is None or text(fields.get("job", b"")) == job:
                    out.append((int(text(stream_id).split("-")[0]), text(fields.get("entry", b""))))
            if len(page) < want:
                break
            end = f"({text(page[-1][0])}"
        return out[:limit]
