from __future__ import annotations

import contextlib
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from provisioner.apis import labels
from provisioner.apis.base import parse_object, to_wire
from provisioner.apis.errors import ApiValidationError
from provisioner.apis.nodepool import NODEPOOL_HASH_VERSION, Budget, NodePool, nodepool_hash
from tests.unit.apis.conftest import base, example_documents, set_path

NODEPOOLS_CRD = "karpenter.sh_nodepools.yaml"
REQ = "spec.template.spec.requirements"
TSPEC = "spec.template.spec"

# Upstream's example sets nodeClassRef.group to "karpenter.k8s.aws/v1", which the CRD's
# pattern ^[^/]*$ rejects (kubernetes-sigs/karpenter#1516); the API server refuses it too.
INVALID_UPSTREAM_EXAMPLES = {"windows-custom-userdata.yaml": f"{TSPEC}.nodeClassRef.group"}


def parse(data: Any) -> NodePool:
    return parse_object(NodePool, data, kind="NodePool")


def test_every_example_nodepool_parses(shared, crd_validator):
    parsed = 0
    for name, index, doc in example_documents(shared):
        if doc.get("kind") != "NodePool":
            continue
        if name in INVALID_UPSTREAM_EXAMPLES:
            with pytest.raises(ApiValidationError) as err:
                parse(doc)
            assert err.value.problems[0].path == INVALID_UPSTREAM_EXAMPLES[name]
            assert "karpenter.k8s.aws" in str(err.value)
            continue
        nodepool = parse(doc)
        assert nodepool.name == doc["metadata"]["name"], (name, index)
        crd_validator(NODEPOOLS_CRD).validate(to_wire(nodepool))
        assert parse(to_wire(nodepool)) == nodepool
        parsed += 1
    assert parsed >= 20


def test_defaults_match_karpenter():
    nodepool = parse(base("NodePool"))
    assert nodepool.spec.template.spec.expire_after == "720h"
    assert nodepool.expire_after == timedelta(hours=720)
    assert nodepool.consolidate_after == timedelta(0)
    assert nodepool.consolidation_policy == "WhenEmptyOrUnderutilized"
    assert nodepool.budgets == (Budget(nodes="10%"),)
    assert nodepool.spec.weight is None
    assert nodepool.weight == 0
    assert nodepool.termination_grace_period is None
    assert nodepool.limits == {}
    assert not nodepool.is_static
    wire = to_wire(nodepool)
    assert wire["spec"]["disruption"] == {
        "consolidateAfter": "0s",
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
        "budgets": [{"nodes": "10%"}],
    }
    assert wire["spec"]["template"]["spec"]["expireAfter"] == "720h"


def test_full_nodepool_serialises_to_the_crd_schema(crd_validator):
    data = base("NodePool")
    spec = data["spec"]
    spec["template"]["metadata"]["annotations"] = {"example.com/owner": "ml"}
    spec["template"]["spec"].update(
        {
            "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}],
            "startupTaints": [{"key": "example.com/init", "effect": "NoExecute"}],
            "expireAfter": "Never",
            "terminationGracePeriod": "1h30m",
        }
    )
    spec["disruption"] = {
        "consolidateAfter": "Never",
        "consolidationPolicy": "WhenEmpty",
        "budgets": [
            {"nodes": "0", "schedule": "0 9 * * mon-fri", "duration": "8h", "reasons": ["Drifted"]},
            {"nodes": "20%"},
        ],
    }
    spec["limits"] = {"cpu": 1000, "memory": "1000Gi", "nvidia.com/gpu": "8"}
    spec["weight"] = 50
    data["status"] = {
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "Ready",
                "message": "",
                "lastTransitionTime": "2025-01-01T00:00:00Z",
                "observedGeneration": 3,
            }
        ],
        "nodes": 4,
        "resources": {"cpu": "16", "memory": "64Gi"},
        "nodeClassObservedGeneration": 1,
    }
    nodepool = parse(data)
    assert nodepool.consolidate_after is None
    assert nodepool.expire_after is None
    assert nodepool.termination_grace_period == timedelta(hours=1, minutes=30)
    assert nodepool.budgets[0].duration_timedelta == timedelta(hours=8)
    assert nodepool.budgets[0].applies_to("Drifted")
    assert not nodepool.budgets[0].applies_to("Empty")
    crd_validator(NODEPOOLS_CRD).validate(to_wire(nodepool))
    assert parse(to_wire(nodepool)) == nodepool


