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

from ._channels import ChannelPool

__all__ = ["claim_gate"]

log = logging.getLogger("anarchon.rabbitmq")

#: Declare retries after a channel error (a 3.10 declare race, or arguments that differ).
_ATTEMPTS = 4


def _body(c: Claim) -> bytes:
    return json.dumps(
        {"job": c.job.name, "slot_ms": c.slot_ms, "manual": c.manual, "instance": c.instance, "token": c.token},
        separators=(",", ":"),
    ).encode()


async def claim_gate(pool: ChannelPool, queue: str, arguments: dict[str, object], c: Claim, timeout: float) -> Outcome:
    """WON on the broker's ack, LOST on its nack, UNKNOWN when the answer was lost."""
    body = _body(c)
    passive = False
    for _ in range(_ATTEMPTS):
        async with pool.lend() as lent:
            props = spec.Basic.Properties(delivery_mode=2, content_type="application/json", message_id=c.token)
            try:
                if passive:
                    await lent.raw.queue_declare(queue, passive=True, nowait=True)
                else:
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
                # Declared by an instance with another slot_ttl_ms: use the queue as it is.
                lent.discard()
                log.debug("gate queue %s exists with other arguments (%s); claiming it as it is", queue, exc)
                passive = True
                continue
            except ChannelNotFoundEntity as exc:
                # RabbitMQ 3.10 declare race ("home node ... is down"), or a passive
                # declare of a gate that expired meanwhile: nothing was enqueued.
                lent.discard()
                log.debug("declaring gate queue %s failed (%s); trying again on a new channel", queue, exc)
                passive = False
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
