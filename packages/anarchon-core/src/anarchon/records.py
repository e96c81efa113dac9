"""One tolerant reader of stored run records, for every backend's history.

A store is shared: another version, a person with ``redis-cli``, or a broken
client can leave a record this version cannot read (not JSON, a field of the
wrong type, status ``bogus``, a ``slot_ms`` of ``1e20`` or ``Infinity``, a
time beyond what ``datetime`` holds). One such record must not make
``history()`` raise for the whole job, so :func:`decode_run` returns ``None``
for it, logs it once per job with the job's name and the reason, and counts
it (:func:`skipped_records`) for observers to report.

A record is JSON text (or bytes) or a mapping with the fields of
:class:`~anarchon.run.Run`: ``slot_ms``, ``status``, ``instance`` required;
``started_at``/``finished_at`` as a ``datetime``, ISO text or epoch
milliseconds; ``earlier`` (optional) a list of objects with ``attempt``,
``instance``, ``fencing`` and ``started_at``, read the same way. Backends with
other field names rename them before calling.

Public, for backends (re-exported by :mod:`anarchon.backend`).
"""

from __future__ import annotations

import json
import logging
import math
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any, TypeVar

from .errortext import clean_text
from .run import Attempt, Run, RunStatus

__all__ = ["RecordError", "decode_run", "read_runs", "reset_skipped", "skip", "skipped_records"]

Raw = TypeVar("Raw")

log = logging.getLogger("anarchon.records")

_lock = threading.Lock()
_skipped: Counter[str] = Counter()
#: The largest magnitude of epoch milliseconds a ``datetime`` holds on every platform (years 1 to 9999).
_MS_MIN, _MS_MAX = -62_135_596_800_000, 253_402_300_799_999
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


class RecordError(ValueError):
    """Why one stored record cannot be read."""


_MISSING: Any = object()


def _int(d: Mapping[str, Any], name: str, default: Any = _MISSING, *, minimum: int | None = None) -> Any:
    value = d.get(name, default)
    if value is _MISSING:
        raise RecordError(f"{name} is missing")
    if value is None and default is None:
        return None
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise RecordError(f"{name}={value!r} is not an integer")
    if not _MS_MIN <= value <= _MS_MAX or (minimum is not None and value < minimum):
        raise RecordError(f"{name}={value!r} is out of range")
    return value


def _flag(d: Mapping[str, Any], name: str) -> bool:
    value = d.get(name, False)
    if value in (None, 0, 1) or isinstance(value, bool):
        return bool(value)
    raise RecordError(f"{name}={value!r} is not a boolean")


def _text(d: Mapping[str, Any], name: str, *, optional: bool = False) -> str | None:
    value = d.get(name)
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise RecordError(f"{name}={value!r} is not text")
    return value


def _moment(d: Mapping[str, Any], name: str) -> datetime | None:
    value = d.get(name)
    if value is None:
        return None
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError as exc:
            raise RecordError(f"{name}={value!r} is not a time") from exc
    else:
        ms = _int(d, name)
        moment = _EPOCH + timedelta(milliseconds=ms)
    if moment.tzinfo is None:
        raise RecordError(f"{name}={value!r} has no time zone")
    return moment.astimezone(timezone.utc)


def _reject_constant(name: str) -> float:
    raise RecordError(f"{name} is not a number JSON allows")


def _earlier(d: Mapping[str, Any]) -> tuple[Attempt, ...]:
    items = d.get("earlier") or ()
    if not isinstance(items, (list, tuple)):
        raise RecordError(f"earlier={items!r} is not a list")
    attempts = []
    for item in items:
        if not isinstance(item, Mapping):
            raise RecordError(f"earlier holds {item!r}, not an object")
        attempts.append(
            Attempt(
                attempt=_int(item, "attempt", minimum=1),
                instance=_text(item, "instance") or "",
                fencing=_int(item, "fencing", None),
                started_at=_moment(item, "started_at"),
            )
        )
    return tuple(attempts)


def _parse(raw: str | bytes | bytearray | Mapping[str, Any], job: str) -> Run:
    if isinstance(raw, (str, bytes, bytearray)):
        try:
            data = json.loads(raw, parse_constant=_reject_constant)
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            raise RecordError(f"not JSON ({type(exc).__name__})") from exc
    else:
        data = raw
    if not isinstance(data, Mapping):
        raise RecordError(f"a {type(data).__name__}, not an object")
    try:
        status = RunStatus(data.get("status"))
    except ValueError:
        raise RecordError(f"status={data.get('status')!r} is not a run status") from None
    return Run(
        job=(_text(data, "job") or "") if "job" in data else job,
        slot_ms=_int(data, "slot_ms"),
        status=status,
        instance=_text(data, "instance") or "",
        attempt=_int(data, "attempt", 1, minimum=1),
        fencing=_int(data, "fencing", None),
        manual=_flag(data, "manual"),
        catch_up=_flag(data, "catch_up"),
        started_at=_moment(data, "started_at"),
        finished_at=_moment(data, "finished_at"),
        duration_ms=_int(data, "duration_ms", None, minimum=0),
        error=_text(data, "error", optional=True),
        missed=_int(data, "missed", 0, minimum=0),
        earlier=_earlier(data),
    )


def decode_run(raw: str | bytes | bytearray | Mapping[str, Any], *, job: str) -> Run | None:
    """The record as a :class:`Run`, or ``None`` (logged and counted) when it cannot be read."""
    try:
        return _parse(raw, job)
    except (RecordError, TypeError, OverflowError) as exc:
        skip(raw, job=job, reason=str(exc))
        return None


def skip(raw: object, *, job: str, reason: str) -> None:
    """Log (the first time per job, then at DEBUG) and count one record a backend cannot read."""
    with _lock:
        _skipped[job] += 1
        first = _skipped[job] == 1
    (log.warning if first else log.debug)(
        "job %s: skipped a history record this version cannot read (%s): %s; "
        "it was not written by anarchon, or by an incompatible version",
        job,
        reason,
        clean_text(repr(raw), 120),
    )


def skipped_records() -> dict[str, int]:
    """Per job, how many records :func:`decode_run` skipped in this process."""
    with _lock:
        return dict(_skipped)


def reset_skipped() -> None:
    with _lock:
        _skipped.clear()


async def read_runs(
    fetch: Callable[[int], Awaitable[Sequence[Raw]]], decode: Callable[[Raw], Run | None], limit: int
) -> list[Run]:
    """The newest ``limit`` readable runs, asking ``fetch(n)`` for the newest ``n`` stored records.

    Foreign records do not count against ``limit``: while some were skipped
    and the store holds more, a larger batch is fetched, so ``last_run()``
    still finds the newest run that can be read.
    """
    asked = limit
    while True:
        raws = await fetch(asked)
        runs = [run for run in map(decode, raws) if run is not None]
        if len(runs) >= limit or len(raws) < asked:
            return runs[:limit]
        asked += max(limit - len(runs), asked)
