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
_CREATE_TRIES = 5


class StreamConflictError(AnarchonError, RuntimeError):
    """The stream exists but cannot be brought to what the backend needs."""


@dataclass(frozen=True)
class StreamNeeds:
    name: str
    subject: str
    duplicate_window_ms: int
    per_subject: int
    replicas: int | None


def _new_config(needs: StreamNeeds) -> StreamConfig:
    return StreamConfig(
        name=needs.name,
        description="anarchon: claimed runs and their results",
        subjects=[needs.subject],
        retention=RetentionPolicy.LIMITS,
        storage=StorageType.FILE,
        discard=DiscardPolicy.OLD,
        max_msgs_per_subject=needs.per_subject,
        duplicate_window=needs.duplicate_window_ms / 1000,
        num_replicas=needs.replicas or 1,
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
    """Create or update the stream; returns its config as the server holds it now."""
    for attempt in range(1, _CREATE_TRIES + 1):
        try:
            info = await js.stream_info(needs.name)
            break
        except NotFoundError:
            pass
        try:
            created = await js.add_stream(_new_config(needs))
            log.info("created JetStream stream %s for %s", needs.name, needs.subject)
            return created.config
        except (BadRequestError, ServerError) as exc:
            # Another instance may have created it first: NATS answers "name in use", or, when the
            # two creates race, "subjects overlap" (with the stream of this very name) or, while
            # the winner's store is being made, "error creating store for stream".
            try:
                info = await js.stream_info(needs.name)
            except NotFoundError:
                if exc.err_code == _STORE_FAILED and attempt < _CREATE_TRIES:
                    await asyncio.sleep(0.05 * attempt)
                    continue
                raise _conflict(needs, exc, "create") from exc
            if exc.err_code != _NAME_IN_USE:
                log.info("stream %s was created by another instance meanwhile (%s)", needs.name, exc.description)
            break
    config = _updated(info.config, needs)
    if config is None:
        return info.config
    try:
        updated = await js.update_stream(config)
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


def _conflict(needs: StreamNeeds, exc: APIError, action: str) -> StreamConflictError:
    return StreamConflictError(
        f"could not {action} JetStream stream {needs.name!r} for subjects {needs.subject!r} "
        f"(duplicate window {needs.duplicate_window_ms} ms, {needs.per_subject} messages per subject, "
        f"replicas {needs.replicas if needs.replicas is not None else 'unchanged'}): {exc.description or exc}. "
        "Choose another stream= or prefix= (another stream may already hold these subjects), or fix the "
        "stream with `nats stream edit` (a max age shorter than the duplicate window is refused, and a "
        "cluster needs as many servers as replicas)"
    )
