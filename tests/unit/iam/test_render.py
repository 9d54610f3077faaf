"""Renderers: golden JSON and CloudFormation for the acceptance parameters, and their content."""

import json
from typing import Any

import yaml

from iam import allowed_actions, cloudformation_template, render_cloudformation, render_json


def _all_statements(document: dict[str, Any]) -> list[dict[str, Any]]:
    statements: list[dict[str, Any]] = document["Statement"]
    return statements


def _json_documents(out: dict[str, Any]) -> list[dict[str, Any]]:
    docs = list(out["controllerPolicies"].values())
    docs.append(out["nodeRole"]["trustPolicy"])
    docs.extend(out["controllerTrustPolicies"].values())
    docs.append(out["interruptionQueue"]["queuePolicy"])
    return docs


def test_json_golden(demo, golden):
    golden("demo.json", render_json(demo))


def test_cloudformation_golden(demo, golden):
    golden("demo.cloudformation.yaml", render_cloudformation(demo))


def test_json_is_valid_and_complete(demo):
    out = json.loads(render_json(demo))
    assert set(out) == {
        "parameters",
        "controllerPolicies",
        "nodeRole",
        "controllerTrustPolicies",
        "interruptionQueue",
    }
    assert len(out["controllerPolicies"]) == 5
    assert set(out["controllerTrustPolicies"]) == {"irsa", "podIdentity"}
    for doc in _json_documents(out):
        assert doc["Version"] == "2012-10-17"
        assert doc["Statement"]


def test_json_allows_no_wildcard_action(demo):
    out = json.loads(render_json(demo))
    for doc in _json_documents(out):
        for stmt in _all_statements(doc):
            if stmt["Effect"] == "Allow":
                assert not [a for a in stmt["Action"] if "*" in a], stmt
    # The one wildcard Jointer emits is the queue's TLS-only Deny, which grants nothing.
    wildcards = [
        (stmt["Sid"], stmt["Effect"])
        for doc in _json_documents(out)
        for stmt in _all_statements(doc)
        if any("*" in a for a in stmt["Action"])
    ]
    assert wildcards == [("DenyHTTP", "Deny")]


def test_json_controller_policies_match_typed_actions(demo):
    out = json.loads(render_json(demo))
    assert "ec2:CreateFleet" in allowed_actions(out["controllerPolicies"].values())


def test_cloudformation_is_plain_yaml_matching_the_template_data(demo):
    # safe_load rejects custom tags such as !Ref: intrinsics are in long form.
    assert yaml.safe_load(render_cloudformation(demo)) == cloudformation_template(demo)


def test_cloudformation_resources(demo):
    template = cloudformation_template(demo)
    resources = template["Resources"]
    types = {name: r["Type"] for name, r in resources.items()}
    assert types == {
        "JointerNodeRole": "AWS::IAM::Role",
        "JointerControllerNodeLifecyclePolicy": "AWS::IAM::ManagedPolicy",
        "JointerControllerIAMIntegrationPolicy": "AWS::IAM::ManagedPolicy",
        "JointerControllerEKSIntegrationPolicy": "AWS::IAM::ManagedPolicy",
        "JointerControllerInterruptionPolicy": "AWS::IAM::ManagedPolicy",
        "JointerControllerResourceDiscoveryPolicy": "AWS::IAM::ManagedPolicy",
        "JointerInterruptionQueue": "AWS::SQS::Queue",
        "JointerInterruptionQueuePolicy": "AWS::SQS::QueuePolicy",
        "JointerScheduledChangeRule": "AWS::Events::Rule",
        "JointerSpotInterruptionRule": "AWS::Events::Rule",
        "JointerRebalanceRule": "AWS::Events::Rule",
        "JointerInstanceStateChangeRule": "AWS::Events::Rule",
    }
    role = resources["JointerNodeRole"]["Properties"]
    assert role["RoleName"] == "JointerNodeRole-demo"
    assert len(role["ManagedPolicyArns"]) == 4
    assert (
        resources["JointerControllerNodeLifecyclePolicy"]["Properties"]["ManagedPolicyName"]
        == "JointerControllerNodeLifecyclePolicy-demo"
    )


def test_cloudformation_interruption_queue(demo):
    resources = cloudformation_template(demo)["Resources"]
    queue = resources["JointerInterruptionQueue"]["Properties"]
    assert queue == {
        "QueueName": "demo",
        "MessageRetentionPeriod": 300,
        "SqsManagedSseEnabled": True,
    }
    policy = resources["JointerInterruptionQueuePolicy"]["Properties"]
    assert policy["Queues"] == [{"Ref": "JointerInterruptionQueue"}]
    allow, deny = policy["PolicyDocument"]["Statement"]
    assert allow["Principal"] == {"Service": ["events.amazonaws.com", "sqs.amazonaws.com"]}
    assert allow["Action"] == ["sqs:SendMessage"]
    assert allow["Resource"] == ["arn:aws:sqs:us-east-1:111122223333:demo"]
    assert deny["Effect"] == "Deny"
    assert deny["Principal"] == "*"
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_cloudformation_event_rules_target_the_queue(demo):
    resources = cloudformation_template(demo)["Resources"]
    patterns = {
        name: (r["Properties"]["EventPattern"], r["Properties"]["Targets"])
        for name, r in resources.items()
        if r["Type"] == "AWS::Events::Rule"
    }
    expected = {
        "JointerScheduledChangeRule": ("aws.health", "AWS Health Event"),
        "JointerSpotInterruptionRule": ("aws.ec2", "EC2 Spot Instance Interruption Warning"),
        "JointerRebalanceRule": ("aws.ec2", "EC2 Instance Rebalance Recommendation"),
        "JointerInstanceStateChangeRule": ("aws.ec2", "EC2 Instance State-change Notification"),
    }
    for name, (source, detail_type) in expected.items():
        pattern, targets = patterns[name]
        assert pattern == {"source": [source], "detail-type": [detail_type]}
        assert targets == [
            {
                "Id": "JointerInterruptionQueueTarget",
                "Arn": {"Fn::GetAtt": ["JointerInterruptionQueue", "Arn"]},
            }
        ]
    assert set(patterns) == set(expected)
