"""Builders for planner scenarios: small manifests, a small catalog, and a checked run."""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from cloudprovider.aws.catalog import Catalog, read_catalog
from provisioner.app.cmd_plan import plan_files
from tests.plancheck import check_plan

ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")


def _offerings(on_demand: float, zones: Sequence[str] = ZONES) -> list[dict[str, Any]]:
    return [
        {"zone": zone, "capacityType": capacity_type, "price": price, "available": True}
        for zone in zones
        for capacity_type, price in (("on-demand", on_demand), ("spot", round(on_demand * 0.4, 4)))
    ]


def _type(
    name: str, cpu: int, memory_gi: int, pods: int, price: float, *, gpus: int = 0
) -> dict[str, Any]:
    capacity = {"cpu": str(cpu), "memory": f"{memory_gi}Gi", "pods": str(pods)}
    allocatable = {"cpu": f"{cpu * 1000 - 100}m", "memory": f"{memory_gi * 1024 - 512}Mi"}
    allocatable["pods"] = str(pods)
    if gpus:
        capacity["nvidia.com/gpu"] = str(gpus)
        allocatable["nvidia.com/gpu"] = str(gpus)
    return {
        "name": name,
        "capacity": capacity,
        "allocatable": allocatable,
        "offerings": _offerings(price),
    }


SMALL_CATALOG: dict[str, Any] = {
    "apiVersion": "jointer.dev/v1alpha1",
    "kind": "InstanceCatalog",
    "region": "us-east-1",
    "instanceTypes": [
        _type("c6i.large", 2, 4, 29, 0.085),
        _type("c6i.xlarge", 4, 8, 58, 0.17),
        _type("m6i.xlarge", 4, 16, 58, 0.192),
        _type("m6i.2xlarge", 8, 32, 58, 0.384),
        _type("r6i.2xlarge", 8, 64, 58, 0.504),
        _type("g5.xlarge", 4, 16, 58, 1.006, gpus=1),
        _type("g5.12xlarge", 48, 192, 234, 5.672, gpus=4),
        _type("p4d.24xlarge", 96, 1152, 737, 32.77, gpus=8),
    ],
}


def small_catalog() -> Catalog:
    """The small catalog, resolved."""
    return read_catalog(SMALL_CATALOG)


