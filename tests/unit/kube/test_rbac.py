"""RBAC as the API server decides it: rule matching, Role scope, the 403, the wrapper."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from provisioner.kube.errors import ForbiddenError
from provisioner.kube.memory import InMemoryKube
from provisioner.kube.rbac import (
    AccessRequest,
    AuthorizedKube,
    Authorizer,
    PolicyRule,
    chart_authorizer,
    rules_from_manifests,
)
from provisioner.kube.resource import EVENTS, LEASES, NODE_CLAIMS, NODES, PODS

MANIFESTS = [
    {
        "kind": "ClusterRole",
        "metadata": {"name": "c"},
        "rules": [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
            {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
            {"apiGroups": ["karpenter.sh"], "resources": ["nodeclaims/status"], "verbs": ["patch"]},
            {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
        ],
    },
    {
        "kind": "Role",
        "metadata": {"name": "r", "namespace": "kube-system"},
        "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["*"]}],
    },
]


def now() -> datetime:
    return datetime(2025, 1, 1, tzinfo=UTC)


@pytest.fixture
def inner() -> InMemoryKube:
    kube = InMemoryKube(clock=now)
    kube.create(PODS, {"metadata": {"name": "p"}}, namespace="default")
    kube.create(NODES, {"metadata": {"name": "n"}})
    kube.create(NODE_CLAIMS, {"metadata": {"name": "c"}})
    return kube


@pytest.fixture
def kube(inner: InMemoryKube) -> AuthorizedKube:
    return AuthorizedKube(inner, Authorizer(rules_from_manifests(MANIFESTS), user="u"))


def test_allowed_calls_reach_the_api(kube: AuthorizedKube, inner: InMemoryKube) -> None:
    assert kube.get(PODS, "p", namespace="default")["metadata"]["name"] == "p"
    assert len(kube.list(PODS).items) == 1
    kube.patch_status(NODE_CLAIMS, "c", {"status": {"providerID": "x"}})
    kube.create_event(inner.get(NODES, "n"), reason="R", message="m")
    kube.evict("default", "p")
    assert inner.list(PODS).items == []


def test_a_denied_call_is_the_api_servers_403_and_changes_nothing(
    kube: AuthorizedKube, inner: InMemoryKube
) -> None:
    with pytest.raises(ForbiddenError) as caught:
        kube.delete(PODS, "p", namespace="default")
    error = caught.value
    assert error.code == 403
    assert error.reason == "Forbidden"
    assert error.message == (
        'pods "p" is forbidden: User "u" cannot delete resource "pods" in API group "" in the '
        'namespace "default"'
    )
    assert dict(error.details) == {"name": "p", "group": "", "kind": "pods"}
    assert inner.get(PODS, "p", namespace="default")
    with pytest.raises(
        ForbiddenError,
        match=r'^\(403 Forbidden\) nodes "n" is forbidden: User '
        r'"u" cannot patch resource "nodes" in API group "" at the cluster scope$',
    ):
        kube.merge_patch(NODES, "n", {"metadata": {"labels": {"a": "b"}}})
    with pytest.raises(
        ForbiddenError,
        match=r'nodeclaims\.karpenter\.sh is forbidden: User "u" '
        r'cannot watch resource "nodeclaims" in API group "karpenter.sh" at the',
    ):
        kube.watch(NODE_CLAIMS)
    # the subresource is its own resource: status patch allowed, main resource patch not
    with pytest.raises(ForbiddenError, match='cannot patch resource "nodeclaims"'):
        kube.merge_patch(NODE_CLAIMS, "c", {"metadata": {"labels": {"a": "b"}}})


def test_a_role_grants_only_in_its_namespace(kube: AuthorizedKube) -> None:
    kube.create(LEASES, {"metadata": {"name": "l"}}, namespace="kube-system")
    kube.get(LEASES, "l", namespace="kube-system")
    with pytest.raises(ForbiddenError, match='in the namespace "default"'):
        kube.create(LEASES, {"metadata": {"name": "l"}}, namespace="default")
    with pytest.raises(ForbiddenError, match="at the cluster scope"):
        kube.list(LEASES)  # all namespaces needs a ClusterRole


def test_events_are_authorized_in_the_involved_objects_namespace() -> None:
    rule = PolicyRule(frozenset({""}), frozenset({"events"}), frozenset({"create"}), namespace="x")
    kube = AuthorizedKube(InMemoryKube(clock=now), Authorizer([rule]))
    kube.create_event(
        {"kind": "Pod", "metadata": {"name": "p", "namespace": "x"}}, reason="R", message="m"
    )
    with pytest.raises(ForbiddenError, match=r'cannot create resource "events" .* "default"'):
        kube.create_event({"kind": "Node", "metadata": {"name": "n"}}, reason="R", message="m")
    assert EVENTS.namespaced


def test_observers_see_every_decision(kube: AuthorizedKube) -> None:
    seen: list[tuple[AccessRequest, bool]] = []
    kube.authorizer.observers.append(lambda request, allowed: seen.append((request, allowed)))
    kube.get(PODS, "p", namespace="default")
    with pytest.raises(ForbiddenError):
        kube.delete(NODES, "n")
    assert [(r.verb, r.resource, r.namespace, ok) for r, ok in seen] == [
        ("get", "pods", "default", True),
        ("delete", "nodes", None, False),
    ]


def test_cells_split_a_rule_per_group_resource_and_verb() -> None:
    (rule,) = rules_from_manifests(
        [
            {
                "kind": "ClusterRole",
                "metadata": {"name": "c"},
                "rules": [{"apiGroups": ["a", "b"], "resources": ["x"], "verbs": ["get", "list"]}],
            }
        ]
    )
    assert len(rule.cells()) == 4
    assert all(len(c.verbs) == len(c.api_groups) == 1 for c in rule.cells())


@pytest.mark.parametrize(
    ("manifest", "message"),
    [
        ({"kind": "Role", "metadata": {"name": "r"}, "rules": []}, "Role 'r': metadata.namespace"),
        (
            {"kind": "ClusterRole", "metadata": {"name": "c"}, "rules": [{"resources": ["x"]}]},
            r"ClusterRole/c: rules\[0\].verbs is required",
        ),
    ],
)
def test_bad_manifests_name_the_role_and_field(manifest: dict, message: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(ValueError, match=message):
        rules_from_manifests([manifest])


def test_the_chart_grants_the_controllers_calls() -> None:
    chart = chart_authorizer()
    assert chart.allows(AccessRequest("delete", "", "pods", namespace="default", name="p"))
    assert chart.allows(AccessRequest("create", "", "pods", "eviction", "default", "p"))
    assert chart.allows(AccessRequest("patch", "coordination.k8s.io", "leases", "", "kube-system"))
    assert not chart.allows(AccessRequest("update", "", "nodes", name="n"))
    assert not chart.allows(AccessRequest("patch", "coordination.k8s.io", "leases", "", "default"))
