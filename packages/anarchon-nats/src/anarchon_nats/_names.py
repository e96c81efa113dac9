"""Stream names, subjects and message IDs, and the checks that keep them safe.

Everything the backend sends to NATS is built here from checked parts, so a
job name or a prefix can never become a wildcard (``*``, ``>``) or reach into
another application's subjects.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

from anarchon.options import check_job_name
from anarchon.urls import redact_url

__all__ = [
    "audit_root",
    "audit_stream",
    "check_positive_int",
    "check_prefix",
    "check_stream_name",
    "claim_msg_id",
    "claims_subject",
    "covers",
    "decided_subject",
    "job_filter",
    "redact_server",
    "redact_servers",
    "result_msg_id",
    "results_subject",
    "schedule_subject",
    "schedules_root",
    "schedules_stream",
]

_STREAM_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_PREFIX = re.compile(r"(?:[A-Za-z0-9_-]+\.)+")
_PREFIX_MAX = 200


def check_stream_name(stream: object) -> str:
    if not isinstance(stream, str) or not _STREAM_NAME.fullmatch(stream):
        raise ValueError(
            f"stream={stream!r} is not a usable JetStream stream name: use 1 to 64 letters, digits, "
            "'_' or '-' (no dots, spaces or wildcards), for example stream='BILLING_CRON'"
        )
    return stream


def check_prefix(prefix: object) -> str:
    if not isinstance(prefix, str) or len(prefix) > _PREFIX_MAX or not _PREFIX.fullmatch(prefix):
        raise ValueError(
            f"prefix={prefix!r} is not a usable subject prefix: use dot-separated tokens of letters, "
            f"digits, '_' or '-', ending with a dot, at most {_PREFIX_MAX} characters (no wildcards "
            "'*' or '>', no spaces, no '$'), for example prefix='billing.cron.'"
        )
    return prefix


def claims_subject(prefix: str, job: str) -> str:
    return f"{prefix}{check_job_name(job)}.claims"


def results_subject(prefix: str, job: str) -> str:
    return f"{prefix}{check_job_name(job)}.results"


def job_filter(prefix: str, job: str) -> str:
    """The one filter that matches a job's claims and results and nothing else."""
    return f"{prefix}{check_job_name(job)}.*"


def claim_msg_id(job: str, slot_ms: int, manual: bool) -> str:
    """``<job>:<slot>`` as the seed says; manual runs get ``<job>:<slot>:manual``.

    Job names hold no ``:``, so the two forms never meet, and a manual run
    started in the same millisecond as a scheduled slot is still its own run.
    """
    return f"{check_job_name(job)}:{int(slot_ms)}:manual" if manual else f"{check_job_name(job)}:{int(slot_ms)}"


def result_msg_id(job: str, slot_ms: int, manual: bool) -> str:
    return f"{claim_msg_id(job, slot_ms, manual)}:result"


def schedules_stream(stream: str, prefix: str) -> str:
    """The stream of a namespace's stored schedules: ``<stream>_schedules_<digest>``.

    The digest is the first 12 hex digits of the SHA-256 of the prefix, so each
    namespace (stream and prefix) has a stream, and a counter, of its own, and
    the name stays a valid stream name (a prefix holds dots and may be 200 long).
    """
    digest = hashlib.sha256(check_prefix(prefix).encode()).hexdigest()[:12]
    return f"{check_stream_name(stream)}_schedules_{digest}"


def decided_subject(stream: str, prefix: str) -> str:
    """Where the namespace's won scheduled slots are told (ranked claims): a core subject no stream stores.

    ``$ANARCHON.<schedules stream>_decided``: its second token is not the schedules
    stream's, so neither that stream's subjects nor a ``<prefix>>`` stream cover it.
    """
    return f"$ANARCHON.{schedules_stream(stream, prefix)}_decided"


def schedules_root(stream: str, prefix: str) -> str:
    """Where the namespace's schedule subjects live: ``$ANARCHON.<schedules stream>``.

    Rooted at ``$ANARCHON``, which no checked prefix can start with, so the
    schedules stream never overlaps a backend's ``<prefix>>`` stream.
    """
    return f"$ANARCHON.{schedules_stream(stream, prefix)}"


def schedule_subject(stream: str, prefix: str, name: str) -> str:
    """One schedule's subject: its changes, oldest first, the last one its state."""
    return f"{schedules_root(stream, prefix)}.{check_job_name(name)}"


def audit_stream(stream: str, prefix: str) -> str:
    """The stream of a namespace's audit trail: ``<stream>_audit_<digest>`` (the digest: as for schedules)."""
    digest = hashlib.sha256(check_prefix(prefix).encode()).hexdigest()[:12]
    return f"{check_stream_name(stream)}_audit_{digest}"


def audit_root(stream: str, prefix: str) -> str:
    """Where the audit trail's subjects live: ``$ANARCHON.<audit stream>``; each entry on ``<root>.<job>``."""
    return f"$ANARCHON.{audit_stream(stream, prefix)}"


def covers(pattern: str, subject: str) -> bool:
    """Whether the stream subject ``pattern`` matches every subject ``subject`` matches."""
    ps, ss = pattern.split("."), subject.split(".")
    for i, p in enumerate(ps):
        if p == ">":
            return i < len(ss)
        if i >= len(ss) or ss[i] == ">":
            return False
        if p not in ("*", ss[i]):
            return False
    return len(ps) == len(ss)


def redact_server(url: str) -> str:
    """A server URL fit for logs: password and bare tokens (``nats://TOKEN@host``) masked, a malformed one whole."""
    return redact_url(url if "://" in url else f"nats://{url}")


def redact_servers(servers: Sequence[str]) -> list[str]:
    return [redact_server(s) for s in servers]


def check_positive_int(name: str, value: object, example: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name}={value!r} must be a positive integer; for example {name}={example}")
    return value
