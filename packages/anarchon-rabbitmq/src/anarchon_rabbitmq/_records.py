"""History in one stream queue per job: records appended, folded when read.

A run writes two records, ``running`` when it is won and its final record
when it ends; reading folds them by ``(slot_ms, manual)``, a final record
beating a ``running`` one whatever their order in the stream.

Streams are trimmed by bytes only (``x-max-length`` does not apply to them),
and only whole segments, oldest first, once the stream outgrows
``x-max-length-bytes``. So the size is estimated from a record budget: a
stream keeps at least ``x-max-length-bytes`` minus one segment, and the
arguments below leave ``history_size`` runs of full-budget records inside
that, with room to spare.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Iterable
from typing import Any

import aio_pika.abc
from aiormq.abc import DeliveredMessage
from aiormq.exceptions import ChannelNotFoundEntity

from anarchon.errortext import clean_text
from anarchon.records import decode_run, skip
from anarchon.run import Run, RunStatus

__all__ = [
    "ERROR_MAX_BYTES",
    "RECORD_BUDGET_BYTES",
    "decode_record",
    "encode_record",
    "fold",
    "read_stream",
    "stream_arguments",
]

log = logging.getLogger("anarchon.rabbitmq")

#: Bytes a record may take in the stream, framing included. Measured on
#: RabbitMQ 3.10: a usual record is 385 bytes of JSON and 660 on disk (each
#: record its own chunk); with a 100-character job name and instance id and
#: a cut error it is 846 bytes of JSON, about 1,120 on disk.
RECORD_BUDGET_BYTES = 1200
#: Longer error texts are cut (JSON-encoded size), so a record stays within its budget.
ERROR_MAX_BYTES = 300
#: A run writes a ``running`` record and a final one.
RECORDS_PER_RUN = 2
MIN_SEGMENT_BYTES = 64 * 1024

#: Deliveries in flight while reading a stream.
_PREFETCH = 1000


def stream_arguments(history_size: int) -> dict[str, Any]:
    needed = history_size * RECORDS_PER_RUN * RECORD_BUDGET_BYTES
    segment = max(needed // 4, MIN_SEGMENT_BYTES)
    return {
        "x-queue-type": "stream",
        "x-max-length-bytes": needed + 2 * segment,
        "x-stream-max-segment-size-bytes": segment,
    }


def _json_len(text: str) -> int:
    return len(json.dumps(text, ensure_ascii=False).encode())


def _cut(text: str | None) -> str | None:
    """The error text, cut so that it takes at most ERROR_MAX_BYTES once JSON-encoded."""
    if text is None or _json_len(text) <= ERROR_MAX_BYTES:
        return text
    low, high = 0, len(text)
    while low < high:  # the longest head that fits with its "..."
        mid = (low + high + 1) // 2
        if _json_len(text[:mid] + "...") <= ERROR_MAX_BYTES:
            low = mid
        else:
            high = mid - 1
    return text[:low] + "..."


def encode_record(token: str, run: Run) -> bytes:
    data = run.to_dict()
    data["error"] = _cut(None if run.error is None else clean_text(run.error))  # UTF-8 refuses lone surrogates
    return json.dumps({"v": 1, "token": token, "run": data}, separators=(",", ":"), ensure_ascii=False).encode()


def decode_record(body: bytes, job: str) -> tuple[str, Run] | None:
    """``None`` (logged and counted by the core's decoder) for a message that is not one of ours."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("token"), str) or not isinstance(data.get("run"), dict):
        skip(body, job=job, reason="not a JSON object with a token and a run")
        return None
    run = decode_run(data["run"], job=job)
    return None if run is None else (data["token"], run)


def fold(bodies: Iterable[bytes], limit: int, job: str) -> list[Run]:
    runs: dict[tuple[int, bool], Run] = {}
    for body in bodies:
        record = decode_record(body, job)
        if record is None:
            continue
        run = record[1]
        key = (run.slot_ms, run.manual)
        seen = runs.get(key)
        if seen is not None and seen.status is not RunStatus.RUNNING and run.status is RunStatus.RUNNING:
            continue
        runs[key] = run
    newest = sorted(runs.values(), key=lambda r: (r.slot_ms, r.manual), reverse=True)
    return newest[:limit]


async def read_stream(connection: aio_pika.abc.AbstractConnection, queue: str, timeout: float) -> list[bytes]:
    """Every record of a stream, oldest first, read on a channel of its own.

    A stream consumer never says it reached the end. The channel process
    delivers what the stream holds (up to the prefetch) before it answers a
    later synchronous method on the same channel, so the end is reached when
    two such round trips in a row, with every delivery acked before them,
    bring nothing new.
    """
    channel = await connection.channel(publisher_confirms=False)
    try:
        raw = await channel.get_underlay_channel()
        try:
            await raw.queue_declare(queue, passive=True, timeout=timeout)
        except ChannelNotFoundEntity:
            return []
        bodies: list[bytes] = []
        last_tag = 0

        async def on_message(message: DeliveredMessage) -> None:
            nonlocal last_tag
            bodies.append(message.body)
            last_tag = getattr(message.delivery, "delivery_tag", None) or last_tag

        await raw.basic_qos(prefetch_count=_PREFETCH, timeout=timeout)
        ok = await raw.basic_consume(queue, on_message, arguments={"x-stream-offset": "first"}, timeout=timeout)
        acked, seen, quiet = 0, -1, 0
        while quiet < 2:
            if last_tag > acked:
                await raw.basic_ack(last_tag, multiple=True)
                acked = last_tag
            await raw.basic_qos(prefetch_count=_PREFETCH, timeout=timeout)
            await asyncio.sleep(0)
            quiet = quiet + 1 if len(bodies) == seen else 0
            seen = len(bodies)
        if ok.consumer_tag is not None:
            await raw.basic_cancel(ok.consumer_tag, timeout=timeout)
        return bodies
    finally:
        with contextlib.suppress(Exception):
            await channel.close()
