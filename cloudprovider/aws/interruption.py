"""The interruption queue consumer: EventBridge messages in SQS -> neutral disruption requests.

EventBridge rules route EC2 spot interruption warnings, rebalance recommendations, AWS Health
scheduled changes and instance state changes into the cluster's SQS queue (karpenter-aws.md §9).
:meth:`InterruptionConsumer.poll` receives up to 10 messages, parses each by
(``source``, ``detail-type``), maps instance ids to NodeClaims through the injected
:class:`~cloudprovider.interruption.NodeClaimIndex`, marks the spot offering unavailable on a spot
interruption, and returns :class:`~cloudprovider.interruption.DisruptionRequest` values for the
core. Every message is deleted once handled; malformed ones are logged, deleted and counted. The
injected :class:`~cloudprovider.interruption.MessageObserver` sees each message received (by
kind), handled and deleted, as Karpenter's interruption metrics count them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final

from cloudprovider.aws.retry import Caller
from cloudprovider.aws.sdk import SqsApi
from cloudprovider.aws.unavailable import UnavailableOfferings
from cloudprovider.interruption import (
    NO_OP,
    DisruptionAction,
    DisruptionKind,
    DisruptionRequest,
    MessageObserver,
    NodeClaimIndex,
    NoObserver,
)
from provisioner.apis.labels import CAPACITY_TYPE_SPOT

__all__ = [
    "MAX_MESSAGES",
    "POLL_INTERVAL",
    "VISIBILITY_TIMEOUT_SECONDS",
    "InterruptionConsumer",
    "MalformedMessageError",
    "ParsedMessage",
    "parse_message",
]

MAX_MESSAGES: Final = 10
VISIBILITY_TIMEOUT_SECONDS: Final = 20
# Karpenter long-polls 20 s; the reconciler asks again right after.
DEFAULT_WAIT_SECONDS: Final = 20
POLL_INTERVAL: Final = timedelta(seconds=0)

_SPOT: Final = ("aws.ec2", "EC2 Spot Instance Interruption Warning")
_REBALANCE: Final = ("aws.ec2", "EC2 Instance Rebalance Recommendation")
_STATE_CHANGE: Final = ("aws.ec2", "EC2 Instance State-change Notification")
_HEALTH: Final = ("aws.health", "AWS Health Event")
_STOPPED_STATES: Final = frozenset({"stopping", "stopped"})
_TERMINATED_STATES: Final = frozenset({"shutting-down", "terminated"})


class MalformedMessageError(ValueError):
    """A queue message that is not an interruption event Jointer understands."""


@dataclass(frozen=True, slots=True)
class ParsedMessage:
    """One event: what happened to which instances (no kind: nothing to do)."""

    kind: DisruptionKind | None
    instance_ids: tuple[str, ...]
    event_time: datetime | None = None


def _time(event: Mapping[str, Any]) -> datetime | None:
    raw = event.get("time")
    if not isinstance(raw, str):
        return None
    try:
        return datetime.fromisoformat(raw)
    except ValueError:
        return None


def _instance_id(detail: Mapping[str, Any]) -> str:
    instance_id = detail.get("instance-id")
    if not isinstance(instance_id, str) or not instance_id:
        raise MalformedMessageError("detail.instance-id missing")
    return instance_id


def parse_message(body: str) -> ParsedMessage:
    """Parse one EventBridge envelope.

    Raises:
        MalformedMessageError: not JSON, not an object, or an unknown (source, detail-type).
    """
    try:
        event = json.loads(body)
    except json.JSONDecodeError as error:
        raise MalformedMessageError(f"not JSON: {error}") from error
    if not isinstance(event, dict) or not isinstance(event.get("detail"), dict):
        raise MalformedMessageError("not an EventBridge event with a detail object")
    detail: dict[str, Any] = event["detail"]
    key = (event.get("source"), event.get("detail-type"))
    when = _time(event)
    if key == _SPOT:
        return ParsedMessage(DisruptionKind.SPOT_INTERRUPTED, (_instance_id(detail),), when)
    if key == _REBALANCE:
        return ParsedMessage(DisruptionKind.REBALANCE_RECOMMENDATION, (_instance_id(detail),), when)
    if key == _STATE_CHANGE:
        state = detail.get("state")
        kind = (
            DisruptionKind.INSTANCE_STOPPED
            if state in _STOPPED_STATES
            else DisruptionKind.INSTANCE_TERMINATED
            if state in _TERMINATED_STATES
            else None
        )
        return ParsedMessage(kind, (_instance_id(detail),), when)
    if key == _HEALTH:
        entities = detail.get("affectedEntities")
        if not isinstance(entities, list):
            raise MalformedMessageError("detail.affectedEntities missing")
        ids = tuple(
            str(e["entityValue"])
            for e in entities
            if isinstance(e, dict) and str(e.get("entityValue", "")).startswith("i-")
        )
        relevant = detail.get("service") == "EC2" and detail.get("eventTypeCategory") == (
            "scheduledChange"
        )
        return ParsedMessage(DisruptionKind.SCHEDULED_CHANGE if relevant else None, ids, when)
    raise MalformedMessageError(f"unknown event source/detail-type {key!r}")


def _action(kind: DisruptionKind) -> DisruptionAction:
    if kind is DisruptionKind.REBALANCE_RECOMMENDATION:
        return DisruptionAction.NO_ACTION
    return DisruptionAction.CORDON_AND_DRAIN


@dataclass(slots=True, kw_only=True)
class InterruptionConsumer:
    """Polls the interruption queue and turns messages into disruption requests.

    Attributes:
        sqs: the SQS client.
        caller: the classified-error caller.
        queue_name: ``INTERRUPTION_QUEUE`` (the queue URL is looked up once).
        index: finds NodeClaims by instance id.
        unavailable: the ICE cache (spot interruptions mark their offering).
        wait_seconds: long-poll time (0 in tests).
        logger: where handled and malformed messages are logged.
        observer: sees every message received, handled and deleted (the metrics).
        malformed: how many malformed messages were dropped (for the metric).
        handled: how many messages were handled.
    """

    sqs: SqsApi
    caller: Caller
    queue_name: str
    index: NodeClaimIndex
    unavailable: UnavailableOfferings
    wait_seconds: int = DEFAULT_WAIT_SECONDS
    logger: logging.Logger = field(
        default_factory=lambda: logging.getLogger("jointer.interruption")
    )
    observer: MessageObserver = field(default_factory=NoObserver)
    malformed: int = 0
    handled: int = 0
    _queue_url: str | None = None

    def queue_url(self) -> str:
        """The queue's URL (looked up once)."""
        if self._queue_url is None:
            response = self.caller.call(
                "getting interruption queue url", self.sqs.get_queue_url, QueueName=self.queue_name
            )
            self._queue_url = response["QueueUrl"]
        return self._queue_url

    def poll(self) -> list[DisruptionRequest]:
        """Receive, handle and delete one batch of messages."""
        url = self.queue_url()
        response = self.caller.call(
            "receiving interruption messages",
            self.sqs.receive_message,
            QueueUrl=url,
            MaxNumberOfMessages=MAX_MESSAGES,
            VisibilityTimeout=VISIBILITY_TIMEOUT_SECONDS,
            WaitTimeSeconds=self.wait_seconds,
            MessageSystemAttributeNames=["SentTimestamp"],
            MessageAttributeNames=["All"],
        )
        requests: list[DisruptionRequest] = []
        for message in response.get("Messages", []):
            message_id = message.get("MessageId", "")
            try:
                parsed = parse_message(message.get("Body", ""))
            except MalformedMessageError as error:
                self.malformed += 1
                self.logger.warning("failed parsing interruption message %s: %s", message_id, error)
            else:
                self.observer.received(str(parsed.kind or NO_OP))
                requests.extend(self._handle(parsed, message_id))
                self.handled += 1
                self.observer.handled(parsed.event_time)
            self.caller.call(
                "deleting interruption message",
                self.sqs.delete_message,
                QueueUrl=url,
                ReceiptHandle=message.get("ReceiptHandle", ""),
            )
            self.observer.deleted()
        return requests

    def _handle(self, parsed: ParsedMessage, message_id: str) -> list[DisruptionRequest]:
        if parsed.kind is None:
            return []
        requests = []
        for instance_id in parsed.instance_ids:
            claim = self.index.nodeclaim_for_instance(instance_id)
            if claim is None:
                continue
            if (
                parsed.kind is DisruptionKind.SPOT_INTERRUPTED
                and claim.instance_type
                and claim.zone
            ):
                self.unavailable.mark_unavailable(
                    CAPACITY_TYPE_SPOT, claim.instance_type, claim.zone
                )
            self.logger.info(
                "interruption %s for nodeclaim %s (instance %s)",
                parsed.kind,
                claim.name,
                instance_id,
            )
            requests.append(
                DisruptionRequest(
                    kind=parsed.kind,
                    action=_action(parsed.kind),
                    instance_id=instance_id,
                    nodeclaim=claim.name,
                    message_id=message_id,
                    event_time=parsed.event_time,
                )
            )
        return requests
