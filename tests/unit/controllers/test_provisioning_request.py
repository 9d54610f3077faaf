"""ProvisioningRequest v1 (issue 19 item 2): both classes, their conditions, atomic launches,
bookings held for the consumer pods and released after 10 minutes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cloudprovider.errors import InsufficientCapacityError
from provisioner.apis import labels as wk
from provisioner.controllers.provisioning.requested import CLAIM_ANNOTATION, CLAIM_PODS_ANNOTATION
from provisioner.kube.resource import (
    NODE_CLAIMS,
    NODE_POOLS,
    POD_TEMPLATES,
    PODS,
    PROVISIONING_REQUESTS,
)
from tests.unit.controllers.harness import TYPES, Harness, nodepool, pending_pod
from tests.unit.podgroups.test_provreq import provisioning_request_validator

ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
CHECK = "check-capacity.autoscaling.x-k8s.io"
COUNT = 3


def template(name: str = "ppt", cpu: str = "7") -> dict[str, Any]:
    """One pod per c.2xlarge."""
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": name, "namespace": "default"},
        "template": {
            "spec": {
                "containers": [
                    {"name": "w", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}
                ]
            }
        },
    }


def request(
    name: str = "req",
    cls: str = ATOMIC,
    count: int = COUNT,
    template_name: str = "ppt",
    **parameters: str,
) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling.x-k8s.io/v1",
        "kind": "ProvisioningRequest",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "provisioningClassName": cls,
            "parameters": parameters,
            "podSets": [{"podTemplateRef": {"name": template_name}, "count": count}],
        },
    }


def consumer(name: str, req: str = "req", cls: str = ATOMIC, cpu: str = "7") -> dict[str, Any]:
    pod = pending_pod(name, cpu=cpu, memory="1Gi")
    pod["metadata"]["annotations"] = {
        "autoscaling.x-k8s.io/consume-provisioning-request": req,
        "autoscaling.x-k8s.io/provisioning-class-name": cls,
    }
    return pod


def harness(**pool: Any) -> Harness:
    h = Harness()
    h.create(NODE_POOLS, nodepool(**pool))
    h.run()
    return h


def on_demand() -> dict[str, Any]:
    return {
        "requirements": [
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
        ]
    }


def conditions(h: Harness, name: str = "req") -> dict[str, tuple[str, str]]:
    obj = h.kube.get(PROVISIONING_REQUESTS, name, namespace="default")
    return {
        c["type"]: (c["status"], c["reason"]) for c in obj.get("status", {}).get("conditions", [])
    }


def make_ready(h: Harness) -> None:
    """Register every launched NodeClaim's Node (the kubelet) and let it initialize."""
    for claim in h.claims():
        if claim.get("status", {}).get("providerID") and not claim["status"].get("nodeName"):
            h.kubelet(claim)
    h.run(2)


def request_claims(h: Harness, key: str = "default/req") -> list[dict[str, Any]]:
    return [c for c in h.claims() if c["metadata"]["annotations"].get(CLAIM_ANNOTATION) == key]


def submitted(h: Harness, *objects: dict[str, Any]) -> None:
    for obj in objects:
        resource = POD_TEMPLATES if obj["kind"] == "PodTemplate" else PROVISIONING_REQUESTS
        h.create(resource, obj)


# -- best-effort-atomic-scale-up -------------------------------------------------------------


def test_an_atomic_request_is_accepted_and_launched_as_one_gang_then_provisioned() -> None:
    h = harness(**on_demand())
    submitted(h, template(), request())
    h.run(1)
    assert conditions(h)["Accepted"] == ("True", "Accepted")
    h.run(15)
    claims = request_claims(h)
    assert len(claims) == COUNT
    assert len({c["metadata"]["labels"][wk.LABEL_GANG] for c in claims}) == 1
    assert sum(int(c["metadata"]["annotations"][CLAIM_PODS_ANNOTATION]) for c in claims) == COUNT
    assert "Provisioned" not in conditions(h)  # launched, not Ready yet
    make_ready(h)
    h.run(15)
    assert conditions(h)["Provisioned"] == ("True", "CapacityIsProvisioned")
    assert h.events("CapacityIsProvisioned")
    h.run(60)
    assert len(h.claims()) == COUNT  # booked: nothing launched twice


def test_consumer_pods_go_onto_the_booked_nodes_with_no_new_launch() -> None:
    h = harness(**on_demand())
    submitted(h, template(), request())
    h.run(15)
    make_ready(h)
    h.run(15)
    booked = {c["metadata"]["name"] for c in request_claims(h)}
    other = pending_pod("stranger", cpu="7", memory="1Gi")
    h.create(PODS, other)
    h.run(15)
    # someone else's pod may not take the booked room: it gets a NodeClaim of its own
    assert len(h.claims()) == COUNT + 1
    for i in range(COUNT):
        h.create(PODS, consumer(f"worker-{i}"))
    h.run(30)
    assert len(h.claims()) == COUNT + 1  # the consumers need no new capacity
    nominated = [e for e in h.events("Nominated") if "worker-" in e["involvedObject"]["name"]]
    targets = {e["message"].split("nodeclaim/")[1].split(",")[0] for e in nominated}
    assert len(nominated) == COUNT
    assert targets == booked
    h.run(11 * 60)
    assert "BookingExpired" not in conditions(h)  # consumed


