"""Deciding one run: declare its gate queue, publish one claim, read the confirm.

The gate holds one message and rejects the rest (``x-max-length 1``,
``x-overflow reject-publish``), so of all the publishes the broker orders,
the one it acks is the winner and every later one is nacked. The declare is
sent without waiting (``nowait``) and the publish right behind it on the same
channel, so a claim costs one round trip: if the declare fails, the broker
closes the channel and discards the publish that followed it, which is why a
channel error (and only that) is safe to retry.
"""

from __future__ import annotations

import json
import logging

from aiormq.exceptions import (
    ChannelAccessRefused,
    ChannelNotFoundEntity,
    ChannelPreconditionFailed,
    DeliveryError,
    PublishError,
)
from pamqp import commands as spec

from anarchon.backend import Claim, Outcome

from ._arguments import difference
from ._channels import ChannelPool

__all__ = ["claim_gate"]

log = logging.getLogger("anarchon.rabbitmq")

#: Declare retries after a channel error (a 3.10 declare race, or arguments that differ).
_ATTEMPTS = 4


def _body(c: Claim) -> bytes:
    return json.dumps(
        {"job": c.job, "slot_ms": c.slot_ms, "manual": c.manual, "instance": c.instance, "token": c.token},
        separators=(",", ":"),
    ).encode()


async def claim_gate(pool: ChannelPool, queue: str, arguments: dict[str, object], c: Claim, timeout: float) -> Outcome:
    """WON on the broker's ack, LOST on its nack, UNKNOWN when the answer was lost or the gate is not one.

    A gate that exists with another ``x-expires`` (an instance with another
    ``slot_ttl_ms``) is used with that value, as the seed says; one without
    ``x-max-length 1`` and ``x-overflow reject-publish`` (declared plain by
    someone else, or by an older version) would let every publish in, so the
    slot answers UNKNOWN and is never run from it.
    """
    body = _body(c)
    arguments = dict(arguments)
    for _ in range(_ATTEMPTS):
        async with pool.lend() as lent:
            props = spec.Basic.Properties(delivery_mode=2, content_type="application/json", message_id=c.token)
            try:
                await lent.raw.queue_declare(queue, durable=True, arguments=arguments, nowait=True)
                answer = await lent.raw.basic_publish(
                    body, routing_key=queue, properties=props, mandatory=True, timeout=timeout
                )
            except PublishError:
                # The gate vanished between declare and publish (deleted by hand):
                # nothing was enqueued, but a fresh queue would have forgotten the run.
                log.warning("gate queue %s disappeared before the claim reached it; not running it", queue)
                return Outcome.UNKNOWN
            except DeliveryError as exc:
                return Outcome.LOST if isinstance(exc.frame, spec.Basic.Nack) else Outcome.UNKNOWN
            except ChannelPreconditionFailed as exc:
                lent.discard()
                found = difference(exc)
                if found is not None and found.argument == "x-expires":
                    # Declared by an instance with another slot_ttl_ms: declare it with its own expiry.
                    expires = found.integer()
                    if expires is None:
                        arguments.pop("x-expires", None)
                    else:
                        arguments["x-expires"] = expires
                    log.debug("gate queue %s has x-expires %s; declaring it with that", queue, found.current)
                    continue
                log.error(
                    "job %s, slot %s: gate queue %s exists without the arguments a gate needs "
                    "(x-max-length 1, x-overflow reject-publish): %s; not running this slot, since every "
                    "instance could win it. Delete that queue, and find who declares it",
                    c.job,
                    c.slot_ms,
                    queue,
                    exc,
                )
                return Outcome.UNKNOWN
            except ChannelNotFoundEntity as exc:
                # RabbitMQ 3.10 declare race ("home node ... is down"): nothing was enqueued.
                lent.discard()
                log.debug("declaring gate queue %s failed (%s); trying again on a new channel", queue, exc)
                continue
            except ChannelAccessRefused:
                lent.discard()
                raise
            except Exception as exc:
                # Connection lost, channel closed, timeout: the publish may have
                # filled the gate. Never run what might have been won elsewhere.
                lent.discard()
                log.warning("claim of %s got no answer (%s: %s); not running it", queue, type(exc).__name__, exc)
                return Outcome.UNKNOWN
            return Outcome.WON if isinstance(answer, spec.Basic.Ack) else Outcome.UNKNOWN
    log.warning("gate queue %s could not be declared after %d attempts; not running it", queue, _ATTEMPTS)
    return Outcome.UNKNOWN
