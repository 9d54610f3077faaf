"""NodeOverlays in `jointer simulate`: applied by the same controllers `jointer run` runs."""

from __future__ import annotations

from typing import Any

import pytest

from provisioner.kube.resource import NODE_CLAIMS, NODE_OVERLAYS
from tests.e2e.conftest import inline, run

pytestmark = pytest.mark.usefixtures("test_catalog")

_POOL_AND_PODS = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: karpenter.k8s.aws/instance-family, operator: In, values: [c6a, m6a]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
---
apiVersion: v1
kind: Pod
metadata: {name: web-0, namespace: default}
spec:
  containers:
  - name: app
    image: registry.example/web:1
    resources: {requests: {cpu: "1", memory: 1Gi}}
"""

_PRICE = """
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: no-c6a}
spec:
  requirements:
  - {key: karpenter.k8s.aws/instance-family, operator: In, values: [c6a]}
  priceAdjustment: "+1000%"
"""

_CAPACITY = """
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: widgets}
spec:
  requirements:
  - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m6a]}
  capacity: {example.com/widget: "2"}
---
apiVersion: v1
kind: Pod
metadata: {name: gadget-0, namespace: default}
spec:
  containers:
  - name: app
    image: registry.example/gadget:1
    resources: {requests: {cpu: "1", memory: 1Gi, example.com/widget: "1"}}
"""


def _scenario(*overlays: str) -> Any:
    steps: list[dict[str, Any]] = [{"at": "0s", "applyFile": "nodeclass.yaml"}]
    steps += [{"at": "0s", "apply": overlay} for overlay in overlays]
    steps.append({"at": "10s", "apply": _POOL_AND_PODS})
    return inline(
        {
            "apiVersion": "jointer.dev/v1alpha1",
            "kind": "Scenario",
            "metadata": {"name": "overlay"},
            "spec": {
                "region": "us-east-1",
                "clusterName": "demo",
                "duration": "3m",
                "steps": steps,
            },
        }
    )


def _families(report: dict[str, Any]) -> set[str]:
    return {c["instanceType"].split(".")[0] for c in report["nodeClaims"] if c["instanceType"]}


def _listed(simulation: Any) -> list[list[str]]:
    """Each NodeClaim's instance types, cheapest first as the provisioner priced them."""
    return [
        next(
            t["values"]
            for t in claim["spec"]["requirements"]
            if t["key"] == "node.kubernetes.io/instance-type"
        )
        for claim in simulation.world.kube.list(NODE_CLAIMS).items
    ]


def test_a_price_overlay_reorders_what_the_provisioner_asks_for() -> None:
    _, plain = run(_scenario())
    assert [types[0].split(".")[0] for types in _listed(plain)] == ["c6a"]
    _, adjusted = run(_scenario(_PRICE))
    assert [types[0].split(".")[0] for types in _listed(adjusted)] == ["m6a"]
    status = adjusted.world.kube.get(NODE_OVERLAYS, "no-c6a")["status"]
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "ValidationSucceeded": "True",
        "Ready": "True",
    }


def test_a_capacity_overlay_changes_what_is_launched() -> None:
    plain, _ = run(_scenario())
    assert _families(plain) == {"c6a"}
    report, _ = run(_scenario(_CAPACITY))
    # the widget pod fits only the overlaid m6a types (without the overlay it waits)
    assert "m6a" in _families(report)
