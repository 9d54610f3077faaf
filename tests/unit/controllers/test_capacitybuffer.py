"""CapacityBuffers: resolution (replicas, percentage, limits, errors), the status controller, the
provisioner keeping and re-provisioning the room, disruption keeping it, and `jointer plan`."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from provisioner.app.cmd_plan import plan_files
from provisioner.controllers.disruption.candidates import build_candidates
from provisioner.controllers.disruption.facts import ClusterFacts
from provisioner.controllers.provisioning.buffers import (
    buffer_pods,
    is_buffer_pod,
    resolve,
    resolve_all,
)
from provisioner.controllers.provisioning.controller import bind_buffer_pods, with_buffer_pods
from provisioner.controllers.provisioning.planner import PlannerConfig
from provisioner.kube.resource import CAPACITY_BUFFERS, NODE_POOLS, POD_TEMPLATES, PODS
from tests.unit.controllers.disruption.objects import (
    NOW,
    catalog_of,
    claim,
    node,
    running,
    state_of,
)
from tests.unit.controllers.disruption.world import nodepool, pod
from tests.unit.controllers.harness import Harness
from tests.unit.controllers.harness import nodepool as harness_nodepool

SCHEMAS = Path("/work/shared/batch-apis/autoscaler/autoscaling.x-k8s.io_capacitybuffers.yaml")


def template(name: str = "chunk", cpu: str = "1", memory: str = "1Gi") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": name, "namespace": "default"},
        "template": {
            "metadata": {"labels": {"app": "buffer"}},
            "spec": {
                "containers": [
                    {"name": "pause", "resources": {"requests": {"cpu": cpu, "memory": memory}}}
                ]
            },
        },
    }


def deployment(replicas: int, cpu: str = "500m") -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": cpu}}}]},
            },
        },
    }


def buffer(name: str = "room", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling.x-k8s.io/v1beta1",
        "kind": "CapacityBuffer",
        "metadata": {"name": name, "namespace": "default", "generation": 1},
        "spec": spec,
    }


def _index(*objects: dict[str, Any]) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {(o["kind"], "default", o["metadata"]["name"]): o for o in objects}


def _conditions(resolution: Any) -> dict[str, tuple[str, str]]:
    return {c.type: (c.status, c.reason) for c in resolution.conditions}


# -- the CRs the tests use validate against the CRD ----------------------------------------------


def test_the_buffers_of_these_tests_validate_against_the_crd() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    crd = yaml.safe_load(SCHEMAS.read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1beta1"]
    schema = version["schema"]["openAPIV3Schema"]
    scenario = yaml.safe_load(
        (Path(__file__).parents[3] / "examples/scenarios/headroom.yaml").read_text()
    )
    bundled = [
        d
        for step in scenario["spec"]["steps"]
        for d in yaml.safe_load_all(step.get("apply", ""))
        if d and d.get("kind") == "CapacityBuffer"
    ]
    assert bundled
    for body in [
        *bundled,
        buffer(podTemplateRef={"name": "chunk"}, replicas=3),
        buffer(
            scalableRef={"apiGroup": "apps", "kind": "Deployment", "name": "web"}, percentage=20
        ),
        buffer(podTemplateRef={"name": "chunk"}, limits={"cpu": "10"}),
    ]:
        jsonschema.validate(body, schema)


# -- resolution ---------------------------------------------------------------------------------


def test_replicas_of_a_pod_template_become_virtual_pods() -> None:
    resolution = resolve(buffer(podTemplateRef={"name": "chunk"}, replicas=3), _index(template()))
    assert resolution.chunks == 3
    assert _conditions(resolution)["ReadyForProvisioning"] == ("True", "AttributesSetSuccessfully")
    pods = buffer_pods([resolution])
    assert [p.key for p in pods] == [f"default/capacitybuffer-room-{i}" for i in range(3)]
    assert all(is_buffer_pod(p) for p in pods)
    assert pods[0].metadata.annotations["karpenter.sh/capacity-buffer-name"] == "room"
    assert pods[0].metadata.labels == {"app": "buffer"}


@pytest.mark.parametrize(
    ("replicas", "percentage", "scale", "chunks"),
    [
        (None, 20, 10, 2),  # 20 % of 10
        (None, 20, 3, 1),  # rounded up
        (None, 20, 0, 1),  # at least 1
        (5, 20, 10, 5),  # the larger of the two
        (1, 50, 10, 5),
    ],
)
def test_percentage_of_a_scalable_object(
    replicas: int | None, percentage: int, scale: int, chunks: int
) -> None:
    spec: dict[str, Any] = {
        "scalableRef": {"apiGroup": "apps", "kind": "Deployment", "name": "web"},
        "percentage": percentage,
    }
    if replicas is not None:
        spec["replicas"] = replicas
    resolution = resolve(buffer(**spec), _index(deployment(scale)))
    assert resolution.chunks == chunks
    assert resolution.template is not None
    assert resolution.template["metadata"]["labels"] == {"app": "web"}


def test_limits_cap_the_chunks_and_say_so() -> None:
    capped = resolve(
        buffer(podTemplateRef={"name": "chunk"}, replicas=10, limits={"cpu": "3500m"}),
        _index(template()),
    )
    assert capped.chunks == 3
    assert _conditions(capped)["LimitedByQuotas"] == ("True", "LimitsExceeded")
    alone = resolve(
        buffer(podTemplateRef={"name": "chunk"}, limits={"memory": "4Gi"}), _index(template())
    )
    assert alone.chunks == 4
    assert _conditions(alone)["LimitedByQuotas"][0] == "False"


@pytest.mark.parametrize(
    ("spec", "reason", "field"),
    [
        (
            {"podTemplateRef": {"name": "missing"}, "replicas": 1},
            "PodTemplateNotFound",
            "spec.podTemplateRef",
        ),
        (
            {
                "scalableRef": {"apiGroup": "apps", "kind": "Deployment", "name": "nope"},
                "replicas": 1,
            },
            "ScalableObjectNotFound",
            "spec.scalableRef",
        ),
        (
            {"scalableRef": {"apiGroup": "batch", "kind": "Job", "name": "web"}, "replicas": 1},
            "UnsupportedScalableRef",
            "spec.scalableRef",
        ),
        (
            {
                "podTemplateRef": {"name": "chunk"},
                "scalableRef": {"kind": "Deployment", "name": "web"},
            },
            "InvalidBufferSpec",
            "spec",
        ),
        (
            {"podTemplateRef": {"name": "chunk"}, "replicas": -1},
            "InvalidBufferSpec",
            "spec.replicas",
        ),
        (
            {"podTemplateRef": {"name": "chunk"}, "limits": {"cpu": "lots"}},
            "InvalidBufferSpec",
            "spec.limits",
        ),
        (
            {"podTemplateRef": {"name": "chunk"}, "replicas": 1, "provisioningStrategy": "x/y"},
            "UnsupportedProvisioningStrategy",
            "spec.provisioningStrategy",
        ),
    ],
)
def test_a_bad_buffer_is_not_ready_naming_the_field(
    spec: dict[str, Any], reason: str, field: str
) -> None:
    resolution = resolve(buffer(**spec), _index(template(), deployment(2)))
    assert resolution.chunks == 0
    assert resolution.template is None
    (condition,) = resolution.conditions
    assert (condition.type, condition.status, condition.reason) == (
        "ReadyForProvisioning",
        "False",
        reason,
    )
    assert field in condition.message
    assert buffer_pods([resolution]) == []


# -- the room: planned, kept by disruption -------------------------------------------------------


def _buffer_objects(replicas: int = 2) -> list[dict[str, Any]]:
    return [template(cpu="1500m"), buffer(podTemplateRef={"name": "chunk"}, replicas=replicas)]


def test_virtual_pods_bind_to_free_room_and_make_the_node_a_non_empty_candidate() -> None:
    # c.xlarge nodes with 3.9 CPU allocatable: two 1.5 CPU chunks fit on the empty one
    objects = [
        claim("a"),
        node("a"),
        running(pod("web-0", cpu="3"), "node-a"),
        claim("b"),
        node("b"),
        *_buffer_objects(),
    ]
    snapshot = state_of([nodepool(), *objects]).snapshot(NOW)
    bound, unbound = bind_buffer_pods(snapshot, PlannerConfig(policy="greedy"))
    assert unbound == []
    on_b = [p.metadata.name for p in bound.state_nodes["node-b"].pods]
    assert sorted(on_b) == ["capacitybuffer-room-0", "capacitybuffer-room-1"]
    facts = ClusterFacts.build(bound, NOW, frozenset())
    candidates = {
        c.name: c for c in build_candidates(facts, catalog_of(facts), in_flight=lambda _: False)
    }
    assert not candidates["node-b"].is_empty  # emptiness would delete it without the buffer
    unbuffered = ClusterFacts.build(snapshot, NOW, frozenset())
    plain = build_candidates(unbuffered, catalog_of(unbuffered), in_flight=lambda _: False)
    assert {c.name: c for c in plain}["node-b"].is_empty


def test_virtual_pods_that_fit_nowhere_are_unbound_and_planned_pending() -> None:
    objects = [claim("a"), node("a"), running(pod("web-0", cpu="3"), "node-a"), *_buffer_objects()]
    snapshot = state_of([nodepool(), *objects]).snapshot(NOW)
    _, unbound = bind_buffer_pods(snapshot, PlannerConfig(policy="greedy"))
    assert unbound == ["default/capacitybuffer-room-0", "default/capacitybuffer-room-1"]
    pending = with_buffer_pods(snapshot).pods
    assert not pending["default/capacitybuffer-room-0"].spec.node_name
    assert len(resolve_all(snapshot.group_objects)) == 1


# -- the controllers ----------------------------------------------------------------------------


def _status(h: Harness) -> dict[str, Any]:
    status: dict[str, Any] = h.kube.get(CAPACITY_BUFFERS, "room", namespace="default")["status"]
    return status


def test_the_provisioner_buys_the_room_and_rebuys_it_when_real_pods_take_it() -> None:
    h = Harness()
    h.create(NODE_POOLS, harness_nodepool())
    h.create(POD_TEMPLATES, template(cpu="1500m", memory="1Gi"))
    h.create(CAPACITY_BUFFERS, buffer(podTemplateRef={"name": "chunk"}, replicas=2))
    h.run(15)
    (first,) = h.claims()
    assert first["spec"]["resources"]["requests"]["cpu"] == "3"
    status = _status(h)
    assert status["replicas"] == 2
    assert status["podTemplateRef"] == {"name": "chunk"}
    assert status["provisioningStrategy"] == "buffer.x-k8s.io/active-capacity"
    h.run(40)  # the buffer controller looks again: the in-flight NodeClaim holds the room
    conditions = {c["type"]: c for c in _status(h)["conditions"]}
    assert conditions["Provisioning"]["status"] == "True"
    assert conditions["Provisioning"]["reason"] == "FitsExistingCapacity"
    # a real pod takes the room: within 30 s the buffer is re-provisioned
    first = h.claims()[0]
    h.kubelet(first)
    h.run(5)
    node_name = f"ip-{first['metadata']['name']}"
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "real", "namespace": "default"},
        "spec": {
            "nodeName": node_name,
            "containers": [{"name": "app", "resources": {"requests": {"cpu": "1500m"}}}],
        },
        "status": {"phase": "Running"},
    }
    h.create(PODS, body)
    assert len(h.claims()) == 1
    h.run(45)
    assert len(h.claims()) == 2
    assert not any(
        e["involvedObject"]["name"].startswith("capacitybuffer-") for e in h.events("Nominated")
    )


def test_a_bad_buffer_gets_a_status_naming_the_field_and_buys_nothing() -> None:
    h = Harness()
    h.create(NODE_POOLS, harness_nodepool())
    h.create(CAPACITY_BUFFERS, buffer(podTemplateRef={"name": "missing"}, replicas=2))
    h.run(60)
    assert h.claims() == []
    status = _status(h)
    assert status["replicas"] == 0
    (ready,) = [c for c in status["conditions"] if c["type"] == "ReadyForProvisioning"]
    assert ready["status"] == "False"
    assert ready["reason"] == "PodTemplateNotFound"
    assert ready["message"].startswith("spec.podTemplateRef")


# -- jointer plan ---------------------------------------------------------------------------------


def test_jointer_plan_plans_a_buffer_of_a_deployment(tmp_path: Path) -> None:
    path = tmp_path / "buffer.yaml"
    documents = [
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": "general"},
            "spec": {
                "template": {
                    "spec": {
                        "nodeClassRef": {
                            "group": "karpenter.k8s.aws",
                            "kind": "EC2NodeClass",
                            "name": "default",
                        },
                        "requirements": [
                            {
                                "key": "karpenter.k8s.aws/instance-family",
                                "operator": "In",
                                "values": ["m6i"],
                            },
                            {
                                "key": "karpenter.sh/capacity-type",
                                "operator": "In",
                                "values": ["on-demand"],
                            },
                        ],
                    }
                }
            },
        },
        deployment(10, cpu="1"),
        buffer(
            scalableRef={"apiGroup": "apps", "kind": "Deployment", "name": "web"}, percentage=40
        ),
    ]
    path.write_text(yaml.safe_dump_all(documents))
    result = plan_files(
        [str(path)],
        catalog_path=None,
        region="us-east-1",
        time_limit=5.0,
        policy="greedy",
        stderr=io.StringIO(),
    )
    planned = sorted(p for c in result.node_claims for p in c.pods)
    assert planned == [f"default/capacitybuffer-room-{i}" for i in range(4)]
    assert json.dumps(result.to_json())


def test_a_buffer_whose_template_goes_away_stops_asking_and_says_why() -> None:
    h = Harness()
    h.create(NODE_POOLS, harness_nodepool())
    h.create(POD_TEMPLATES, template())
    h.create(CAPACITY_BUFFERS, buffer(podTemplateRef={"name": "chunk"}, replicas=1))
    h.run(15)
    assert _status(h)["podTemplateRef"] == {"name": "chunk"}
    h.kube.delete(POD_TEMPLATES, "chunk", namespace="default")
    h.run(35)
    status = _status(h)
    assert status["replicas"] == 0
    assert "podTemplateRef" not in status
    assert "podTemplateGeneration" not in status
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["ReadyForProvisioning"]["reason"] == "PodTemplateNotFound"
    assert "Provisioning" not in conditions
