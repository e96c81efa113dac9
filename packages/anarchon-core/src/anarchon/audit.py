"""The audit trail: who paused, resumed, triggered, backfilled or changed a schedule, when and why.

Every such action, from the CLI, the API or the dashboard, is recorded in
the backend (capability ``audit``) once it has happened, by one call of the
scheduler or of :class:`~anarchon.Schedules`, so no caller can forget it.
An entry is appended and never replaced: two pauses are two entries. ``by``
is the caller's ``by=`` (the dashboard passes the signed-in name), else
``user@host`` of the process (:func:`anarchon._identity.default_actor`).

Recording never undoes nor fails the action: a backend without the
capability records nothing (logged at DEBUG), and an append that fails is
logged as a warning. The trail keeps the newest :data:`AUDIT_KEEP` entries.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ._health import error_text
from .run import ms_to_datetime

if TYPE_CHECKING:
    from .backend import Backend

__all__ = ["ACTIONS", "AUDIT_KEEP", "AuditEntry", "decode_entry", "read_audit", "record_audit"]

#: How many entries a trail keeps; the append trims older ones by id (one indexed delete, never a scan).
AUDIT_KEEP = 100_000
#: What is recorded.
ACTIONS = ("pause", "resume", "trigger", "backfill", "schedule-add", "schedule-set", "schedule-remove")

log = logging.getLogger("anarchon.audit")


@dataclass(frozen=True)
class AuditEntry:
    """One action: ``job`` is the job or stored schedule it acted on; ``detail`` what else it said."""

    id: int
    at_ms: int
    by: str
    action: str
    job: str
    reason: str | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)

    @property
    def at(self) -> datetime:
        return ms_to_datetime(self.at_ms)

    def text(self) -> str:
        """What the backend stores (the id is the backend's, not in the text)."""
        data = {"at_ms": self.at_ms, "by": self.by, "action": self.action, "job": self.job, "reason": self.reason}
        return json.dumps({**data, "detail": dict(self.detail)}, sort_keys=True, separators=(",", ":"), default=str)

    def to_dict(self) -> dict[str, Any]:
        """For ``--json`` and the web."""
        at = self.at.isoformat().replace("+00:00", "Z")
        return {"id": self.id, "at": at, "at_ms": self.at_ms, "by": self.by, "action": self.action,
                "job": self.job, "reason": self.reason, "detail": dict(self.detail)}  # fmt: skip


def decode_entry(entry_id: int, text: str | bytes) -> AuditEntry:
    """The entry a stored text holds; ``ValueError`` saying why when it holds none."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    at_ms, by, action, job, reason = (data.get(k) for k in ("at_ms", "by", "action", "job", "reason"))
    detail = data.get("detail") or {}
    if isinstance(at_ms, bool) or not isinstance(at_ms, int) or not isinstance(detail, dict):
        raise ValueError(f"at_ms={at_ms!r} is not an integer, or detail is not an object")
    if not (isinstance(by, str) and isinstance(action, str) and isinstance(job, str)):
        raise ValueError("by, action and job must be text")
    if reason is not None and not isinstance(reason, str):
        raise ValueError(f"reason={reason!r} must be text or null")
    try:
        ms_to_datetime(at_ms)
    except (OverflowError, ValueError, OSError):
        raise ValueError(f"at_ms={at_ms} is out of range") from None
    return AuditEntry(entry_id, at_ms, by, action, job, reason, detail)


def _report(bad: list[tuple[int, str | bytes, str]]) -> None:
    """One warning per listing for the entries it skipped, with the first one's reason."""
    _, text, why = bad[0]
    ids = ", ".join(str(i) for i, _, _ in bad[:10]) + (", ..." if len(bad) > 10 else "")
    log.warning(
        "skipped %d audit entr%s this version cannot read (ids %s; the first: %s: %.120r): written by another "
        "program or an incompatible version",
        len(bad),
        "y" if len(bad) == 1 else "ies",
        ids,
        why,
        text,
    )


async def read_audit(
    backend: Backend, *, limit: int = 50, before_id: int | None = None, job: str | None = None
) -> list[AuditEntry]:
    """The newest ``limit`` readable entries (below ``before_id``, of ``job``), newest first.

    An entry that cannot be read is skipped, never fatal (one warning per call
    names them), and the next page is read so ``limit`` readable entries are
    returned when they exist.
    """
    out: list[AuditEntry] = []
    bad: list[tuple[int, str | bytes, str]] = []
    while len(out) < limit:
        want = limit - len(out)
        page = await backend.audit_entries(limit=want, before_id=before_id, job=job)
        for entry_id, text in page:
            try:
                out.append(decode_entry(entry_id, text))
            except ValueError as exc:
                bad.append((entry_id, text, str(exc)))
        if len(page) < want or not page:
            break
        before_id = page[-1][0]
    if bad:
        _report(bad)
    return out


async def record_audit(
    backend: Backend,
    action: str,
    job: str,
    *,
    by: str,
    reason: str | None = None,
    detail: Mapping[str, Any] | None = None,
) -> int | None:
    """Append one entry after the action happened; its id, ``None`` when nothing was recorded.

    Never raises: the action is done, and a trail that cannot be written must not
    make it look failed (nor make the caller retry it).
    """
    if not backend.capabilities.audit:
        log.debug("%s of %s by %s: backend %s keeps no audit trail", action, job, by, backend.name)
        return None
    try:
        at_ms = await backend.now_ms()
        entry = AuditEntry(0, at_ms, by, action, job, reason, dict(detail or {}))
        return await backend.audit_append(job, entry.text())
    except Exception as exc:
        log.warning("%s of %s by %s was done but not recorded in the audit trail: %s", action, job, by,
                    error_text(exc))  # fmt: skip
        return None