def nodepool(
    name: str,
    *,
    requirements: Sequence[Mapping[str, Any]] = (),
    taints: Sequence[Mapping[str, Any]] = (),
    limits: Mapping[str, str] | None = None,
    weight: int | None = None,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A karpenter.sh/v1 NodePool."""
    spec: dict[str, Any] = {
        "template": {
            "spec": {
                "nodeClassRef": {
                    "group": "karpenter.k8s.aws",
                    "kind": "EC2NodeClass",
                    "name": "default",
                },
                "requirements": list(requirements),
            }
        }
    }
    if taints:
        spec["template"]["spec"]["taints"] = list(taints)
    if labels:
        spec["template"]["metadata"] = {"labels": dict(labels)}
    if limits is not None:
        spec["limits"] = dict(limits)
    if weight is not None:
        spec["weight"] = weight
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": spec,
    }


def pod(
    name: str,
    *,
    namespace: str = "default",
    cpu: str = "500m",
    memory: str = "512Mi",
    gpu: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    node_selector: Mapping[str, str] | None = None,
    tolerations: Sequence[Mapping[str, Any]] = (),
    spreads: Sequence[Mapping[str, Any]] = (),
    affinity: Mapping[str, Any] | None = None,
    claims: Sequence[str] = (),
    node_name: str | None = None,
    scheduler: str | None = None,
) -> dict[str, Any]:
    """A v1 Pod (pending and Unschedulable unless ``node_name`` is given)."""
    requests: dict[str, str] = {"cpu": cpu, "memory": memory}
    if gpu is not None:
        requests["nvidia.com/gpu"] = gpu
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "image": "app:1", "resources": {"requests": requests}}]
    }
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if tolerations:
        spec["tolerations"] = list(tolerations)
    if spreads:
        spec["topologySpreadConstraints"] = list(spreads)
    if affinity:
        spec["affinity"] = dict(affinity)
    if claims:
        spec["volumes"] = [
            {"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}}
            for i, c in enumerate(claims)
        ]
    if scheduler:
        spec["schedulerName"] = scheduler
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        metadata["labels"] = dict(labels)
    if annotations:
        metadata["annotations"] = dict(annotations)
    if node_name:
        spec["nodeName"] = node_name
        status: dict[str, Any] = {"phase": "Running"}
    else:
        status = {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": status}


def node(
    name: str,
    *,
    zone: str = "us-east-1a",
    pool: str = "default",
    cpu: str = "4",
    memory: str = "16Gi",
    pods: str = "58",
    gpu: str | None = None,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, Any]] = (),
    instance_type: str = "m6i.xlarge",
) -> dict[str, Any]:
    """A ready v1 Node of a NodePool."""
    resources = {"cpu": cpu, "memory": memory, "pods": pods}
    if gpu is not None:
        resources["nvidia.com/gpu"] = gpu
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "karpenter.sh/nodepool": pool,
                "topology.kubernetes.io/zone": zone,
                "kubernetes.io/hostname": name,
                "node.kubernetes.io/instance-type": instance_type,
                "karpenter.sh/capacity-type": "on-demand",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/os": "linux",
                **(labels or {}),
            },
        },
        "spec": {"providerID": f"aws:///{zone}/i-{name}", "taints": list(taints)},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def zone_spread(
    app: str, max_skew: int = 1, key: str = "topology.kubernetes.io/zone"
) -> dict[str, Any]:
    """A DoNotSchedule spread over ``key`` selecting ``app``."""
    return {
        "maxSkew": max_skew,
        "topologyKey": key,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": app}},
    }


def tolerate(key: str) -> dict[str, Any]:
    """A toleration of every effect of ``key``."""
    return {"key": key, "operator": "Exists"}


@dataclass
class Run:
    """One `plan_files` run: the plan document, stderr and the checker's verdict."""

    plan: dict[str, Any]
    stderr: str
    violations: list[str]

    def placed(self) -> dict[str, str]:
        """Pod -> NodeClaim or existing node name."""
        result = {p: c["name"] for c in self.plan["nodeClaims"] for p in c["pods"]}
        result.update({p: n["name"] for n in self.plan["existingNodes"] for p in n["pods"]})
        return result

    def unschedulable(self) -> dict[str, str]:
        """Pod -> reason."""
        return {u["pod"]: u["reason"] for u in self.plan["unschedulable"]}

    def ignored(self) -> dict[str, str]:
        """Pod -> reason."""
        return {u["pod"]: u["reason"] for u in self.plan["ignored"]}

    def claim_of(self, pod_key: str) -> dict[str, Any]:
        """The NodeClaim entry holding ``pod_key``."""
        return next(c for c in self.plan["nodeClaims"] if pod_key in c["pods"])


def run_plan(
    objects: Sequence[Mapping[str, Any]],
    tmp_path: Path,
    *,
    policy: str = "jointer",
    catalog: Mapping[str, Any] | None = None,
    deterministic_time: float = 2.0,
) -> Run:
    """Plan ``objects`` through `plan_files` (standard input) on the small catalog and check it."""
    data = catalog or SMALL_CATALOG
    catalog_path = tmp_path / "catalog.json"
    catalog_path.write_text(json.dumps(data), encoding="utf-8")
    stderr = io.StringIO()
    result = plan_files(
        ["-"],
        catalog_path=str(catalog_path),
        region="us-east-1",
        time_limit=5.0,
        policy=policy,
        stderr=stderr,
        stdin=io.StringIO(yaml.safe_dump_all(list(objects))),
        deterministic_time=deterministic_time,
    )
    document = json.loads(json.dumps(result.to_json()))
    violations = check_plan(list(objects), read_catalog(data), document)
    return Run(document, stderr.getvalue(), violations)
