"""Creating the stream, or bringing an existing one up to what the backend needs.

The rules, from the backend's documentation:

* missing: created with subjects ``<prefix>>``, the duplicate window, the
  per-subject limit, file storage, and ``replicas`` (1 when unset);
* present with other settings: the duplicate window and the per-subject limit
  are raised to what this instance needs, ``<prefix>>`` is added to its
  subjects unless one of them already covers it, and its replicas are set to
  ``replicas`` when given, kept when not.

Both limits only ever go up: every instance of a fleet raises them to its own
need, so instances configured differently never undo each other, and the
stream keeps the largest need of all (the documentation's "one history size
for all of them").

The stored schedules' stream (:mod:`._schedules`) is made by the same rules,
with its own subjects, description and per-subject limit, and, when
``replicas`` is unset, the replicas of the backend's stream for a new one
(``new_replicas``).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from nats.js import JetStreamContext
from nats.js.api import DiscardPolicy, RetentionPolicy, StorageType, StreamConfig
from nats.js.errors import APIError, BadRequestError, NotFoundError, ServerError

from anarchon.errors import AnarchonError

from ._names import covers

__all__ = ["StreamConflictError", "StreamNeeds", "ensure_stream"]

log = logging.getLogger("anarchon.nats")

_NAME_IN_USE = 10058
#: "error creating store for stream": transient when creates of one name race, or a delete is still settling.
_STORE_FAILED = 10049
#: "no suitable peers for placement": transient while a cluster that just (re)started gathers its servers.
_NO_PEERS = 10005
_STREAM_NOT_FOUND = 10059
#: How often a lookup, create or update that met a transient answer is tried in all.
_TRIES = 6


class StreamConflictError(AnarchonError, RuntimeError):
    """The stream exists but cannot be brought to what the backend needs."""


@dataclass(frozen=True)
class StreamNeeds:
    name: str
    subject: str
    duplicate_window_ms: int
    per_subject: int
    #: Set on a new stream, and on an existing one when it has other replicas; ``None``: kept as it is.
    replicas: int | None
    description: str = "anarchon: claimed runs and their results"
    #: The replicas of a new stream when ``replicas`` is ``None`` (then 1 when this is ``None`` too).
    new_replicas: int | None = None


def _new_config(needs: StreamNeeds) -> StreamConfig:
    return StreamConfig(
        name=needs.name,
        description=needs.description,
        subjects=[needs.subject],
        retention=RetentionPolicy.LIMITS,
        storage=StorageType.FILE,
        discard=DiscardPolicy.OLD,
        max_msgs_per_subject=needs.per_subject,
        duplicate_window=needs.duplicate_window_ms / 1000,
        num_replicas=needs.replicas or needs.new_replicas or 1,
    )


def _updated(current: StreamConfig, needs: StreamNeeds) -> StreamConfig | None:
    """The config to send, or ``None`` when the stream already fits."""
    changes: dict[str, object] = {}
    subjects = list(current.subjects or [])
    if not any(covers(s, needs.subject) for s in subjects):
        changes["subjects"] = [*subjects, needs.subject]
    window_ms = round((current.duplicate_window or 0) * 1000)
    if window_ms < needs.duplicate_window_ms:
        changes["duplicate_window"] = needs.duplicate_window_ms / 1000
    per_subject = current.max_msgs_per_subject
    if per_subject is None or per_subject <= 0 or per_subject < needs.per_subject:
        changes["max_msgs_per_subject"] = needs.per_subject
    if needs.replicas is not None and current.num_replicas != needs.replicas:
        changes["num_replicas"] = needs.replicas
    return current.evolve(**changes) if changes else None


async def ensure_stream(js: JetStreamContext, needs: StreamNeeds) -> StreamConfig:
    """Create or update the stream; returns its config as the server holds it now.

    In a cluster, a server may not know a stream for a moment after another
    server created it: NATS 2.9 then answers "stream not found" (10059) to a
    lookup or an update there, and may leave a create of the same name
    unanswered. So an update answered "stream not found" right after the
    lookup found the stream starts over from the lookup after a short pause, a
    few times, before it is called a conflict. A lookup, create or update that
    got no answer starts over from the lookup too, up to ``_TRIES`` requests in
    all: a loaded cluster that has just elected its meta leader, or is placing
    a replicated stream, can leave a request unanswered for the request's
    timeout (CI: the third of five instances starting at once on a fresh
    three-node cluster with ``replicas=3``). A server without JetStream answers
    "no responders" at once, so it is not waited for.
    """
    for attempt in range(1, _TRIES + 1):
        retry = attempt < _TRIES
        try:
            info = await js.stream_info(needs.name)
        except NotFoundError:
            try:
                created = await js.add_stream(_new_config(needs))
                log.info("created JetStream stream %s for %s", needs.name, needs.subject)
                return created.config
            except asyncio.TimeoutError:
                if not retry:
                    raise
                log.info("creating stream %s got no answer; looking it up again", needs.name)
                continue
            except (BadRequestError, ServerError) as exc:
                # Another instance may have created it first: NATS answers "name in use", or, when the
                # two creates race, "subjects overlap" (with the stream of this very name) or, while
                # the winner's store is being made, "error creating store for stream".
                try:
                    info = await js.stream_info(needs.name)
                except NotFoundError:
                    if retry and exc.err_code in (_STORE_FAILED, _NO_PEERS):
                        await _pause(attempt)
                        continue
                    raise _conflict(needs, exc, "create") from exc
                if exc.err_code != _NAME_IN_USE:
                    log.info("stream %s was created by another instance meanwhile (%s)", needs.name, exc.description)
        except asyncio.TimeoutError:
            if not retry:
                raise
            log.info("looking up stream %s got no answer; asking again", needs.name)
            continue
        config = _updated(info.config, needs)
        if config is None:
            return info.config
        try:
            updated = await js.update_stream(config)
        except asyncio.TimeoutError:
            if not retry:
                raise
            log.info("updating stream %s got no answer; looking it up again", needs.name)
            continue
        except NotFoundError as exc:
            if retry and exc.err_code == _STREAM_NOT_FOUND:
                log.info("stream %s was found but its update says %r; looking it up again", needs.name, exc.description)
                await _pause(attempt)
                continue
            raise _conflict(needs, exc, "update") from exc
        except APIError as exc:
            raise _conflict(needs, exc, "update") from exc
        log.info(
            "updated JetStream stream %s: subjects %s, duplicate window %s s, %s messages per subject, %s replicas",
            needs.name,
            updated.config.subjects,
            updated.config.duplicate_window,
            updated.config.max_msgs_per_subject,
            updated.config.num_replicas,
        )
        return updated.config
    raise AssertionError("unreachable: the last try returns or raises")


async def _pause(attempt: int) -> None:
    await asyncio.sleep(0.1 * attempt)  # 1.5 s in all; the lag seen on a loaded 2.9 cluster was under 0.5 s


def _conflict(needs: StreamNeeds, exc: APIError, action: str) -> StreamConflictError:
    return StreamConflictError(
        f"could not {action} JetStream stream {needs.name!r} for subjects {needs.subject!r} "
        f"(duplicate window {needs.duplicate_window_ms} ms, {needs.per_subject} messages per subject, "
        f"replicas {needs.replicas if needs.replicas is not None else 'unchanged'}): {exc.description or exc}. "
        "Choose another stream= or prefix= (another stream may already hold these subjects), or fix the "
        "stream with `nats stream edit` (a max age shorter than the duplicate window is refused, and a "
        "cluster needs as many servers as replicas)"
    )
