"""The parity proof's tools: snapshot the embedded cluster at a provisioning batch, plan it offline.

:func:`observed` wraps the production controller factory of ``jointer simulate`` so that, at
each of the provisioning controller's batches, the cluster is written out as manifests (what
``kubectl get -o yaml`` of every kind the controller reads would give, with the provisioner's
nominations as ``status.nominatedNodeName``) plus an instance catalog of what the cloud
provider offered each NodePool then. :func:`replan` runs `jointer plan` on such a snapshot, and
:func:`summary` reduces a plan to what must agree: each NodeClaim's pool, instance types, zone,
capacity type and pods, and where the other pods went.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cloudprovider.aws.catalog import Catalog, catalog_to_wire
from cloudprovider.instancetype import InstanceType
from provisioner.app.cmd_plan import plan_files
from provisioner.controllers.assembly import ControllerSet
from provisioner.controllers.manager import BUFFER_RESOURCES
from provisioner.controllers.provisioning.controller import PoolSet
from provisioner.controllers.provisioning.plan import Plan
from provisioner.kube.errors import NotFoundError
from provisioner.kube.protocol import JsonObject, KubeClient
from provisioner.kube.resource import (
    DAEMON_SETS,
    EC2_NODE_CLASSES,
    NODE_CLAIMS,
    NODE_OVERLAYS,
    NODE_POOLS,
    NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    POD_DISRUPTION_BUDGETS,
    POD_GROUP_RESOURCES,
    POD_TEMPLATES,
    PODS,
    PRIORITY_CLASSES,
    STORAGE_CLASSES,
    Resource,
)
from provisioner.simulation.ports import Ports
from provisioner.simulation.wiring import manager_factory
from provisioner.state.cluster import Snapshot

_RESOURCES: tuple[Resource, ...] = (
    *BUFFER_RESOURCES,
    NODE_POOLS,
    EC2_NODE_CLASSES,
    NODE_OVERLAYS,
    PRIORITY_CLASSES,
    STORAGE_CLASSES,
    PERSISTENT_VOLUMES,
    PERSISTENT_VOLUME_CLAIMS,
    DAEMON_SETS,
    POD_DISRUPTION_BUDGETS,
    *POD_GROUP_RESOURCES,
    POD_TEMPLATES,
    NODES,
    NODE_CLAIMS,
    PODS,
)


@dataclass(frozen=True, slots=True)
class Batch:
    """One provisioning batch: the controller's decision and the cluster it decided on."""

    at: str
    manifests: Path
    catalog: Path
    decision: Plan


@dataclass
class Recorder:
    """Collects batches until ``limit`` were seen (later batches are not snapshotted)."""

    directory: Path
    region: str
    limit: int = 4
    batches: list[Batch] = field(default_factory=list)

    def factory(self) -> Callable[[Ports], ControllerSet]:
        """``manager_factory`` whose provisioner reports each batch here."""

        def build(ports: Ports) -> ControllerSet:
            controllers = manager_factory(ports)
            controllers.manager.provisioner.observer = lambda snapshot, pools, decision: (
                self._record(ports, snapshot, pools, decision)
            )
            return controllers

        return build

    def _record(self, ports: Ports, snapshot: Snapshot, pools: PoolSet, decision: Plan) -> None:
        if len(self.batches) >= self.limit:
            return
        index = len(self.batches)
        manifests = self.directory / f"batch-{index}.json"
        catalog = self.directory / f"batch-{index}-catalog.json"
        manifests.write_text(json.dumps(_manifests(ports.kube, snapshot)))
        catalog.write_text(json.dumps(_catalog(ports, pools, self.region)))
        self.batches.append(Batch(ports.clock.now().isoformat(), manifests, catalog, decision))


def _listed(kube: KubeClient, resource: Resource) -> list[JsonObject]:
    try:
        return list(kube.list(resource).items)
    except NotFoundError:
        return []


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace") or ""
    name = str(meta.get("name") or "")
    return f"{namespace or 'default'}/{name}" if obj.get("kind") in _NAMESPACED else name


