"""Interruption end to end on moto: EventBridge rules -> SQS -> InterruptionConsumer ->
disruption requests; malformed messages are deleted and counted."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pytest

from cloudprovider.aws.interruption import (
    InterruptionConsumer,
    MalformedMessageError,
    parse_message,
)
from cloudprovider.interruption import (
    DisruptionAction,
    DisruptionKind,
    IndexedNodeClaim,
)
from tests.aws.harness import CLUSTER, AwsEnv

pytestmark = pytest.mark.aws

RULES = {
    "ScheduledChange": {"source": ["aws.health"], "detail-type": ["AWS Health Event"]},
    "SpotInterruption": {
        "source": ["aws.ec2"],
        "detail-type": ["EC2 Spot Instance Interruption Warning"],
    },
    "Rebalance": {"source": ["aws.ec2"], "detail-type": ["EC2 Instance Rebalance Recommendation"]},
    "InstanceStateChange": {
        "source": ["aws.ec2"],
        "detail-type": ["EC2 Instance State-change Notification"],
    },
}


@dataclass
class Index:
    claims: dict[str, IndexedNodeClaim] = field(default_factory=dict)

    def nodeclaim_for_instance(self, instance_id: str) -> IndexedNodeClaim | None:
        return self.claims.get(instance_id)


@pytest.fixture
def queue(aws: AwsEnv) -> str:
    url = aws.sqs.create_queue(QueueName=CLUSTER, Attributes={"MessageRetentionPeriod": "300"})[
        "QueueUrl"
    ]
    arn = aws.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    for name, pattern in RULES.items():
        aws.events.put_rule(Name=f"{CLUSTER}-{name}", EventPattern=json.dumps(pattern))
        aws.events.put_targets(Rule=f"{CLUSTER}-{name}", Targets=[{"Id": "1", "Arn": arn}])
    return str(url)


@pytest.fixture
def index() -> Index:
    return Index(
        {
            "i-0000000000000001": IndexedNodeClaim(
                name="default-spot1",
                instance_type="c5.large",
                zone="us-east-1a",
                capacity_type="spot",
            ),
        }
    )


@pytest.fixture
def consumer(aws: AwsEnv, queue: str, index: Index) -> InterruptionConsumer:
    return InterruptionConsumer(
        sqs=aws.sqs,
        caller=aws.caller,
        queue_name=CLUSTER,
        index=index,
        unavailable=aws.provider.unavailable,
        wait_seconds=0,
    )


def _emit(aws: AwsEnv, source: str, detail_type: str, detail: dict[str, Any]) -> None:
    result = aws.events.put_events(
        Entries=[
            {
                "Source": source,
                "DetailType": detail_type,
                "Detail": json.dumps(detail),
                "Resources": [],
            }
        ]
    )
    assert result["FailedEntryCount"] == 0


def _queue_depth(aws: AwsEnv, url: str) -> int:
    attributes = aws.sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(
        attributes["ApproximateNumberOfMessagesNotVisible"]
    )


@pytest.mark.parametrize(
    ("source", "detail_type", "detail", "kind", "action"),
    [
        pytest.param(
            "aws.ec2",
            "EC2 Spot Instance Interruption Warning",
            {"instance-id": "i-0000000000000001", "instance-action": "terminate"},
            DisruptionKind.SPOT_INTERRUPTED,
            DisruptionAction.CORDON_AND_DRAIN,
            id="spot-interruption",
        ),
        pytest.param(
            "aws.ec2",
            "EC2 Instance Rebalance Recommendation",
            {"instance-id": "i-0000000000000001"},
            DisruptionKind.REBALANCE_RECOMMENDATION,
            DisruptionAction.NO_ACTION,
            id="rebalance",
        ),
        pytest.param(
            "aws.health",
            "AWS Health Event",
            {
                "service": "EC2",
                "eventTypeCategory": "scheduledChange",
                "affectedEntities": [{"entityValue": "i-0000000000000001"}],
            },
            DisruptionKind.SCHEDULED_CHANGE,
            DisruptionAction.CORDON_AND_DRAIN,
            id="scheduled-change",
        ),
        pytest.param(
            "aws.ec2",
            "EC2 Instance State-change Notification",
            {"instance-id": "i-0000000000000001", "state": "stopping"},
            DisruptionKind.INSTANCE_STOPPED,
            DisruptionAction.CORDON_AND_DRAIN,
            id="state-stopping",
        ),
        pytest.param(
            "aws.ec2",
            "EC2 Instance State-change Notification",
            {"instance-id": "i-0000000000000001", "state": "terminated"},
            DisruptionKind.INSTANCE_TERMINATED,
            DisruptionAction.CORDON_AND_DRAIN,
            id="state-terminated",
        ),
    ],
)
def test_each_event_type_reaches_the_core_as_a_disruption_request(  # noqa: PLR0917
    aws: AwsEnv,
    queue: str,
    consumer: InterruptionConsumer,
    source,
    detail_type,
    detail,
    kind,
    action,
):
    _emit(aws, source, detail_type, detail)

    (request,) = consumer.poll()

    assert request.kind is kind
    assert request.action is action
    assert request.nodeclaim == "default-spot1"
    assert request.instance_id == "i-0000000000000001"
    assert _queue_depth(aws, queue) == 0
    spot_marked = aws.provider.unavailable.is_unavailable("spot", "c5.large", "us-east-1a")
    assert spot_marked is (kind is DisruptionKind.SPOT_INTERRUPTED)


def test_events_for_unknown_instances_and_running_states_are_deleted_without_requests(
    aws: AwsEnv, queue: str, consumer: InterruptionConsumer
):
    _emit(aws, "aws.ec2", "EC2 Spot Instance Interruption Warning", {"instance-id": "i-unknown"})
    _emit(
        aws,
        "aws.ec2",
        "EC2 Instance State-change Notification",
        {"instance-id": "i-0000000000000001", "state": "running"},
    )

    assert consumer.poll() == []
    assert consumer.handled == 2
    assert _queue_depth(aws, queue) == 0


def test_a_malformed_message_is_deleted_and_counted(
    aws: AwsEnv, queue: str, consumer: InterruptionConsumer
):
    aws.sqs.send_message(QueueUrl=queue, MessageBody="{not json")
    aws.sqs.send_message(QueueUrl=queue, MessageBody=json.dumps({"source": "x", "detail": {}}))
    _emit(
        aws,
        "aws.ec2",
        "EC2 Instance Rebalance Recommendation",
        {"instance-id": "i-0000000000000001"},
    )

    requests = consumer.poll()

    assert [r.kind for r in requests] == [DisruptionKind.REBALANCE_RECOMMENDATION]
    assert consumer.malformed == 2
    assert _queue_depth(aws, queue) == 0


@dataclass
class Observed:
    """A ``MessageObserver`` that records what it is told."""

    seen: list[tuple[str, object]] = field(default_factory=list)

    def received(self, message_type: str) -> None:
        self.seen.append(("received", message_type))

    def handled(self, event_time: datetime | None) -> None:
        self.seen.append(("handled", event_time))

    def deleted(self) -> None:
        self.seen.append(("deleted", None))


def test_the_observer_sees_every_message_as_karpenter_counts_it(
    aws: AwsEnv, queue: str, consumer: InterruptionConsumer
):
    consumer.observer = observed = Observed()
    aws.sqs.send_message(QueueUrl=queue, MessageBody="{not json")
    _emit(
        aws,
        "aws.ec2",
        "EC2 Spot Instance Interruption Warning",
        {"instance-id": "i-0000000000000001"},
    )
    _emit(
        aws,
        "aws.ec2",
        "EC2 Instance State-change Notification",
        {"instance-id": "i-0000000000000001", "state": "running"},
    )

    consumer.poll()

    kinds = sorted(str(v) for k, v in observed.seen if k == "received")
    assert kinds == ["no_op", "spot_interrupted"]  # the malformed one is not "received"
    handled = [v for k, v in observed.seen if k == "handled"]
    assert len(handled) == 2
    assert all(isinstance(t, datetime) for t in handled)  # EventBridge stamps every event
    assert [k for k, _ in observed.seen].count("deleted") == 3  # the malformed one too


@pytest.mark.parametrize(
    "body",
    [
        pytest.param("[]", id="array"),
        pytest.param(
            json.dumps(
                {
                    "source": "aws.ec2",
                    "detail-type": "EC2 Spot Instance Interruption Warning",
                    "detail": {},
                }
            ),
            id="no-instance",
        ),
        pytest.param(
            '{"source": "aws.health", "detail-type": "AWS Health Event", "detail": {}}',
            id="no-entities",
        ),
    ],
)
def test_parse_rejects_malformed_events(body: str):
    with pytest.raises(MalformedMessageError):
        parse_message(body)
