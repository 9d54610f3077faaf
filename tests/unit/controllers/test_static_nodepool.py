"""Static NodePools (``spec.replicas``): kept at replicas, within ``limits.nodes``, scaled down in
Karpenter's order, never consolidated, left out of dynamic provisioning, shown by `jointer plan`."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
import yaml

from provisioner.apis.base import parse_object
from provisioner.apis.core import Pod
from provisioner.apis.nodeclaim import NodeClaim
from provisioner.apis.nodepool import NodePool
from provisioner.app.cmd_plan import plan_files
from provisioner.controllers.provisioning.static import (
    StaticPool,
    scale_down_candidates,
)
from provisioner.kube.resource import NODE_CLAIMS, NODE_POOLS, PODS
from provisioner.runtime.reconciler import Request
from tests.unit.controllers.harness import Harness, nodepool, pending_pod

EXAMPLES = Path(__file__).parents[3] / "examples"
CRD = Path("/work/shared/karpenter/crds/karpenter.sh_nodepools.yaml")


def static_pool(replicas: int, **spec: Any) -> dict[str, Any]:
    body = nodepool("static")
    body["spec"]["replicas"] = replicas
    body["spec"].update(spec)
    return body


def live(h: Harness) -> list[dict[str, Any]]:
    return [c for c in h.claims() if not c["metadata"].get("deletionTimestamp")]


def test_the_example_validates_against_karpenters_crd() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    crd = yaml.safe_load(CRD.read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    schema = version["schema"]["openAPIV3Schema"]
    documents = yaml.safe_load_all((EXAMPLES / "plan/static-nodepool.yaml").read_text())
    pools = [d for d in documents if d["kind"] == "NodePool"]
    assert any("replicas" in d["spec"] for d in pools)
    for body in [*pools, static_pool(2, limits={"nodes": "3"})]:
        jsonschema.validate(body, schema)


def test_a_static_nodepool_gets_exactly_replicas_nodeclaims_without_pods() -> None:
    h = Harness()
    h.create(NODE_POOLS, static_pool(3))
    h.run(5)
    claims = live(h)
    assert len(claims) == 3
    assert {c["metadata"]["labels"]["karpenter.sh/nodepool"] for c in claims} == {"static"}
    types = next(
        r["values"]
        for r in claims[0]["spec"]["requirements"]
        if r["key"] == "node.kubernetes.io/instance-type"
    )
    assert types == ["c.large", "c.xlarge", "c.2xlarge"]  # every type, cheapest first
    assert h.logs("created nodeclaim")
    h.run(120)
    assert len(live(h)) == 3  # stays put


def test_a_lost_nodeclaim_is_replaced() -> None:
    h = Harness()
    h.create(NODE_POOLS, static_pool(2))
    h.run(5)
    first = live(h)[0]["metadata"]["name"]
    h.kube.delete(NODE_CLAIMS, first)
    h.run(60)
    names = [c["metadata"]["name"] for c in live(h)]
    assert len(names) == 2
    assert first not in names


def test_limits_nodes_caps_a_static_nodepool() -> None:
    h = Harness()
    h.create(NODE_POOLS, static_pool(5, limits={"nodes": "2"}))
    h.run(5)
    assert len(live(h)) == 2
    assert h.logs("nodepool node limit reached")


def test_a_dynamic_nodepool_is_left_alone_until_it_turns_static(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    h = Harness()
    h.create(NODE_POOLS, nodepool("static"))
    h.run(5)
    snapshots: list[object] = []
    original = h.manager.state.snapshot

    def snapshot(*args: Any, **kwargs: Any) -> Any:
        snapshots.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(h.manager.state, "snapshot", snapshot)
    assert h.manager.static.reconcile(Request(name="static")).requeue_after is None
    assert snapshots == []  # no join of every node and pod for a dynamic pool
    assert live(h) == []
    h.kube.merge_patch(NODE_POOLS, "static", {"spec": {"replicas": 2}})
    h.run(5)
    assert len(live(h)) == 2
    assert snapshots


def test_scaling_replicas_down_deletes_the_surplus() -> None:
    h = Harness()
    h.create(NODE_POOLS, static_pool(3))
    h.run(5)
    h.kube.merge_patch(NODE_POOLS, "static", {"spec": {"replicas": 1}})
    h.run(5)
    assert len(live(h)) == 1
    (log,) = h.logs("deprovisioning nodeclaims to satisfy replica count")
    assert (log["current"], log["desired"], log["deprovision-count"]) == (3, 1, 2)


def test_static_pools_are_not_used_for_pending_pods_nor_consolidated() -> None:
    h = Harness()
    h.create(
        NODE_POOLS,
        static_pool(1, disruption={"consolidationPolicy": "WhenEmpty", "consolidateAfter": "0s"}),
    )
    h.run(5)
    (claim,) = live(h)
    claim = h.kube.get(NODE_CLAIMS, claim["metadata"]["name"])
    h.kubelet(claim)
    h.run(600)  # empty and consolidatable for ten minutes
    assert [c["metadata"]["name"] for c in live(h)] == [claim["metadata"]["name"]]
    h.create(PODS, pending_pod("big", cpu="20"))  # fits no static node: no dynamic pool either
    h.run(30)
    assert len(live(h)) == 1


def _claim(name: str, *, launched: bool = True, priority: str | None = None) -> NodeClaim:
    annotations = {"karpenter.sh/deprovisioning-priority": priority} if priority else {}
    body: dict[str, Any] = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": name,
            "labels": {"karpenter.sh/nodepool": "static"},
            "annotations": annotations,
        },
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"},
            "requirements": [],
        },
    }
    if launched:
        body["status"] = {"providerID": f"fake://{name}"}
    return parse_object(NodeClaim, body, kind="NodeClaim")


def _pod(name: str, *, protected: bool = False) -> Pod:
    annotations = {"karpenter.sh/do-not-disrupt": "true"} if protected else {}
    return parse_object(Pod, {"metadata": {"name": name, "annotations": annotations}}, kind="Pod")


def test_scale_down_order_is_unlaunched_then_empty_then_cheapest_to_disrupt() -> None:
    pool = parse_object(NodePool, static_pool(1), kind="NodePool")
    claims = (
        _claim("a"),
        _claim("b", launched=False),
        _claim("c"),
        _claim("d"),
        _claim("e", priority="5"),
    )
    pods = {
        "a": [_pod("a1"), _pod("a2")],
        "c": [_pod("c1", protected=True)],
        "d": [],
        "e": [_pod("e1"), _pod("e2"), _pod("e3")],
    }
    chosen = scale_down_candidates(
        StaticPool(nodepool=pool, running=claims, deleting=0, node_limit=None),
        pods,
        is_daemon=lambda _: False,
        do_not_disrupt=lambda p: bool(p.metadata.annotations),
    )
    # unlaunched b, empty d, then e (higher priority) before a; c (do-not-disrupt) stays
    assert [c.name for c in chosen] == ["b", "d", "e", "a"]


def test_jointer_plan_shows_the_static_nodeclaims() -> None:
    result = plan_files(
        [str(EXAMPLES / "plan/static-nodepool.yaml")],
        catalog_path=None,
        region="us-east-1",
        time_limit=5.0,
        policy="greedy",
        stderr=io.StringIO(),
    )
    static = result.static_node_claims
    assert [c.node_pool for c in static] == ["ingress"] * 3
    assert all(c.pods == () for c in static)
    assert static[0].instance_type == static[0].instance_types[0]
    assert {c.node_pool for c in result.node_claims} == {"general"}
    assert result.to_json()["staticNodeClaims"][0]["nodePool"] == "ingress"