def test_static_nodepool_allows_only_node_limits():
    data = base("NodePool")
    data["spec"].update({"replicas": 3, "limits": {"nodes": 5}})
    assert parse(data).is_static


def test_beta_and_exception_domain_keys_are_allowed():
    data = base("NodePool")
    data["spec"]["template"]["spec"]["requirements"] += [
        {"key": "beta.kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
        {"key": "failure-domain.beta.kubernetes.io/zone", "operator": "Exists"},
        {"key": "node.kubernetes.io/instance-type", "operator": "NotIn", "values": ["t3.micro"]},
        {"key": "example.node.kubernetes.io/pool", "operator": "DoesNotExist"},
        {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gte", "values": ["4"]},
        {"key": "karpenter.k8s.aws/instance-memory", "operator": "Lte", "values": ["65536"]},
        {"key": "example.com/team", "operator": "Lt", "values": ["0"]},
    ]
    data["spec"]["template"]["metadata"]["labels"]["karpenter.sh/capacity-type"] = "spot"
    parse(data)


@pytest.mark.parametrize(
    ("budget", "allowed"),
    [({"nodes": "10%"}, 10), ({"nodes": "15%"}, 15), ({"nodes": "1%"}, 1), ({"nodes": "3"}, 3)],
)
def test_budget_allowed_disruptions_rounds_percentages_up(budget, allowed):
    assert Budget.model_validate(budget).allowed_disruptions(95) == allowed


def _requirements(n: int) -> list[dict[str, Any]]:
    return [{"key": f"example.com/k{i}", "operator": "Exists"} for i in range(n)]


def _labels(n: int) -> dict[str, str]:
    return {f"example.com/l{i}": "v" for i in range(n)}


# (field path to set, value (... deletes), expected problem path, expected message fragment)
MALFORMED: list[tuple[str, Any, str, str]] = [
    (
        f"{REQ}[2].operator",
        "Equals",
        f"{REQ}[2].operator",
        "must be one of In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte",
    ),
    (f"{REQ}[2].operator", 3, f"{REQ}[2].operator", "must be one of"),
    (f"{REQ}[1].values", [], f"{REQ}[1].values", "operator In requires at least one value"),
    (
        f"{REQ}[1]",
        {"key": "example.com/a", "operator": "In"},
        f"{REQ}[1].values",
        "operator In requires at least one value",
    ),
    (
        f"{REQ}[1]",
        {"key": "example.com/a", "operator": "Gt", "values": ["1", "2"]},
        f"{REQ}[1].values",
        "operator Gt requires a single non-negative integer value",
    ),
    (
        f"{REQ}[1]",
        {"key": "example.com/a", "operator": "Lte", "values": ["x"]},
        f"{REQ}[1].values",
        "operator Lte requires a single non-negative integer value",
    ),
    (
        f"{REQ}[1]",
        {"key": "example.com/a", "operator": "Gte"},
        f"{REQ}[1].values",
        "operator Gte requires a single non-negative integer value",
    ),
    (f"{REQ}[2].minValues", 0, f"{REQ}[2].minValues", "must be between 1 and 50"),
    (f"{REQ}[2].minValues", 51, f"{REQ}[2].minValues", "must be between 1 and 50"),
    (f"{REQ}[2].minValues", 4, f"{REQ}[2].minValues", "must not exceed the number of values (3)"),
    (f"{REQ}[2].minValues", "2", f"{REQ}[2].minValues", "valid integer"),
    (REQ, _requirements(101), REQ, "must have at most 100 requirements, has 101"),
    (
        f"{REQ}[0].key",
        "karpenter.sh/nodepool",
        f"{REQ}[0].key",
        'label "karpenter.sh/nodepool" is restricted',
    ),
    (
        f"{REQ}[0].key",
        "kubernetes.io/hostname",
        f"{REQ}[0].key",
        'label "kubernetes.io/hostname" is restricted',
    ),
    (
        f"{REQ}[0].key",
        "karpenter.sh/foo",
        f"{REQ}[0].key",
        'label domain "karpenter.sh" is restricted',
    ),
    (
        f"{REQ}[0].key",
        "karpenter.k8s.aws/foo",
        f"{REQ}[0].key",
        'label domain "karpenter.k8s.aws" is restricted',
    ),
    (
        f"{REQ}[0].key",
        "example.kubernetes.io/foo",
        f"{REQ}[0].key",
        'label "example.kubernetes.io/foo" is restricted',
    ),
    (f"{REQ}[0].key", "k8s.io/foo", f"{REQ}[0].key", 'label "k8s.io/foo" is restricted'),
    (f"{REQ}[0].key", "-bad/key-", f"{REQ}[0].key", "is not a qualified name"),
    (f"{REQ}[0].key", "example.com/" + "a" * 64, f"{REQ}[0].key", "is not a qualified name"),
    (
        f"{REQ}[0].values",
        ["spot", "bad value"],
        f"{REQ}[0].values[1]",
        "is not a valid label value",
    ),
    (f"{REQ}[0].values", ["a" * 64], f"{REQ}[0].values[0]", "at most 63 characters"),
    (f"{REQ}[0].values", "spot", f"{REQ}[0].values", "valid tuple"),
    (f"{REQ}[0].unknown", 1, f"{REQ}[0].unknown", "unknown field"),
    (REQ, ..., REQ, "required value"),
    (
        "spec.template.metadata.labels",
        {"karpenter.sh/nodepool": "x"},
        "spec.template.metadata.labels",
        'label "karpenter.sh/nodepool" is restricted',
    ),
    (
        "spec.template.metadata.labels",
        {"kubernetes.io/hostname": "x"},
        "spec.template.metadata.labels",
        'label "kubernetes.io/hostname" is restricted',
    ),
    (
        "spec.template.metadata.labels",
        {"karpenter.sh/custom": "x"},
        "spec.template.metadata.labels",
        'label domain "karpenter.sh" is restricted',
    ),
    (
        "spec.template.metadata.labels",
        {"topology.kubernetes.io/rack": "x"},
        "spec.template.metadata.labels",
        'label "topology.kubernetes.io/rack" is restricted',
    ),
    (
        "spec.template.metadata.labels",
        _labels(101),
        "spec.template.metadata.labels",
        "at most 100 labels",
    ),
    (
        "spec.template.metadata.labels",
        {"team": "not ok"},
        "spec.template.metadata.labels.team",
        "is not a valid label value",
    ),
    (
        f"{TSPEC}.taints",
        [{"key": "a", "effect": "NoEffect"}],
        f"{TSPEC}.taints[0].effect",
        "must be one of NoSchedule, PreferNoSchedule, NoExecute",
    ),
    (f"{TSPEC}.taints", [{"key": "a"}], f"{TSPEC}.taints[0].effect", "required value"),
    (
        f"{TSPEC}.taints",
        [{"key": "", "effect": "NoSchedule"}],
        f"{TSPEC}.taints[0].key",
        "not a valid taint key",
    ),
    (
        f"{TSPEC}.taints",
        [{"key": "a", "value": "b c", "effect": "NoSchedule"}],
        f"{TSPEC}.taints[0].value",
        "not a valid taint value",
    ),
    (
        f"{TSPEC}.taints",
        [{"key": "a", "effect": "NoSchedule"}, {"key": "a", "effect": "NoSchedule"}],
        f"{TSPEC}.taints",
        'duplicate taint key/effect pair "a:NoSchedule" (taints[0] and taints[1])',
    ),
    (
        f"{TSPEC}.startupTaints",
        [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
        f"{TSPEC}.startupTaints",
        "(taints[0] and startupTaints[0])",
    ),
    (f"{TSPEC}.nodeClassRef", ..., f"{TSPEC}.nodeClassRef", "required value"),
    (f"{TSPEC}.nodeClassRef.name", ..., f"{TSPEC}.nodeClassRef.name", "required value"),
    (f"{TSPEC}.nodeClassRef.kind", "", f"{TSPEC}.nodeClassRef.kind", "kind may not be empty"),
    (
        f"{TSPEC}.nodeClassRef.group",
        "karpenter.k8s.aws/v1",
        f"{TSPEC}.nodeClassRef.group",
        'must be an API group without a version: "karpenter.k8s.aws"',
    ),
    (f"{TSPEC}.expireAfter", "30d", f"{TSPEC}.expireAfter", 'invalid duration "30d"'),
    (f"{TSPEC}.expireAfter", "1.5h", f"{TSPEC}.expireAfter", 'invalid duration "1.5h"'),
    (f"{TSPEC}.expireAfter", 3600, f"{TSPEC}.expireAfter", "valid string"),
    (
        f"{TSPEC}.terminationGracePeriod",
        "Never",
        f"{TSPEC}.terminationGracePeriod",
        "Never is not allowed here",
    ),
    (
        "spec.disruption",
        {"consolidationPolicy": "WhenEmpty"},
        "spec.disruption.consolidateAfter",
        "required value",
    ),
    (
        "spec.disruption",
        {"consolidateAfter": "-1s"},
        "spec.disruption.consolidateAfter",
        'invalid duration "-1s"',
    ),
    (
        "spec.disruption",
        {"consolidateAfter": "0s", "consolidationPolicy": "Always"},
        "spec.disruption.consolidationPolicy",
        "must be one of WhenEmpty, WhenEmptyOrUnderutilized, Balanced",
    ),
    (
        "spec.disruption",
        {"consolidateAfter": "0s", "budgets": [{"nodes": "10%", "schedule": "@daily"}]},
        "spec.disruption.budgets[0].duration",
        "'schedule' must be set with 'duration'",
    ),
    (
        "spec.disruption",
        {"consolidateAfter": "0s", "budgets": [{"nodes": "10%", "duration": "1h"}]},
        "spec.disruption.budgets[0].duration",
        "'duration' must be set with 'schedule'",
    ),
    (
        "spec.disruption",
        {"consolidateAfter": "0s", "budgets": [{"schedule": "@daily", "duration": "30s"}]},
        "spec.disruption.budgets[0].duration",
        'invalid duration "30s"',
    ),
    (
        "spec.disruption",
        {"consolidateAfter": "0s", "budgets": [{"schedule": "every day", "duration": "1h"}]},
        "spec.disruption.budgets[0].schedule",
        "must be a cron schedule",
    ),
    (
        "spec.disruption",
        {"consolidateAfter": "0s", "budgets": [{"nodes": "101%"}]},
        "spec.disruption.budgets[0].nodes",
        "must be a number of nodes",
    ),
    (
        "spec.disruption",
        {"consolidateAfter": "0s", "budgets": [{"nodes": 5}]},
        "spec.disruption.budgets[0].nodes",
        "valid string",
    ),
    (
        "spec.disruption",
        {"consolidateAfter": "0s", "budgets": [{"reasons": ["Expired"]}]},
        "spec.disruption.budgets[0].reasons[0]",
        "must be one of Underutilized, Empty, Drifted",
    ),
    (
        "spec.disruption",
        {"consolidateAfter": "0s", "budgets": [{"reasons": ["Empty", "Empty"]}]},
        "spec.disruption.budgets[0].reasons",
        "must not contain duplicates",
    ),
    (
        "spec.disruption",
        {"consolidateAfter": "0s", "budgets": [{"nodes": "1"}] * 51},
        "spec.disruption.budgets",
        "at most 50 budgets",
    ),
    ("spec.weight", 0, "spec.weight", "must be between 1 and 100"),
    ("spec.weight", 101, "spec.weight", "must be between 1 and 100"),
    ("spec.weight", "10", "spec.weight", "valid integer"),
    ("spec.weight", True, "spec.weight", "valid integer"),
    ("spec.limits", {"cpu": "lots"}, "spec.limits.cpu", '"lots" is not a quantity'),
    ("spec.limits", {"cpu": 1.5}, "spec.limits.cpu", "must be an integer or a quantity string"),
    ("spec.replicas", -1, "spec.replicas", "must be at least 0"),
    ("spec.replicas", 2, "spec.replicas", "only 'limits.nodes' is supported on static NodePools"),
    ("spec.template.spec", {"requirements": []}, f"{TSPEC}.nodeClassRef", "required value"),
    ("spec.template", ..., "spec.template", "required value"),
    ("spec.templates", {}, "spec.templates", "unknown field"),
    ("spec", [], "spec", "valid dictionary"),
    ("apiVersion", "karpenter.sh/v1beta1", "apiVersion", "must be karpenter.sh/v1"),
    ("kind", "NodeClaim", "kind", "must be NodePool"),
    (
        "status",
        {
            "conditions": [
                {"type": "Ready", "status": "Yes", "lastTransitionTime": "2025-01-01T00:00:00Z"}
            ]
        },
        "status.conditions[0].status",
        "must be one of True, False, Unknown",
    ),
]


@pytest.mark.parametrize(
    ("field", "value", "path", "message"),
    MALFORMED,
    ids=[f"{c[0]}={c[1]!r:.30}" for c in MALFORMED],
)
def test_malformed_nodepool_names_the_field(field, value, path, message):
    data = set_path(base("NodePool"), field, value)
    if field == "spec.replicas":
        data["spec"]["limits"] = {"nodes": 3, "cpu": 4} if value == 2 else {}
    if field.endswith("startupTaints"):
        data["spec"]["template"]["spec"]["taints"] = [
            {"key": "nvidia.com/gpu", "effect": "NoSchedule"}
        ]
    with pytest.raises(ApiValidationError) as err:
        parse(data)
    assert [p.path for p in err.value.problems] == [path], str(err.value)
    assert message in err.value.problems[0].message
    assert str(err.value).startswith(f"NodePool default: {path}: ")


def test_error_message_has_the_documented_form():
    data = set_path(base("NodePool"), f"{REQ}[2].operator", "Equals")
    with pytest.raises(ApiValidationError) as err:
        parse(data)
    assert str(err.value) == (
        "NodePool default: spec.template.spec.requirements[2].operator: "
        "must be one of In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte"
    )


def test_static_nodepool_rejects_weight():
    data = base("NodePool")
    data["spec"].update({"replicas": 1, "weight": 10})
    with pytest.raises(ApiValidationError, match="'weight' is not supported on static NodePools"):
        parse(data)


# --- hash ---------------------------------------------------------------------------------------


def test_hash_is_stable_and_ignores_requirements_order_and_defaults():
    nodepool = parse(base("NodePool"))
    assert nodepool_hash(nodepool) == nodepool_hash(parse(base("NodePool")))
    assert nodepool_hash(nodepool).isdigit()
    assert NODEPOOL_HASH_VERSION == "jointer-v1"

    changed_requirements = base("NodePool")
    changed_requirements["spec"]["template"]["spec"]["requirements"].pop()
    assert nodepool_hash(parse(changed_requirements)) == nodepool_hash(nodepool)

    explicit = base("NodePool")
    explicit["spec"]["template"]["spec"]["expireAfter"] = "720h0m0s"
    explicit["spec"]["template"]["spec"]["taints"] = []
    explicit["spec"]["weight"] = 7  # outside spec.template
    assert nodepool_hash(parse(explicit)) == nodepool_hash(nodepool)


def test_hash_treats_taints_as_a_set_and_changes_with_the_template():
    one = base("NodePool")
    one["spec"]["template"]["spec"]["taints"] = [
        {"key": "a", "effect": "NoSchedule"},
        {"key": "b", "effect": "NoExecute"},
    ]
    two = base("NodePool")
    two["spec"]["template"]["spec"]["taints"] = list(
        reversed(one["spec"]["template"]["spec"]["taints"])
    )
    assert nodepool_hash(parse(one)) == nodepool_hash(parse(two))

    relabelled = base("NodePool")
    relabelled["spec"]["template"]["metadata"]["labels"]["team"] = "web"
    assert nodepool_hash(parse(relabelled)) != nodepool_hash(parse(base("NodePool")))
    renamed = set_path(base("NodePool"), f"{TSPEC}.nodeClassRef.name", "other")
    assert nodepool_hash(parse(renamed)) != nodepool_hash(parse(base("NodePool")))


def test_template_labels_and_keys_come_from_labels_module():
    nodepool = parse(base("NodePool"))
    assert nodepool.requirements[0].key == labels.LABEL_CAPACITY_TYPE
    assert nodepool.template_labels == {"team": "ml"}
    assert nodepool.node_class_ref.kind == "EC2NodeClass"


# --- junk never escapes as anything but ApiValidationError ---------------------------------------

json_junk = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
FIELD_NAMES = st.sampled_from(
    [
        "spec",
        "template",
        "requirements",
        "key",
        "operator",
        "values",
        "minValues",
        "taints",
        "effect",
        "disruption",
        "budgets",
        "schedule",
        "duration",
        "weight",
        "limits",
        "nodeClassRef",
        "metadata",
        "labels",
        "expireAfter",
        "consolidateAfter",
        "status",
        "conditions",
        "replicas",
    ]
)


def _mutate(data: Any, path: list[Any], value: Any) -> Any:
    target = data
    for step in path:
        if isinstance(target, dict) and target:
            target = target[sorted(target)[step % len(target)]]
        elif isinstance(target, list) and target:
            target = target[step % len(target)]
    if isinstance(target, dict):
        target[str(value[0])] = value[1]
    elif isinstance(target, list):
        target.append(value[1])
    return data


@given(junk=json_junk)
def test_random_junk_raises_only_api_validation_errors(junk):
    with contextlib.suppress(ApiValidationError):
        parse(junk)


@given(
    path=st.lists(st.integers(min_value=0, max_value=20), max_size=6),
    key=FIELD_NAMES,
    value=json_junk,
)
def test_mutated_nodepool_raises_only_api_validation_errors(path, key, value):
    data = _mutate(base("NodePool"), path, (key, value))
    try:
        nodepool = parse(data)
    except ApiValidationError as err:
        problems = err.problems
        assert problems
    else:
        to_wire(nodepool)
        nodepool_hash(nodepool)
