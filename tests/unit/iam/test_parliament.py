"""parliament (offline IAM linter) finds nothing in the generated documents beyond known false
positives.

Each statement is analysed on its own, so a finding is attributed to (document, Sid, issue), and
each whole document is analysed too, so parliament's cross-statement checks also run and may add
nothing. parliament lints identity policies: a trust policy statement has no `Resource`, so the
test gives each trust statement the ARN of the role it guards as `Resource` (an identity-policy
view of "who may assume this role") instead of allow-listing parliament's MALFORMED finding —
that way parliament still checks its actions and condition keys.
"""

import json
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from iam import IamParameters, policy_documents

with warnings.catch_warnings():
    # parliament 1.6.4 leaves two data files open at import (ResourceWarning) and has
    # non-raw regex strings (DeprecationWarning when compiled); pytest runs with -W error.
    warnings.simplefilter("ignore")
    import parliament  # type: ignore[import-untyped]

CONTROLLER_ROLE = "arn:{partition}:iam::111122223333:role/JointerController-demo"

# Known false positives, (document key without the cluster suffix, Sid, parliament issue).
# The test fails if any of these stops occurring, so the list cannot go stale.
KNOWN_FALSE_POSITIVES = {
    # Karpenter's split launch statements: RunInstances/CreateFleet need image, subnet,
    # security group, launch template, instance, ... together, but each resource type gets its
    # own statement because the conditions differ (request tags only exist on what is
    # created; resource tags only on launch templates). parliament wants every required
    # resource type in every statement; test_split_statements_cover_every_required_resource
    # proves the statements together do cover them.
    (
        "JointerControllerNodeLifecyclePolicy",
        "AllowScopedEC2InstanceAccessActions",
        "RESOURCE_MISMATCH",
    ),
    (
        "JointerControllerNodeLifecyclePolicy",
        "AllowScopedEC2LaunchTemplateAccessActions",
        "RESOURCE_MISMATCH",
    ),
    (
        "JointerControllerNodeLifecyclePolicy",
        "AllowScopedEC2InstanceActionsWithTags",
        "RESOURCE_MISMATCH",
    ),
    # AWS-owned public parameters have an empty account: arn:aws:ssm:<region>::parameter/aws/
    # service/... . parliament's ARN matcher (is_arn_match) never lets an empty account
    # segment match the `*` of its format arn:*:ssm:*:*:parameter/*.
    ("JointerControllerResourceDiscoveryPolicy", "AllowSSMReadActions", "RESOURCE_MISMATCH"),
    # parliament recognises SAML providers and four web identity providers, not IAM OIDC
    # providers, and does not know the provider-defined `<issuer>:sub` / `<issuer>:aud`
    # condition keys that AWS documents for IRSA.
    ("IrsaTrustPolicy", "AllowControllerServiceAccountWebIdentity", "UNKNOWN_FEDERATION_SOURCE"),
    ("IrsaTrustPolicy", "AllowControllerServiceAccountWebIdentity", "UNKNOWN_CONDITION_FOR_ACTION"),
}

TRUST_POLICIES = {"NodeRoleTrustPolicy", "IrsaTrustPolicy", "PodIdentityTrustPolicy"}


def _documents(params: IamParameters) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield (key, JSON document) with trust statements given the guarded role as Resource."""
    for key, doc in policy_documents(params).items():
        data = doc.to_json()
        if key in TRUST_POLICIES:
            role = (
                params.node_role_arn
                if key == "NodeRoleTrustPolicy"
                else CONTROLLER_ROLE.format(partition=params.partition.name)
            )
            for stmt in data["Statement"]:
                stmt["Resource"] = role
        yield key.removesuffix(f"-{params.cluster_name}"), data


def _findings(document: dict[str, Any]) -> list[Any]:
    policy = parliament.analyze_policy_string(json.dumps(document, indent=2))
    return [parliament.enhance_finding(f) for f in policy.findings]


def _per_statement_findings(params: IamParameters) -> dict[tuple[str, str, str], list[Any]]:
    found: dict[tuple[str, str, str], list[Any]] = {}
    for key, data in _documents(params):
        for stmt in data["Statement"]:
            single = {"Version": data["Version"], "Statement": [stmt]}
            for finding in _findings(single):
                found.setdefault((key, stmt["Sid"], finding.issue), []).append(finding)
    return found


@pytest.mark.parametrize("region", ["us-east-1", "cn-north-1", "us-gov-west-1"])
def test_only_known_false_positives(region):
    params = IamParameters.create(cluster_name="demo", account_id="111122223333", region=region)
    found = _per_statement_findings(params)
    unexpected = {k: [f"{f.severity} {f.detail}" for f in v] for k, v in found.items()}
    for known in KNOWN_FALSE_POSITIVES:
        unexpected.pop(known, None)
    assert unexpected == {}
    assert set(found) == KNOWN_FALSE_POSITIVES, "an allow-listed finding no longer occurs"
    for findings in found.values():
        assert all(f.severity in {"LOW", "MEDIUM"} for f in findings)


def test_whole_documents_add_no_finding(demo):
    per_statement: dict[str, list[str]] = {}
    for (key, _, issue), findings in _per_statement_findings(demo).items():
        per_statement.setdefault(key, []).extend(issue for _ in findings)
    for key, data in _documents(demo):
        issues = sorted(f.issue for f in _findings(data))
        assert issues == sorted(per_statement.get(key, [])), key


def test_split_statements_cover_every_required_resource(demo):
    """For each RESOURCE_MISMATCH in NodeLifecycle, another statement names the missing type."""
    [(_, lifecycle)] = [
        (k, d) for k, d in _documents(demo) if k == "JointerControllerNodeLifecyclePolicy"
    ]
    for stmt in lifecycle["Statement"]:
        single = {"Version": "2012-10-17", "Statement": [stmt]}
        for finding in _findings(single):
            assert finding.issue == "RESOURCE_MISMATCH"
            for missing in finding.detail:
                covering = [
                    other["Sid"]
                    for other in lifecycle["Statement"]
                    if missing["action"] in other["Action"]
                    and any(
                        parliament.is_arn_strictly_valid("", missing["required_format"], r)
                        for r in other["Resource"]
                    )
                ]
                assert covering, f"{missing} granted by no statement"
