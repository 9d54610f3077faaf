"""Policy document types: JSON form, `allowed_actions`, `is_allowed` and wildcard matching."""

import pytest

from iam import (
    Condition,
    PolicyDocument,
    Principal,
    Statement,
    action_matches,
    allowed_actions,
    is_allowed,
)

DOC = PolicyDocument(
    statements=(
        Statement(
            sid="Scoped",
            actions=("ec2:CreateFleet", "ec2:RunInstances"),
            resources=("arn:aws:ec2:us-east-1:111122223333:fleet/*",),
            conditions=(
                Condition(operator="StringEquals", key="aws:RequestTag/a", values=("x",)),
                Condition(operator="StringEquals", key="aws:RequestTag/b", values=("y", "z")),
                Condition(operator="StringLike", key="aws:RequestTag/c", values=("*",)),
            ),
        ),
    )
)


def test_statement_json_groups_conditions_by_operator():
    assert DOC.to_json() == {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "Scoped",
                "Effect": "Allow",
                "Action": ["ec2:CreateFleet", "ec2:RunInstances"],
                "Resource": ["arn:aws:ec2:us-east-1:111122223333:fleet/*"],
                "Condition": {
                    "StringEquals": {"aws:RequestTag/a": "x", "aws:RequestTag/b": ["y", "z"]},
                    "StringLike": {"aws:RequestTag/c": "*"},
                },
            }
        ],
    }


def test_trust_statement_has_principal_and_no_resource():
    doc = PolicyDocument(
        statements=(
            Statement(
                sid="T",
                principal=Principal(kind="Service", values=("ec2.amazonaws.com",)),
                actions=("sts:AssumeRole",),
            ),
        )
    )
    stmt = doc.to_json()["Statement"][0]
    assert stmt["Principal"] == {"Service": "ec2.amazonaws.com"}
    assert "Resource" not in stmt
    assert Principal(kind="*").to_json() == "*"


def test_statement_lookup_by_sid():
    assert DOC.statement("Scoped").actions == ("ec2:CreateFleet", "ec2:RunInstances")
    with pytest.raises(KeyError):
        DOC.statement("Missing")


def test_allowed_actions_unions_allow_statements_of_typed_and_json_documents():
    raw = {
        "Statement": [
            {"Effect": "Allow", "Action": "sqs:ReceiveMessage", "Resource": "*"},
            {"Effect": "Deny", "Action": ["sqs:DeleteQueue"], "Resource": "*"},
        ]
    }
    assert allowed_actions([DOC, raw]) == {
        "ec2:CreateFleet",
        "ec2:RunInstances",
        "sqs:ReceiveMessage",
    }
    assert allowed_actions([]) == set()


def test_allowed_actions_accepts_a_single_statement_object():
    raw = {"Statement": {"Effect": "Allow", "Action": "eks:DescribeCluster", "Resource": "*"}}
    assert allowed_actions([raw]) == {"eks:DescribeCluster"}


def test_allowed_actions_rejects_not_action():
    raw = {"Statement": [{"Effect": "Allow", "NotAction": "iam:*", "Resource": "*"}]}
    with pytest.raises(ValueError, match="NotAction"):
        allowed_actions([raw])


@pytest.mark.parametrize(
    ("pattern", "action", "expected"),
    [
        pytest.param("ec2:CreateFleet", "ec2:CreateFleet", True, id="exact"),
        pytest.param("ec2:CreateFleet", "EC2:createfleet", True, id="case-insensitive"),
        pytest.param("ec2:Describe*", "ec2:DescribeSubnets", True, id="suffix-star"),
        pytest.param("ec2:Describe*", "ec2:CreateTags", False, id="suffix-star-miss"),
        pytest.param("ec2:*", "ec2:TerminateInstances", True, id="service-star"),
        pytest.param("*", "iam:PassRole", True, id="star"),
        pytest.param("ec2:*Instances", "ec2:RunInstances", True, id="prefix-star"),
        pytest.param("ec2:Get?", "ec2:GetX", True, id="question-mark"),
        pytest.param("ec2:Get?", "ec2:GetXY", False, id="question-mark-one-char"),
        pytest.param("ec2:Run.nstances", "ec2:RunInstances", False, id="dot-is-literal"),
        pytest.param("ec2:CreateFleet", "ec2:CreateFleetX", False, id="anchored"),
    ],
)
def test_action_matches(pattern, action, expected):
    assert action_matches(pattern, action) is expected


def test_is_allowed_with_wildcards_and_denies():
    allow = {"Statement": [{"Effect": "Allow", "Action": ["ec2:Describe*", "sqs:*"]}]}
    deny_all_delete = {"Statement": [{"Effect": "Deny", "Action": "sqs:Delete*"}]}
    deny_if_http = {
        "Statement": [
            {
                "Effect": "Deny",
                "Action": "sqs:*",
                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            }
        ]
    }
    assert is_allowed([allow], "ec2:DescribeInstanceTypes")
    assert not is_allowed([allow], "ec2:RunInstances")
    assert is_allowed([allow], "sqs:DeleteMessage")
    assert not is_allowed([allow, deny_all_delete], "sqs:DeleteMessage")
    assert is_allowed([allow, deny_if_http], "sqs:DeleteMessage"), "conditional deny ignored"
    assert not is_allowed([], "sqs:DeleteMessage")
    assert is_allowed([DOC], "ec2:runinstances")
