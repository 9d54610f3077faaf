"""Which nodes may be disrupted: Karpenter's rules plus Jointer's protections and gang rules."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest

from provisioner.controllers.disruption.candidates import build_candidates, eviction_cost
from provisioner.controllers.events import Event
from provisioner.state.cluster import Nomination
from tests.unit.controllers.disruption.objects import (
    NOW,
    catalog_of,
    claim,
    facts_of,
    node,
    pod,
    running,
)


def candidates(objects: list[dict[str, Any]], **kwargs: Any) -> tuple[list[str], list[Event]]:
    facts = facts_of(objects, **kwargs)
    published: list[Event] = []
    found = build_candidates(
        facts, catalog_of(facts), in_flight=lambda _: False, publish=published.append
    )
    return [c.claim_name for c in found], published


def blocked_messages(events: list[Event]) -> set[str]:
    return {e.message for e in events if e.reason == "DisruptionBlocked"}


def one_node(*pods: dict[str, Any], **node_options: Any) -> list[dict[str, Any]]:
    return [claim("a"), node("a", **node_options), *(running(p, "node-a") for p in pods)]


def test_a_plain_initialized_node_is_a_candidate():
    names, events = candidates(one_node(pod("web-1")))
    assert names == ["a"]
    assert not events


def test_candidate_costs_and_price():
    facts = facts_of(one_node(pod("web-1"), pod("web-2")))
    (candidate,) = build_candidates(facts, catalog_of(facts), in_flight=lambda _: False)
    assert candidate.price == pytest.approx(0.17)
    assert candidate.reschedule_cost == pytest.approx(3.0)
    assert candidate.savings_ratio == pytest.approx(0.17 / 3)
    assert not candidate.is_empty
    assert candidate.consolidatable  # consolidateAfter 0s


@pytest.mark.parametrize(
    ("annotations", "priority", "expected"),
    [
        pytest.param({}, None, 1.0, id="default"),
        pytest.param(
            {"controller.kubernetes.io/pod-deletion-cost": str(2**27)}, None, 2.0, id="cost"
        ),
        pytest.param({}, 2**25 * 3, 4.0, id="priority"),
        pytest.param({}, 10**9, 10.0, id="clamped"),
        pytest.param({"controller.kubernetes.io/pod-deletion-cost": "x"}, None, 1.0, id="bad-cost"),
    ],
)
def test_eviction_cost(annotations, priority, expected):
    from provisioner.apis.base import parse_object  # noqa: PLC0415
    from provisioner.apis.core import Pod  # noqa: PLC0415

    body = pod("p", annotations=annotations)
    if priority is not None:
        body["spec"]["priority"] = priority
    assert eviction_cost(parse_object(Pod, body, kind="Pod")) == pytest.approx(expected)


def test_uninitialized_deleting_and_in_flight_nodes_are_not_candidates():
    objects = [
        claim("a", initialized=False),
        node("a"),
        claim("b", deleting=True),
        node("b"),
        claim("c"),
        node("c"),
    ]
    facts = facts_of(objects)
    found = build_candidates(facts, catalog_of(facts), in_flight=lambda n: n == "c")
    assert found == []


def test_do_not_disrupt_pod_blocks_its_node():
    protected = pod("batch-1", annotations={"karpenter.sh/do-not-disrupt": "true"})
    names, events = candidates(one_node(protected))
    assert names == []
    assert 'Pod has "karpenter.sh/do-not-disrupt" annotation (Pod=default/batch-1)' in (
        blocked_messages(events)
    )


def test_do_not_disrupt_duration_protects_until_it_expires():
    timed = pod("batch-1", annotations={"karpenter.sh/do-not-disrupt": "1h"})
    started_now = running(timed, "node-a", started=NOW - timedelta(minutes=30))
    names, _ = candidates([claim("a"), node("a"), started_now])
    assert names == []
    timed = pod("batch-1", annotations={"karpenter.sh/do-not-disrupt": "1h"})
    started_long_ago = running(timed, "node-a", started=NOW - timedelta(hours=2))
    names, _ = candidates([claim("a"), node("a"), started_long_ago])
    assert names == ["a"]


def test_node_annotation_blocks():
    names, events = candidates(one_node(annotations={"karpenter.sh/do-not-disrupt": "true"}))
    assert names == []
    assert any("do-not-disrupt" in m for m in blocked_messages(events))


def test_gpu_reservation_pod_blocks_its_node():
    reservation = pod(
        "gpu-reservation-node-a-x1x2x",
        namespace="kai-resource-reservation",
        labels={"app": "kai-resource-reservation", "runai-gpu-group": "g1"},
    )
    names, events = candidates(one_node(reservation))
    assert names == []
    assert any("GPU reservation pod" in m for m in blocked_messages(events))


def test_kai_non_preemptible_pod_blocks_its_node():
    kai = pod("train-1", annotations={"pod-group-name": "pg-train"}, schedulerName="kai-scheduler")
    kai["spec"]["priorityClassName"] = "inference"  # KAI default priority 125 >= 100
    names, events = candidates(one_node(kai))
    assert names == []
    assert any("non-preemptible" in m for m in blocked_messages(events))


def test_kai_preemptible_pod_does_not_block():
    kai = pod("train-1", annotations={"pod-group-name": "pg-train"}, schedulerName="kai-scheduler")
    kai["spec"]["priorityClassName"] = "train"
    names, _ = candidates(one_node(kai))
    assert names == ["a"]


def test_volcano_preemptable_false_blocks():
    volcano = pod("v-1", annotations={"volcano.sh/preemptable": "false"})
    names, _ = candidates(one_node(volcano))
    assert names == []


def test_workload_api_disruption_mode_all_blocks():
    member = pod("w-1")
    member["spec"]["schedulingGroup"] = {"podGroupName": "trainer"}
    group = {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "trainer", "namespace": "default"},
        "spec": {"disruptionMode": "All", "schedulingPolicy": {"gang": {"minCount": 1}}},
    }
    names, events = candidates([*one_node(member), group])
    assert names == []
    assert any("non-preemptible" in m for m in blocked_messages(events))


def test_operator_listed_priority_class_blocks():
    critical = pod("etl-1")
    critical["spec"]["priorityClassName"] = "business-critical"
    names, _ = candidates(one_node(critical), classes=frozenset({"business-critical"}))
    assert names == []
    names, _ = candidates(one_node(pod("etl-1")), classes=frozenset({"business-critical"}))
    assert names == ["a"]


def pdb(name: str, selector: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": {"matchLabels": selector}, **spec},
    }


def test_pdb_with_no_allowed_disruption_blocks():
    objects = one_node(pod("db-0", labels={"app": "db"}))
    names, events = candidates([*objects, pdb("db", {"app": "db"}, minAvailable=1)])
    assert names == []
    assert "Pdb prevents pod evictions (PodDisruptionBudget=[default/db])" in blocked_messages(
        events
    )


def test_pdb_that_allows_a_disruption_does_not_block():
    objects = [
        *one_node(pod("db-0", labels={"app": "db"})),
        claim("b"),
        node("b"),
        running(pod("db-1", labels={"app": "db"}), "node-b"),
    ]
    names, _ = candidates([*objects, pdb("db", {"app": "db"}, maxUnavailable=1)])
    assert names == ["a", "b"]


def test_two_pdbs_on_one_pod_block():
    objects = [
        *one_node(pod("db-0", labels={"app": "db", "tier": "x"})),
        claim("b"),
        node("b"),
        running(pod("db-1", labels={"app": "db", "tier": "x"}), "node-b"),
    ]
    budgets = [
        pdb("one", {"app": "db"}, maxUnavailable=1),
        pdb("two", {"tier": "x"}, maxUnavailable=1),
    ]
    names, _ = candidates([*objects, *budgets])
    assert names == []


def test_nominated_node_is_not_a_candidate():
    facts = facts_of(one_node(pod("web-1")))
    nominated = dataclasses.replace(
        facts.snapshot,
        nominations={"default/x": Nomination("default/x", "u", "a", NOW + timedelta(seconds=20))},
    )
    facts = dataclasses.replace(facts, nominated=frozenset({"a"}), snapshot=nominated)
    published: list[Event] = []
    assert (
        build_candidates(
            facts, catalog_of(facts), in_flight=lambda _: False, publish=published.append
        )
        == []
    )
    assert "Node is nominated for a pending pod" in blocked_messages(published)


def lws_member(name: str, size: int = 2) -> dict[str, Any]:
    return pod(
        name,
        labels={
            "app": "lws",
            "leaderworkerset.sigs.k8s.io/name": "trainer",
            "leaderworkerset.sigs.k8s.io/group-index": "0",
        },
        annotations={"leaderworkerset.sigs.k8s.io/size": str(size)},
    )


def test_gang_members_make_their_nodes_candidates_with_the_gang_recorded():
    objects = [
        claim("a"),
        node("a"),
        claim("b"),
        node("b"),
        running(lws_member("trainer-0"), "node-a"),
        running(lws_member("trainer-1"), "node-b"),
    ]
    facts = facts_of(objects)
    found = build_candidates(facts, catalog_of(facts), in_flight=lambda _: False)
    assert [c.claim_name for c in found] == ["a", "b"]
    assert all(c.gangs == {"leaderworkerset/default/trainer-0"} for c in found)


def test_one_protected_gang_member_protects_every_member_node():
    protected = lws_member("trainer-1")
    protected["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"] = "true"
    objects = [
        claim("a"),
        node("a"),
        claim("b"),
        node("b"),
        running(lws_member("trainer-0"), "node-a"),
        running(protected, "node-b"),
    ]
    names, events = candidates(objects)
    assert names == []
    assert any(m.startswith("Pod group ") for m in blocked_messages(events))


def test_gang_whose_budget_cannot_release_all_members_is_blocked():
    objects = [
        claim("a"),
        node("a"),
        claim("b"),
        node("b"),
        running(lws_member("trainer-0"), "node-a"),
        running(lws_member("trainer-1"), "node-b"),
        pdb("trainer", {"app": "lws"}, maxUnavailable=1),
    ]
    names, events = candidates(objects)
    assert names == []
    assert any("Pdb prevents" in m for m in blocked_messages(events))


def _booking(provisioned_minutes_ago: int) -> list[dict[str, Any]]:
    """An atomic ProvisioningRequest whose one pod is booked on NodeClaim ``a``."""
    from provisioner.kube.event import format_time  # noqa: PLC0415

    stamp = format_time(NOW - timedelta(minutes=provisioned_minutes_ago))
    request = {
        "apiVersion": "autoscaling.x-k8s.io/v1",
        "kind": "ProvisioningRequest",
        "metadata": {"name": "train", "namespace": "default", "creationTimestamp": stamp},
        "spec": {
            "provisioningClassName": "best-effort-atomic-scale-up.autoscaling.x-k8s.io",
            "podSets": [{"podTemplateRef": {"name": "ppt"}, "count": 1}],
        },
        "status": {
            "conditions": [
                {
                    "type": t,
                    "status": "True",
                    "reason": t,
                    "message": "",
                    "lastTransitionTime": stamp,
                }
                for t in ("Accepted", "Provisioned")
            ]
        },
    }
    template = {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": "ppt", "namespace": "default"},
        "template": {
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
        },
    }
    booked = claim(
        "a",
        annotations={
            "jointer.dev/provisioning-request": "default/train",
            "jointer.dev/provisioning-request-pods": "1",
        },
    )
    return [request, template, booked, node("a")]


def test_a_node_booked_by_a_provisioning_request_is_not_a_candidate():
    names, events = candidates(_booking(provisioned_minutes_ago=3))
    assert names == []
    assert "Node is booked by ProvisioningRequest default/train" in blocked_messages(events)


def test_a_booking_past_its_10_minutes_no_longer_protects_the_node():
    names, _ = candidates(_booking(provisioned_minutes_ago=11))
    assert names == ["a"]
