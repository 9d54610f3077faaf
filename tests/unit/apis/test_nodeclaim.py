from __future__ import annotations

import contextlib
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given

from provisioner.apis.base import parse_object, to_wire
from provisioner.apis.conditions import set_true
from provisioner.apis.errors import ApiValidationError
from provisioner.apis.nodeclaim import NodeClaim, NodeClaimStatus
from tests.unit.apis.conftest import base, example_documents, set_path
from tests.unit.apis.test_nodepool import json_junk

NODECLAIMS_CRD = "karpenter.sh_nodeclaims.yaml"
REQ = "spec.requirements"
NOW = datetime(2025, 1, 1, tzinfo=UTC)


def parse(data: Any) -> NodeClaim:
    return parse_object(NodeClaim, data, kind="NodeClaim")


def test_example_nodeclaims_parse(shared):
    for _, _, doc in example_documents(shared):
        if doc.get("kind") == "NodeClaim":
            parse(doc)


def test_nodeclaim_defaults_and_accessors():
    claim = parse(base("NodeClaim"))
    assert claim.spec.expire_after == "720h"
    assert claim.expire_after == timedelta(days=30)
    assert claim.termination_grace_period is None
    assert claim.nodepool_name == "default"
    assert claim.provider_id is None
    assert claim.spec.requirements[1].min_values == 2
    assert claim.spec.resources is not None
    assert claim.spec.resources.requests == {"cpu": "1500m", "memory": "2Gi", "pods": 3}


def test_status_uses_kubernetes_spelling_of_ids(crd_validator):
    data = base("NodeClaim")
    data["status"] = {
        "nodeName": "ip-10-0-0-1.ec2.internal",
        "providerID": "aws:///us-east-1a/i-0123456789abcdef0",
        "imageID": "ami-0123456789abcdef0",
        "capacity": {"cpu": "2", "memory": "7934Mi", "pods": "29"},
        "allocatable": {"cpu": "1930m", "memory": "6903Mi", "pods": "29"},
        "lastPodEventTime": "2025-01-01T00:00:00Z",
        "conditions": [
            {"type": "Launched", "status": "True", "lastTransitionTime": "2025-01-01T00:00:00Z"}
        ],
    }
    claim = parse(data)
    assert claim.provider_id == "aws:///us-east-1a/i-0123456789abcdef0"
    assert claim.status is not None
    assert claim.status.image_id == "ami-0123456789abcdef0"
    wire = to_wire(claim)
    assert wire["status"]["providerID"] == "aws:///us-east-1a/i-0123456789abcdef0"
    assert wire["status"]["imageID"] == "ami-0123456789abcdef0"
    crd_validator(NODECLAIMS_CRD).validate(wire)
    assert parse(wire) == claim


def test_nodeclaim_status_jointer_writes_validates_against_the_crd(crd_validator):
    claim = parse(base("NodeClaim"))
    conditions = set_true((), "Launched", now=NOW, observed_generation=1)
    status = NodeClaimStatus(provider_id="aws:///us-east-1a/i-1", conditions=conditions)
    wire = to_wire(claim.model_copy(update={"status": status}))
    crd_validator(NODECLAIMS_CRD).validate(wire)
    assert wire["spec"]["expireAfter"] == "720h"
    assert wire["status"]["conditions"][0] == {
        "type": "Launched",
        "status": "True",
        "observedGeneration": 1,
        "lastTransitionTime": "2025-01-01T00:00:00Z",
        "reason": "Launched",
        "message": "",
    }


def test_nodeclaim_may_require_its_nodepool():
    # unlike a NodePool, a NodeClaim carries karpenter.sh/nodepool as a requirement
    assert parse(base("NodeClaim")).spec.requirements[0].key == "karpenter.sh/nodepool"


MALFORMED: list[tuple[str, Any, str, str]] = [
    (f"{REQ}[0].operator", "in", f"{REQ}[0].operator", "must be one of In, NotIn"),
    (f"{REQ}[0].values", [], f"{REQ}[0].values", "operator In requires at least one value"),
    (f"{REQ}[1].minValues", 3, f"{REQ}[1].minValues", "must not exceed the number of values (2)"),
    (f"{REQ}[1].minValues", 0, f"{REQ}[1].minValues", "must be between 1 and 50"),
    (f"{REQ}[0].key", "kubernetes.io/hostname", f"{REQ}[0].key", "is restricted"),
    (f"{REQ}[0].key", "karpenter.sh/other", f"{REQ}[0].key", 'label domain "karpenter.sh"'),
    (
        REQ,
        [{"key": f"example.com/{i}", "operator": "Exists"} for i in range(101)],
        REQ,
        "at most 100 requirements",
    ),
    (
        "spec.resources.requests.cpu",
        "1.5 cores",
        "spec.resources.requests.cpu",
        "is not a quantity",
    ),
    ("spec.resources.limits", {}, "spec.resources.limits", "unknown field"),
    ("spec.nodeClassRef", ..., "spec.nodeClassRef", "required value"),
    ("spec.nodeClassRef.group", "", "spec.nodeClassRef.group", "group may not be empty"),
    ("spec.expireAfter", "forever", "spec.expireAfter", 'invalid duration "forever"'),
    ("spec.terminationGracePeriod", "10d", "spec.terminationGracePeriod", 'invalid duration "10d"'),
    (
        "spec.taints",
        [{"key": "a", "effect": "NoSchedule"}, {"key": "a", "effect": "NoSchedule"}],
        "spec.taints",
        "duplicate taint key/effect pair",
    ),
    (
        "spec.startupTaints",
        [{"key": "a", "effect": "Never"}],
        "spec.startupTaints[0].effect",
        "must be one of NoSchedule, PreferNoSchedule, NoExecute",
    ),
    ("status", {"providerId": "x"}, "status.providerId", "unknown field"),
    ("status", {"lastPodEventTime": "yesterday"}, "status.lastPodEventTime", "datetime"),
    (
        "status",
        {"conditions": [{"type": "Ready", "status": "True"}]},
        "status.conditions[0].lastTransitionTime",
        "required value",
    ),
    (
        "status",
        {
            "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": "2025-01-01T00:00:00Z"}
            ]
            * 2
        },
        "status.conditions",
        'duplicate condition type "Ready"',
    ),
    (
        "status",
        {
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "1bad",
                    "lastTransitionTime": "2025-01-01T00:00:00Z",
                }
            ]
        },
        "status.conditions[0].reason",
        "is not a valid reason",
    ),
    ("apiVersion", "v1", "apiVersion", "must be karpenter.sh/v1"),
]


@pytest.mark.parametrize(
    ("field", "value", "path", "message"),
    MALFORMED,
    ids=[f"{c[0]}={c[1]!r:.30}" for c in MALFORMED],
)
def test_malformed_nodeclaim_names_the_field(field, value, path, message):
    data = set_path(base("NodeClaim"), field, value)
    with pytest.raises(ApiValidationError) as err:
        parse(data)
    assert [p.path for p in err.value.problems] == [path], str(err.value)
    assert message in err.value.problems[0].message
    assert str(err.value).startswith(f"NodeClaim default-abcde: {path}: ")


@given(junk=json_junk)
def test_random_junk_raises_only_api_validation_errors(junk):
    with contextlib.suppress(ApiValidationError):
        parse(junk)
    with contextlib.suppress(ApiValidationError):
        parse({**base("NodeClaim"), "spec": junk})
