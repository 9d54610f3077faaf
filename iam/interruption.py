"""The interruption queue, its TLS-only queue policy and the EventBridge rules feeding it.

Per Karpenter's template (karpenter-aws.md §9), minus the CapacityReservationInterruption rule:
Jointer does not support capacity reservations yet, so it would only fill the queue with
messages it ignores.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from iam.documents import Condition, PolicyDocument, Principal, Statement
from iam.params import IamParameters

MESSAGE_RETENTION_SECONDS: Final = 300  # an interruption older than 5 minutes is moot


@dataclass(frozen=True, slots=True, kw_only=True)
class EventRule:
    """An EventBridge rule forwarding one kind of event to the queue.

    Attributes:
        logical_name: Suffix of the CloudFormation logical id (`ScheduledChange`).
        source: Event source (`aws.ec2`, `aws.health`).
        detail_type: Event detail-type.
    """

    logical_name: str
    source: str
    detail_type: str

    def event_pattern(self) -> dict[str, list[str]]:
        """Return the rule's EventBridge event pattern."""
        return {"source": [self.source], "detail-type": [self.detail_type]}


EVENT_RULES: Final = (
    EventRule(logical_name="ScheduledChange", source="aws.health", detail_type="AWS Health Event"),
    EventRule(
        logical_name="SpotInterruption",
        source="aws.ec2",
        detail_type="EC2 Spot Instance Interruption Warning",
    ),
    EventRule(
        logical_name="Rebalance",
        source="aws.ec2",
        detail_type="EC2 Instance Rebalance Recommendation",
    ),
    EventRule(
        logical_name="InstanceStateChange",
        source="aws.ec2",
        detail_type="EC2 Instance State-change Notification",
    ),
)


def queue_policy(params: IamParameters) -> PolicyDocument:
    """Return the queue's resource policy: EventBridge and SQS may send; TLS only.

    The deny names `sqs:*` on purpose: it is a guard that must cover every current and future
    SQS action, and a Deny grants nothing. It is the only wildcard action Jointer emits.
    """
    queue = (params.queue_arn,)
    return PolicyDocument(
        policy_id="EC2InterruptionPolicy",
        statements=(
            Statement(
                sid="AllowEventBridgeToSendInterruptions",
                principal=Principal(
                    kind="Service",
                    # Karpenter's template uses these names in every partition.
                    values=("events.amazonaws.com", "sqs.amazonaws.com"),
                ),
                actions=("sqs:SendMessage",),
                resources=queue,
            ),
            Statement(
                sid="DenyHTTP",
                effect="Deny",
                principal=Principal(kind="*"),
                actions=("sqs:*",),
                resources=queue,
                conditions=(
                    Condition(operator="Bool", key="aws:SecureTransport", values=("false",)),
                ),
            ),
        ),
    )
