"""What the referee, as it is configured, can promise: the guarantee report.

One run per slot holds only as long as the store keeps what it acknowledged.
A Redis that keeps nothing on disk forgets every claim when it restarts; an
asynchronous standby promoted after a crash lacks the last claims; a stream
with one replica dies with its server. None of that shows in a claim's
answer, and no peer tells its users. So a backend with
``capabilities.guarantees`` reads its own settings (replicas and whether
claims wait for them, persistence, a read-only or recovering server, the
queue or stream type) and answers a list of :class:`Finding`:

* ``ok=True``: what it promises, in one sentence, and under which condition;
* ``ok=False``: a setting under which a failover, a restart or a full store
  can run a slot twice or lose it, with ``fix``, the change that removes it.

The scheduler logs the report once at start (each finding not ok as a
WARNING with its fix); ``anarchon check`` prints it, and ``--strict`` makes a
finding not ok fail the check. A finding the backend could not read (no
privilege, a command renamed) is reported as not ok, saying what was not read:
a guarantee nobody could check is not one.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from .capabilities import Capabilities
from .errortext import error_text

__all__ = ["Finding", "check_findings", "log_guarantees", "read_guarantees"]

log = logging.getLogger("anarchon.guarantees")


@dataclass(frozen=True)
class Finding:
    """One thing the referee promises (``ok``) or cannot promise (not ``ok``, with ``fix``)."""

    #: What the finding is about, one or two words: ``"persistence"``, ``"replicas"``, ``"role"``…
    topic: str
    ok: bool
    #: What holds or what can go wrong, in one sentence a user can act on.
    detail: str
    #: The change that makes it safe (required when not ``ok``).
    fix: str = ""

    def line(self) -> str:
        """The finding as ``anarchon check`` prints it."""
        text = f"{self.topic}: {self.detail}"
        return text if self.ok else f"{text}; fix: {self.fix}"


def check_findings(findings: Sequence[Finding]) -> list[Finding]:
    """A backend's answer, checked: at least one finding, each with a topic and a detail, a fix when not ok."""
    out = list(findings)
    if not out:
        raise ValueError("a guarantee report must hold at least one finding (say what the referee promises)")
    for f in out:
        if not isinstance(f, Finding) or not f.topic or not f.detail:
            raise ValueError(f"{f!r}: a finding needs a topic and a detail")
        if not f.ok and not f.fix:
            raise ValueError(f"{f!r}: a finding that is not ok needs a fix")
    return out


class Reporting(Protocol):
    """What the report needs of a backend (any :class:`~anarchon.backend.Backend`), named here so that
    this module, which ``backend.py`` imports for :class:`Finding`, does not import it back."""

    @property
    def name(self) -> str: ...

    @property
    def capabilities(self) -> Capabilities: ...

    async def guarantees(self) -> list[Finding]: ...


async def read_guarantees(backend: Reporting) -> list[Finding]:
    """The backend's report, or one finding saying that it gives none (capability off)."""
    if not backend.capabilities.guarantees:
        return [
            Finding(
                "report",
                False,
                f"backend {backend.name!r} does not report what it can promise across a failover or a restart",
                "read its documentation for its failover and restart behaviour",
            )
        ]
    return check_findings(await backend.guarantees())


async def log_guarantees(backend: Reporting) -> None:
    """Log the report once (at start): INFO for what holds, WARNING with the fix for what does not."""
    try:
        findings = await read_guarantees(backend)
    except Exception as exc:
        log.warning("could not read what backend %r promises: %s", backend, error_text(exc))
        return
    for f in findings:
        if f.ok or not backend.capabilities.guarantees:
            log.info("referee %r: %s", backend, f.line(), extra={"topic": f.topic, "ok": True})
        else:
            log.warning("referee %r: %s", backend, f.line(), extra={"topic": f.topic, "ok": False})
