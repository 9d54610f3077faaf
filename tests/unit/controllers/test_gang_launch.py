"""Gang launches are atomic (issue 18 item 4): a gang's NodeClaims are created and launched as
one unit; a failure part way deletes the siblings already launched and re-plans the gang whole.
"""

from __future__ import annotations

from typing import Any

from cloudprovider.errors import InsufficientCapacityError
from cloudprovider.protocol import LaunchRequest
from provisioner.apis import labels as wk
from provisioner.controllers.provisioning.controller import launch_units
from provisioner.controllers.provisioning.plan import NodeClaimPlan
from provisioner.kube.errors import KubeApiError
from provisioner.kube.resource import NODE_CLAIMS, NODE_POOLS, PODS, Resource
from tests.unit.controllers.harness import TYPES, Harness, nodepool, pending_pod

POD_GROUPS = Resource("scheduling.x-k8s.io", "v1alpha1", "podgroups", "PodGroup", namespaced=True)
GANG = 4


def gang_harness() -> Harness:
    """A gang of 4 pods that each need a whole c.2xlarge: 4 NodeClaims."""
    h = Harness()
    h.create(
        NODE_POOLS,
        nodepool(
            requirements=[
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
            ]
        ),
    )
    h.run()
    h.create(
        POD_GROUPS,
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "trainers", "namespace": "default"},
            "spec": {"minMember": GANG},
        },
    )
    for i in range(GANG):
        pod = pending_pod(f"gang-{i}", cpu="7")
        pod["metadata"]["labels"]["pod-group.scheduling.sigs.k8s.io"] = "trainers"
        h.create(PODS, pod)
    return h


def ice_on_third_launch(h: Harness) -> list[str]:
    """The third CreateFleet of the run hits ICE; the failed zone goes into the ICE cache."""
    zones: list[str] = []

    def before_create(request: LaunchRequest) -> None:
        if len(h.cloud.create_calls) == 3 and not zones:
            zone = next(iter(h.cloud.created.values())).zone
            zones.append(zone)
            for instance_type in TYPES:
                for capacity_type in ("on-demand", "spot"):
                    h.cloud.mark_unavailable(capacity_type, instance_type.name, zone)
            h.cloud.next_create_error = InsufficientCapacityError(
                f"launching nodeclaim {request.name}, all requested instance types were "
                "unavailable during launch"
            )

    h.cloud.before_create = before_create
    return zones


def zone_of(claim: dict[str, Any]) -> str | None:
    for term in claim["spec"]["requirements"]:
        if term["key"] == wk.LABEL_ZONE:
            return str(term["values"][0])
    return None


def test_a_gangs_nodeclaims_carry_the_unit_id_and_size() -> None:
    h = gang_harness()
    h.run(3)
    claims = h.claims()
    assert len(claims) == GANG
    units = {c["metadata"]["labels"][wk.LABEL_GANG] for c in claims}
    assert len(units) == 1
    assert {c["metadata"]["annotations"][wk.ANNOTATION_GANG_SIZE] for c in claims} == {"4"}
    assert {c["metadata"]["annotations"][wk.ANNOTATION_GANG_GROUPS] for c in claims} == {
        "coscheduling/default/trainers"
    }
    launched = [
        c for c in claims if any(x["type"] == "Launched" for x in c["status"]["conditions"])
    ]
    assert len(launched) == GANG
    assert len(h.cloud.created) == GANG


def test_a_gang_whose_third_nodeclaim_hits_ice_leaves_no_sibling_and_is_replanned_whole() -> None:
    h = gang_harness()
    failed = ice_on_third_launch(h)
    h.run(3)
    (zone,) = failed
    # the first unit is gone: no launched sibling left running in the failed zone
    assert [c for c in h.cloud.created.values() if c.zone == zone] == []
    assert len(h.cloud.delete_calls) == 2  # the two siblings launched before the ICE
    h.run(30)
    claims = h.claims()
    assert len(claims) == GANG  # re-planned whole
    assert {zone_of(c) for c in claims} != {zone}
    assert len({zone_of(c) for c in claims}) == 1
    assert len({c["metadata"]["labels"][wk.LABEL_GANG] for c in claims}) == 1
    assert len(h.cloud.created) == GANG
    assert all(c.zone != zone for c in h.cloud.created.values())
    assert h.events("InsufficientCapacityError")


def test_a_gang_nodeclaim_that_cannot_be_created_leaves_no_sibling() -> None:
    h = gang_harness()
    original = h.kube.create
    made: list[str] = []

    def create(resource: Any, body: Any, **kwargs: Any) -> Any:
        if resource.plural == "nodeclaims":
            made.append(body["metadata"]["generateName"])
            if len(made) >= 3:  # the API fails from the third create on
                raise KubeApiError("the server is unavailable", code=503)
        return original(resource, body, **kwargs)

    h.kube.create = create  # type: ignore[method-assign]
    h.run(3)
    assert len(made) >= 3
    assert h.claims() == []  # the ones created before each failure were deleted
    assert h.cloud.create_calls == []  # nothing launched for a partial gang
    assert not h.events("Nominated")


def claim_plan(name: str, *gangs: str) -> NodeClaimPlan:
    return NodeClaimPlan(
        name=name,
        node_pool="p",
        instance_types=("t",),
        instance_type="t",
        capacity_type="on-demand",
        zone="z",
        price_per_hour=1.0,
        requests={},
        pods=(),
        gangs=gangs,
    )


def test_launch_units_join_nodeclaims_that_share_a_gang() -> None:
    claims = [
        claim_plan("a", "g1"),
        claim_plan("b"),
        claim_plan("c", "g2"),
        claim_plan("d", "g1", "g2"),
        claim_plan("e", "g3"),
    ]
    units = [[c.name for c in unit] for unit in launch_units(claims)]
    assert units == [["a", "c", "d"], ["b"], ["e"]]


def test_a_gang_unit_that_never_completes_launches_nothing_and_is_given_up() -> None:
    h = Harness()
    h.create(NODE_POOLS, nodepool())
    h.run()
    claim = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": "default-lonely",
            "labels": {wk.LABEL_NODEPOOL: "default", wk.LABEL_GANG: "g-lonely"},
            "annotations": {wk.ANNOTATION_GANG_SIZE: "3"},
            "finalizers": [wk.FINALIZER_TERMINATION],
        },
        "spec": {
            "nodeClassRef": {
                "group": "karpenter.k8s.aws",
                "kind": "EC2NodeClass",
                "name": "default",
            },
            "requirements": [
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["c.large"]}
            ],
        },
    }
    h.create(NODE_CLAIMS, claim)
    h.run(30)
    assert len(h.claims()) == 1  # waits for its siblings
    assert h.cloud.create_calls == []
    h.run(60)
    assert h.claims() == []  # given up: no partial gang
    assert h.cloud.create_calls == []
