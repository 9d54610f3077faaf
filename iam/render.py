"""Renderers: one JSON document with every policy, or a CloudFormation template.

Both render the same typed statements with concrete values (partition, region, account and
names are already resolved), so what a user deploys is byte-for-byte what the tests check.
Output is deterministic: no timestamps, stable key order.
"""

from __future__ import annotations

import json
from typing import Any, Final

import yaml

from iam.controller import controller_policies
from iam.documents import PolicyDocument
from iam.interruption import EVENT_RULES, MESSAGE_RETENTION_SECONDS, queue_policy
from iam.params import IamParameters
from iam.roles import irsa_trust_policy, node_role, pod_identity_trust_policy

_QUEUE_ID: Final = "JointerInterruptionQueue"


def policy_documents(params: IamParameters) -> dict[str, PolicyDocument]:
    """Return every policy document Jointer generates, by a stable name.

    Keys: each controller policy's IAM name, `NodeRoleTrustPolicy`, `IrsaTrustPolicy`,
    `PodIdentityTrustPolicy`, `InterruptionQueuePolicy`. Used by linters and tests.
    """
    docs: dict[str, PolicyDocument] = {p.name: p.document for p in controller_policies(params)}
    docs["NodeRoleTrustPolicy"] = node_role(params).trust_policy
    docs["IrsaTrustPolicy"] = irsa_trust_policy(params)
    docs["PodIdentityTrustPolicy"] = pod_identity_trust_policy(params)
    docs["InterruptionQueuePolicy"] = queue_policy(params)
    return docs


def render_json(params: IamParameters) -> str:
    """Render every policy as one JSON document (2-space indent, trailing newline).

    Top-level keys: `parameters`, `controllerPolicies` (IAM name -> document), `nodeRole`
    (name, arn, `trustPolicy`, `managedPolicyArns`), `controllerTrustPolicies` (`irsa`,
    `podIdentity`), `interruptionQueue` (name, arn, `queuePolicy`).
    """
    role = node_role(params)
    out: dict[str, Any] = {
        "parameters": {
            "partition": params.partition.name,
            "region": params.region,
            "accountId": params.account_id,
            "clusterName": params.cluster_name,
            "interruptionQueue": params.interruption_queue,
            "nodeRole": params.node_role_name,
            "namespace": params.namespace,
            "serviceAccount": params.service_account,
            "oidcProvider": params.oidc_provider_arn,
            "oidcProviderIsPlaceholder": params.oidc_provider_is_placeholder,
        },
        "controllerPolicies": {p.name: p.document.to_json() for p in controller_policies(params)},
        "nodeRole": {
            "name": role.name,
            "arn": role.arn,
            "trustPolicy": role.trust_policy.to_json(),
            "managedPolicyArns": list(role.managed_policy_arns),
        },
        "controllerTrustPolicies": {
            "irsa": irsa_trust_policy(params).to_json(),
            "podIdentity": pod_identity_trust_policy(params).to_json(),
        },
        "interruptionQueue": {
            "name": params.interruption_queue,
            "arn": params.queue_arn,
            "queuePolicy": queue_policy(params).to_json(),
        },
    }
    return json.dumps(out, indent=2) + "\n"


def cloudformation_template(params: IamParameters) -> dict[str, Any]:
    """Return the CloudFormation template as data.

    Resources: the controller managed policies, the node role, the interruption queue (SSE,
    5-minute retention), its TLS-only queue policy and the EventBridge rules targeting it.
    No instance profile: Jointer creates one per EC2NodeClass. No controller role: attach the
    policies to a role trusted as in `controllerTrustPolicies` of the JSON output.
    """
    role = node_role(params)
    resources: dict[str, Any] = {
        "JointerNodeRole": {
            "Type": "AWS::IAM::Role",
            "Properties": {
                "RoleName": role.name,
                "Path": "/",
                "AssumeRolePolicyDocument": role.trust_policy.to_json(),
                "ManagedPolicyArns": list(role.managed_policy_arns),
            },
        }
    }
    for policy in controller_policies(params):
        resources[f"JointerController{policy.logical_name}Policy"] = {
            "Type": "AWS::IAM::ManagedPolicy",
            "Properties": {
                "ManagedPolicyName": policy.name,
                "Description": policy.description,
                "PolicyDocument": policy.document.to_json(),
            },
        }
    resources[_QUEUE_ID] = {
        "Type": "AWS::SQS::Queue",
        "Properties": {
            "QueueName": params.interruption_queue,
            "MessageRetentionPeriod": MESSAGE_RETENTION_SECONDS,
            "SqsManagedSseEnabled": True,
        },
    }
    resources[f"{_QUEUE_ID}Policy"] = {
        "Type": "AWS::SQS::QueuePolicy",
        "Properties": {
            "Queues": [{"Ref": _QUEUE_ID}],
            "PolicyDocument": queue_policy(params).to_json(),
        },
    }
    for rule in EVENT_RULES:
        resources[f"Jointer{rule.logical_name}Rule"] = {
            "Type": "AWS::Events::Rule",
            "Properties": {
                "EventPattern": rule.event_pattern(),
                "Targets": [
                    {"Id": f"{_QUEUE_ID}Target", "Arn": {"Fn::GetAtt": [_QUEUE_ID, "Arn"]}}
                ],
            },
        }
    outputs: dict[str, Any] = {
        "NodeRoleArn": {"Value": {"Fn::GetAtt": ["JointerNodeRole", "Arn"]}},
        "InterruptionQueueName": {"Value": {"Fn::GetAtt": [_QUEUE_ID, "QueueName"]}},
    }
    for policy in controller_policies(params):
        outputs[f"Controller{policy.logical_name}PolicyArn"] = {
            "Value": {"Ref": f"JointerController{policy.logical_name}Policy"}
        }
    return {
        "AWSTemplateFormatVersion": "2010-09-09",
        "Description": (
            f"Jointer IAM and interruption resources for cluster {params.cluster_name} "
            f"({params.partition.name}, {params.region}, account {params.account_id}); "
            "generated by `jointer iam-policy --format cloudformation`"
        ),
        "Resources": resources,
        "Outputs": outputs,
    }


def render_cloudformation(params: IamParameters) -> str:
    """Render the CloudFormation template as YAML (plain YAML: intrinsics in long form)."""
    return yaml.safe_dump(
        cloudformation_template(params), sort_keys=False, default_flow_style=False, width=100
    )
