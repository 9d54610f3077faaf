"""Provider-neutral interruption messages: what a cloud tells the core about its instances.

A provider's interruption consumer (AWS: SQS fed by EventBridge) turns cloud events into
:class:`DisruptionRequest` values; the core's interruption controller acts on them (cordon and
drain: taint, replace first, delete the NodeClaim by the deadline). The consumer reports what it
does with its messages to a :class:`MessageObserver` (the core's Karpenter interruption metrics).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Final, Protocol

__all__ = [
    "NO_OP",
    "DisruptionAction",
    "DisruptionKind",
    "DisruptionRequest",
    "IndexedNodeClaim",
    "MessageObserver",
    "NoObserver",
    "NodeClaimIndex",
]

NO_OP: Final = "no_op"
"""Karpenter's message kind of an event that asks for nothing (the ``message_type`` label)."""


class DisruptionKind(StrEnum):
    """Karpenter's interruption message kinds (the ``reason`` metric label)."""

    SPOT_INTERRUPTED = "spot_interrupted"
    REBALANCE_RECOMMENDATION = "rebalance_recommendation"
    SCHEDULED_CHANGE = "scheduled_change"
    INSTANCE_STOPPED = "instance_stopped"
    INSTANCE_TERMINATED = "instance_terminated"
    CAPACITY_RESERVATION_INTERRUPTED = "capacity_reservation_interrupted"


class DisruptionAction(StrEnum):
    """What the core should do with the NodeClaim."""

    CORDON_AND_DRAIN = "CordonAndDrain"
    NO_ACTION = "NoAction"


@dataclass(frozen=True, slots=True, kw_only=True)
class DisruptionRequest:
    """One NodeClaim the cloud says is (about to be) disrupted.

    Attributes:
        kind: what happened.
        action: what the core should do.
        instance_id: the cloud's instance id.
        nodeclaim: the NodeClaim's name.
        message_id: the cloud message id (for logs and deduplication).
        event_time: when the cloud says the event happened, if it says.
    """

    kind: DisruptionKind
    action: DisruptionAction
    instance_id: str
    nodeclaim: str
    message_id: str = ""
    event_time: datetime | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class IndexedNodeClaim:
    """What the interruption handler needs to know about a NodeClaim found by instance id.

    Attributes:
        name: the NodeClaim name.
        instance_type: its ``node.kubernetes.io/instance-type`` label ("" if unknown).
        zone: its ``topology.kubernetes.io/zone`` label ("" if unknown).
        capacity_type: its ``karpenter.sh/capacity-type`` label ("" if unknown).
    """

    name: str
    instance_type: str = ""
    zone: str = ""
    capacity_type: str = ""


class NodeClaimIndex(Protocol):
    """Finds NodeClaims by instance id (Karpenter's ``status.instanceID`` field index)."""

    def nodeclaim_for_instance(self, instance_id: str) -> IndexedNodeClaim | None:
        """The NodeClaim whose instance is ``instance_id``, or None."""
        ...


class MessageObserver(Protocol):
    """What a consumer does with its queue's messages (Karpenter's interruption metrics)."""

    def received(self, message_type: str) -> None:
        """A message was parsed: its kind, or :data:`NO_OP`."""
        ...

    def handled(self, event_time: datetime | None) -> None:
        """A message was handled; ``event_time`` is when the cloud says it happened."""
        ...

    def deleted(self) -> None:
        """A message was deleted from the queue (handled or malformed)."""
        ...


class NoObserver:
    """A :class:`MessageObserver` that counts nothing."""

    def received(self, message_type: str) -> None:
        """Nothing."""
        del message_type

    def handled(self, event_time: datetime | None) -> None:
        """Nothing."""
        del event_time

    def deleted(self) -> None:
        """Nothing."""