def test_an_unconsumed_booking_expires_after_10_minutes() -> None:
    h = harness(**on_demand())
    submitted(h, template(), request())
    h.run(15)
    make_ready(h)
    h.run(15)
    assert conditions(h)["Provisioned"][0] == "True"
    h.run(9 * 60)
    assert "BookingExpired" not in conditions(h)
    h.run(2 * 60)
    assert conditions(h)["BookingExpired"] == ("True", "CapacityReservationTimeExpired")
    assert h.events("CapacityReservationTimeExpired")


def test_an_atomic_request_without_capacity_fails_after_valid_until_with_nothing_left() -> None:
    h = harness(**on_demand())

    def no_capacity(launch: Any) -> None:
        for instance_type in TYPES:
            for zone in ("zone-a", "zone-b"):
                h.cloud.mark_unavailable("on-demand", instance_type.name, zone)
        h.cloud.next_create_error = InsufficientCapacityError(f"no capacity for {launch.name}")

    h.cloud.before_create = no_capacity
    submitted(h, template(), request(ValidUntilSeconds="120"))
    h.run(60)
    assert h.cloud.create_calls  # it tried
    assert "Failed" not in conditions(h)
    h.run(70)
    assert conditions(h)["Failed"] == ("True", "Expired")
    h.run(60)
    assert h.claims() == []
    assert h.cloud.created == {}


def test_an_atomic_launch_failing_part_way_deletes_the_siblings() -> None:
    h = harness(**on_demand())

    def third_fails(launch: Any) -> None:
        if len(h.cloud.create_calls) == 3:
            h.cloud.next_create_error = InsufficientCapacityError(f"ice for {launch.name}")

    h.cloud.before_create = third_fails
    submitted(h, template(), request())
    h.run(3)
    assert len(h.cloud.delete_calls) == 2  # the two launched before the failure
    h.run(30)
    claims = request_claims(h)
    assert len(claims) == COUNT  # re-planned whole
    assert len({c["metadata"]["labels"][wk.LABEL_GANG] for c in claims}) == 1
    assert len(h.cloud.created) == COUNT


def test_a_missing_pod_template_fails_the_request_naming_the_field() -> None:
    h = harness()
    submitted(h, request(template_name="absent"))
    h.run(5)
    status, reason = conditions(h)["Failed"]
    assert (status, reason) == ("True", "FailedToCreatePods")
    obj = h.kube.get(PROVISIONING_REQUESTS, "req", namespace="default")
    (failed,) = [c for c in obj["status"]["conditions"] if c["type"] == "Failed"]
    assert "spec.podSets[0].podTemplateRef.name" in failed["message"]
    assert h.claims() == []


def test_a_bad_valid_until_fails_the_request_naming_the_parameter() -> None:
    h = harness()
    submitted(h, template(), request(ValidUntilSeconds="soon"))
    h.run(5)
    assert conditions(h)["Failed"] == ("True", "FailedToCreatePods")
    assert h.claims() == []


def test_other_classes_are_left_alone() -> None:
    h = harness()
    submitted(h, template(), request(cls="queued-provisioning.gke.io"))
    h.run(30)
    assert conditions(h) == {}
    assert h.claims() == []


# -- check-capacity ----------------------------------------------------------------------------


def test_check_capacity_finds_room_on_existing_nodes_and_books_it() -> None:
    h = harness(**on_demand())
    for i in range(2):
        h.create(PODS, pending_pod(f"seed-{i}", cpu="7", memory="1Gi"))
    h.run(15)
    make_ready(h)
    for pod in h.kube.list(PODS).items:  # the seeds finish: two empty nodes
        h.kube.delete(PODS, pod["metadata"]["name"], namespace="default")
    h.run(1)
    before = len(h.claims())
    submitted(h, template(), request(cls=CHECK, count=2))
    h.run(5)
    assert conditions(h)["Provisioned"] == ("True", "CapacityIsFound")
    h.create(PODS, pending_pod("stranger", cpu="7", memory="1Gi"))
    h.run(15)
    assert len(h.claims()) == before + 1  # the booked room is not given away
    for claim in h.claims():
        assert claim["metadata"]["annotations"].get(CLAIM_ANNOTATION) is None


def test_check_capacity_without_room_is_not_found_and_launches_nothing() -> None:
    h = harness()
    submitted(h, template(), request(cls=CHECK, count=2))
    h.run(5)
    assert conditions(h)["Provisioned"] == ("False", "CapacityIsNotFound")
    h.run(60)
    assert h.claims() == []
    assert h.kube.list(NODE_CLAIMS).items == []


def test_the_requests_and_the_status_written_validate_against_the_crd(shared: Path) -> None:
    validator = provisioning_request_validator(shared)
    for body in (request(), request(cls=CHECK, count=2, ValidUntilSeconds="60")):
        assert list(validator.iter_errors(body)) == []
    h = harness(**on_demand())
    submitted(h, template(), request())
    h.run(15)
    make_ready(h)
    h.run(11 * 60)
    stored = h.kube.get(PROVISIONING_REQUESTS, "req", namespace="default")
    assert set(conditions(h)) == {"Accepted", "Provisioned", "BookingExpired"}
    assert list(validator.iter_errors(stored)) == []