_NAMESPACED = frozenset({"Pod", "DaemonSet", "PersistentVolumeClaim", "PodDisruptionBudget"})


def _manifests(kube: KubeClient, snapshot: Snapshot) -> JsonObject:
    """Every object the controller reads, in the order its cache holds them."""
    order: dict[str, Sequence[str]] = {
        "Pod": list(snapshot.pods),
        "Node": list(snapshot.nodes),
        "NodeClaim": list(snapshot.node_claims),
        "DaemonSet": list(snapshot.daemonsets),
    }
    items: list[JsonObject] = []
    for resource in _RESOURCES:
        if resource == POD_TEMPLATES:  # read (get) into the cache, never listed
            listed = [dict(o) for o in snapshot.group_objects if o.get("kind") == "PodTemplate"]
        else:
            listed = _listed(kube, resource)
        for obj in listed:
            obj.setdefault("apiVersion", resource.api_version)
            obj.setdefault("kind", resource.kind)
        keys = order.get(resource.kind)
        if keys is not None:
            by_key = {_key(obj): obj for obj in listed}
            listed = [by_key[k] for k in keys if k in by_key]
        if resource.kind == "NodePool":
            # the controller reports a NodePool it cannot read and goes on without it;
            # `jointer plan` refuses such input (exit 2): the snapshot leaves it out
            listed = [o for o in listed if _readable(snapshot, o)]
        items.extend(_nominated(obj, snapshot) for obj in listed)
    return {"apiVersion": "v1", "kind": "List", "items": items}


def _nominated(obj: JsonObject, snapshot: Snapshot) -> JsonObject:
    """A pod with its nomination written as ``status.nominatedNodeName``."""
    nomination = snapshot.nominations.get(_key(obj)) if obj["kind"] == "Pod" else None
    if nomination is None:
        return obj
    return {
        **obj,
        "status": {**(obj.get("status") or {}), "nominatedNodeName": nomination.node_claim},
    }


def _readable(snapshot: Snapshot, nodepool: Mapping[str, Any]) -> bool:
    entry = snapshot.nodepools.get(_key(nodepool))
    return entry is not None and entry.nodepool is not None


def _catalog(ports: Ports, pools: PoolSet, region: str) -> JsonObject:
    """What the cloud provider offered the batch's NodePools (before NodeOverlays)."""
    from cloudprovider.protocol import NodeClassRef, NodePoolRef  # noqa: PLC0415

    types: dict[str, InstanceType] = {}
    for name, (nodepool, _) in pools.items():
        ref = nodepool.node_class_ref
        offered = ports.cloud.get_instance_types(
            NodePoolRef(
                name=name, node_class=NodeClassRef(name=ref.name, kind=ref.kind, group=ref.group)
            )
        )
        for instance_type in offered:
            known = types.setdefault(instance_type.name, instance_type)
            assert known == instance_type, f"{instance_type.name} differs between NodePools"
    ordered = tuple(types[name] for name in sorted(types))
    return catalog_to_wire(Catalog(region, ordered))


def replan(batch: Batch, *, region: str, policy: str, seed: int, deterministic: float) -> Plan:
    """`jointer plan` on a batch's snapshot, with the simulation's planner settings."""
    result: Plan = plan_files(
        [str(batch.manifests)],
        catalog_path=str(batch.catalog),
        region=region,
        time_limit=30.0,
        policy=policy,
        stderr=io.StringIO(),
        deterministic_time=deterministic,
        random_seed=seed,
    )
    return result


def summary(plan: Plan) -> dict[str, Any]:
    """What a dry run and the controller must agree on (NodeClaim names are random)."""
    claims = sorted(
        (
            claim.node_pool,
            tuple(claim.instance_types),
            claim.zone,
            claim.capacity_type,
            tuple(sorted(claim.pods)),
        )
        for claim in plan.node_claims
    )
    return {
        "nodeClaims": claims,
        "existing": sorted((e.name, tuple(sorted(e.pods))) for e in plan.existing_nodes),
        "unschedulable": sorted((u.pod, u.reason) for u in plan.unschedulable),
        "ignored": sorted((i.pod, i.reason) for i in plan.ignored),
    }
