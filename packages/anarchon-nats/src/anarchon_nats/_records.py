"""What the claim and result messages carry, and how history joins them.

Payloads are small JSON objects with a version field, so a later release can
read what an older one stored. A claim stands for a run that started; a
result, published when the run ends, supersedes it. A run whose runner died
has no result and stays ``running``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from anarchon.backend import Claim, Grant
from anarchon.errortext import clean_text
from anarchon.records import decode_run, skip
from anarchon.run import Run, RunStatus

__all__ = ["ClaimRecord", "decode_claim", "encode_claim", "encode_result", "join_history"]

_VERSION = 1

#: A run's identity within one job: its slot and whether it was started by hand.
RunKey = tuple[int, bool]


class ClaimRecord:
    """A claim as stored in the stream."""

    __slots__ = ("catch_up", "instance", "job", "manual", "missed", "slot_ms", "started_at_ms", "token")

    def __init__(
        self,
        *,
        job: str,
        slot_ms: int,
        instance: str,
        token: str,
        started_at_ms: int,
        manual: bool,
        catch_up: bool,
        missed: int,
    ) -> None:
        self.job = job
        self.slot_ms = slot_ms
        self.instance = instance
        self.token = token
        self.started_at_ms = started_at_ms
        self.manual = manual
        self.catch_up = catch_up
        self.missed = missed

    @property
    def key(self) -> RunKey:
        return (self.slot_ms, self.manual)

    def grant(self) -> Grant:
        return Grant(
            job=self.job,
            slot_ms=self.slot_ms,
            instance=self.instance,
            token=self.token,
            manual=self.manual,
            catch_up=self.catch_up,
            missed=self.missed,
            started_at_ms=self.started_at_ms,
        )

    def run(self) -> Run | None:
        """The ``running`` record this claim stands for; ``None`` (logged, counted) when its numbers cannot be."""
        return decode_run(
            {
                "job": self.job,
                "slot_ms": self.slot_ms,
                "status": RunStatus.RUNNING.value,
                "instance": self.instance,
                "manual": self.manual,
                "catch_up": self.catch_up,
                "missed": self.missed,
                "started_at": self.started_at_ms,
            },
            job=self.job,
        )


def encode_claim(c: Claim) -> bytes:
    return json.dumps(
        {
            "v": _VERSION,
            "job": c.job,
            "slot_ms": c.slot_ms,
            "instance": c.instance,
            "token": c.token,
            "started_at_ms": c.now_ms,
            "manual": c.manual,
            "catch_up": c.catch_up,
            "missed": c.missed,
        },
        separators=(",", ":"),
    ).encode()


def decode_claim(data: bytes | None) -> ClaimRecord | None:
    """The stored claim, or ``None`` for a message this backend did not write."""
    try:
        d = json.loads(data or b"")
        return ClaimRecord(
            job=str(d["job"]),
            slot_ms=int(d["slot_ms"]),
            instance=str(d["instance"]),
            token=str(d["token"]),
            started_at_ms=int(d["started_at_ms"]),
            manual=bool(d.get("manual", False)),
            catch_up=bool(d.get("catch_up", False)),
            missed=int(d.get("missed", 0)),
        )
    except (ValueError, TypeError, KeyError):
        return None


def encode_result(grant: Grant, run: Run) -> bytes:
    body: dict[str, Any] = {"v": _VERSION, "token": grant.token, **run.to_dict()}
    if run.error is not None:
        body["error"] = clean_text(run.error)  # bounded: a NATS message holds 1 MB at most
    return json.dumps(body, separators=(",", ":")).encode()


def decode_result(data: bytes | None, job: str) -> Run | None:
    """The result through the core's tolerant decoder: ``None`` (logged, counted) for a foreign message."""
    return decode_run(data or b"", job=job)


def join_history(messages: Iterable[tuple[str, bytes | None]], limit: int, job: str) -> list[Run]:
    """Runs from ``(kind, payload)`` pairs, kind ``"claims"`` or ``"results"``; newest slot first.

    A result wins over its claim. Results can outlive their claims (the claims
    subject fills first), so a result alone is a run too.
    """
    runs: dict[RunKey, Run] = {}
    finished: set[RunKey] = set()
    for kind, data in messages:
        if kind == "results":
            run = decode_result(data, job)
            if run is not None:
                key = (run.slot_ms, run.manual)
                runs[key] = run
                finished.add(key)
        elif kind == "claims":
            claim = decode_claim(data)
            if claim is None:
                skip(data, job=job, reason="not a claim this version wrote")
            elif claim.key not in finished and (running := claim.run()) is not None:
                runs[claim.key] = running
    ordered = sorted(runs.values(), key=lambda r: (r.slot_ms, r.manual), reverse=True)
    return ordered[:limit]
