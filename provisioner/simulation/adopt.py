"""Seeding a cluster as Karpenter left it: the ``karpenterNodes`` scenario step.

For each node asked for, what Karpenter v1 (AWS provider) leaves behind once a node is up:

* an EC2 instance launched from the NodeClass's resolved AMI, subnet and security groups, with
  Karpenter's tags (``kubernetes.io/cluster/<cluster>: owned``, ``eks:eks-cluster-name``,
  ``karpenter.sh/nodepool``, ``karpenter.k8s.aws/ec2nodeclass``, the NodeClass's ``spec.tags``,
  and, after registration, ``Name`` and ``karpenter.sh/nodeclaim``);
* a NodeClaim named ``<nodepool>-<5 chars>`` with Karpenter's hash annotations (its own hash
  values, versions ``v3`` and ``v5``), ``karpenter.k8s.aws/tagged``, the termination finalizer,
  the NodePool owner reference, and a status Launched, Registered, Initialized and Ready;
* its Node, Ready, with the claim's labels and annotations, ``karpenter.sh/registered`` and
  ``karpenter.sh/initialized``, the termination finalizer and the NodeClaim owner reference.

Pods created afterwards are bound to these nodes by the simulated kube-scheduler.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import datetime
from typing import Any, Final

from cloudprovider.aws.ami import ami_for
from cloudprovider.aws.catalog import Catalog
from cloudprovider.aws.drift import KARPENTER_NODECLASS_HASH_VERSION
from cloudprovider.aws.nodeclass import EC2NodeClass, parse_nodeclass
from cloudprovider.aws.nodeclassstatus import ResolvedNodeClass
from cloudprovider.aws.tags import (
    TAG_EKS_CLUSTER_NAME,
    TAG_NAME,
    TAG_NODECLAIM,
    TAG_NODECLASS,
    TAG_NODEPOOL,
    TAG_OWNED,
    cluster_tag,
)
from provisioner.apis import conditions as cond
from provisioner.apis import labels as wk
from provisioner.apis.base import parse_object, to_wire
from provisioner.apis.errors import ApiValidationError
from provisioner.apis.nodepool import KARPENTER_NODEPOOL_HASH_VERSION, NodePool
from provisioner.controllers.provisioning.controller import nodeclaim_body
from provisioner.controllers.provisioning.offerings import pool_template
from provisioner.controllers.provisioning.plan import NodeClaimPlan
from provisioner.kube.errors import NotFoundError
from provisioner.kube.memory import InMemoryKube
from provisioner.kube.protocol import JsonObject
from provisioner.kube.resource import EC2_NODE_CLASSES, NODE_CLAIMS, NODE_POOLS, NODES
from provisioner.scheduling.resources import format_resource_list
from provisioner.simulation.cloud import MotoCloud
from provisioner.simulation.kubelet import Kubelet, provider_id
from provisioner.simulation.scenario import KarpenterNodesStep

__all__ = ["KARPENTER_EC2NODECLASS_HASH", "KARPENTER_NODEPOOL_HASH", "SeedError", "seed"]

KARPENTER_NODEPOOL_HASH: Final = "6043272506829707052"
"""The ``karpenter.sh/nodepool-hash`` seeded claims carry: Karpenter's hashstructure value, which
Jointer does not compute (it only compares hashes of its own version)."""
KARPENTER_EC2NODECLASS_HASH: Final = "11467530536542478447"
"""The ``karpenter.k8s.aws/ec2nodeclass-hash`` seeded claims carry (see above)."""
_CLAIM_CONDITIONS: Final = (
    cond.NODECLAIM_CONDITION_LAUNCHED,
    cond.NODECLAIM_CONDITION_REGISTERED,
    cond.NODECLAIM_CONDITION_INITIALIZED,
    cond.CONDITION_READY,
)
"""The conditions of a claim Karpenter has launched, registered and initialized (all True)."""
_NAME_ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"
"""Kubernetes' generateName alphabet (five characters)."""


class SeedError(ValueError):
    """The step cannot be seeded; the message names the object and the field."""


def _get(kube: InMemoryKube, resource: Any, name: str, what: str) -> JsonObject:
    try:
        return kube.get(resource, name)
    except NotFoundError as error:
        raise SeedError(f"{what} {name!r} not found (apply it in an earlier step)") from error


def _name(nodepool: str, rng: random.Random, kube: InMemoryKube) -> str:
    while True:
        name = f"{nodepool}-" + "".join(rng.choice(_NAME_ALPHABET) for _ in range(5))
        try:
            kube.get(NODE_CLAIMS, name)
        except NotFoundError:
            return name


class _Seeder:
    def __init__(
        self,
        *,
        kube: InMemoryKube,
        account: MotoCloud,
        kubelet: Kubelet,
        catalog: Catalog,
        rng: random.Random,
        region: str,
        now: datetime,
    ) -> None:
        self.kube = kube
        self.account = account
        self.kubelet = kubelet
        self.catalog = catalog
        self.rng = rng
        self.region = region
        self.now = now

    def one(
        self,
        nodepool: NodePool,
        nodeclass: EC2NodeClass,
        resolved: ResolvedNodeClass,
        *,
        instance_type: str,
        zone: str,
        capacity_type: str,
    ) -> str:
        known = self.catalog.get(instance_type)
        if known is None:
            raise SeedError(f"instanceType: {instance_type!r} is not in the catalog")
        if zone not in self.account.subnets:
            raise SeedError(f"zone: {zone!r} has no subnet (zones: {sorted(self.account.subnets)})")
        labels = {
            **{k: v for k, v in known.labels.items() if k != wk.LABEL_HOSTNAME},
            **nodepool.template_labels,
            wk.LABEL_INSTANCE_TYPE: instance_type,
            wk.LABEL_ZONE: zone,
            wk.LABEL_REGION: self.region,
            wk.LABEL_CAPACITY_TYPE: capacity_type,
            wk.LABEL_NODEPOOL: nodepool.name,
            wk.LABEL_EC2NODECLASS: nodeclass.name,
        }
        image = ami_for(resolved.amis, labels)
        if image is None:
            raise SeedError(f"EC2NodeClass {nodeclass.name!r} resolves no AMI for {instance_type}")
        claim_name = _name(nodepool.name, self.rng, self.kube)
        tags = {
            **(nodeclass.spec.tags or {}),
            cluster_tag(self.account.cluster): TAG_OWNED,
            TAG_EKS_CLUSTER_NAME: self.account.cluster,
            TAG_NODEPOOL: nodepool.name,
            TAG_NODECLASS: nodeclass.name,
            TAG_NODECLAIM: claim_name,
        }
        instance = self.account.run_instance(
            image_id=image.id,
            instance_type=instance_type,
            zone=zone,
            security_group_ids=[g.id for g in resolved.security_groups],
            tags=tags,
            capacity_type=capacity_type,
        )
        instance_id = str(instance["InstanceId"])
        node_name = str(instance.get("PrivateDnsName") or instance_id)
        self.account.client("ec2").create_tags(
            Resources=[instance_id], Tags=[{"Key": TAG_NAME, "Value": node_name}]
        )
        plan = NodeClaimPlan(
            name=claim_name,
            node_pool=nodepool.name,
            instance_types=(instance_type,),
            instance_type=instance_type,
            capacity_type=capacity_type,
            zone=zone,
            price_per_hour=0.0,
            requests={},
            pods=(),
        )
        try:
            claim_body = nodeclaim_body(plan, nodepool, pool_template(nodepool, [known]), ())
        except ApiValidationError as error:
            raise SeedError(f"NodePool {nodepool.name!r}: {error}") from error
        metadata = claim_body["metadata"]
        del metadata["generateName"]
        metadata["name"] = claim_name
        metadata["labels"] = labels
        # Karpenter's own hash values and versions, not Jointer's (its hashes are not recomputed).
        metadata["annotations"] |= {
            wk.ANNOTATION_NODEPOOL_HASH: KARPENTER_NODEPOOL_HASH,
            wk.ANNOTATION_NODEPOOL_HASH_VERSION: KARPENTER_NODEPOOL_HASH_VERSION,
            wk.ANNOTATION_EC2NODECLASS_HASH: KARPENTER_EC2NODECLASS_HASH,
            wk.ANNOTATION_EC2NODECLASS_HASH_VERSION: KARPENTER_NODECLASS_HASH_VERSION,
            wk.ANNOTATION_NODECLAIM_TAGGED: wk.TRUE,
        }
        claim = self.kube.create(NODE_CLAIMS, claim_body)
        conditions: tuple[cond.Condition, ...] = ()
        for kind in _CLAIM_CONDITIONS:
            conditions = cond.set_true(conditions, kind, now=self.now)
        self.kube.patch_status(
            NODE_CLAIMS,
            claim_name,
            {
                "status": {
                    "providerID": provider_id(zone, instance_id),
                    "nodeName": node_name,
                    "imageID": image.id,
                    "capacity": format_resource_list(known.capacity),
                    "allocatable": format_resource_list(known.allocatable),
                    "conditions": [to_wire(c) for c in conditions],
                }
            },
        )
        # The kubelet's Ready Node, then what Karpenter's registration and initialization add.
        node = self.kubelet.ready_node(instance_id)
        node["metadata"] |= {
            "annotations": dict(metadata["annotations"]),
            "finalizers": [wk.FINALIZER_TERMINATION],
            "ownerReferences": [
                {
                    "apiVersion": "karpenter.sh/v1",
                    "kind": "NodeClaim",
                    "name": claim_name,
                    "uid": claim["metadata"]["uid"],
                    "blockOwnerDeletion": True,
                }
            ],
        }
        node["metadata"]["labels"] |= {wk.LABEL_REGISTERED: wk.TRUE, wk.LABEL_INITIALIZED: wk.TRUE}
        node["spec"]["taints"] = [
            t for t in node["spec"]["taints"] if t.get("key") != wk.TAINT_UNREGISTERED
        ]
        self.kube.create(NODES, node)
        self.kubelet.adopt(instance_id, node_name)
        return claim_name


def seed(
    step: KarpenterNodesStep,
    *,
    kube: InMemoryKube,
    account: MotoCloud,
    kubelet: Kubelet,
    catalog: Catalog,
    resolve: Callable[[EC2NodeClass], ResolvedNodeClass],
    rng: random.Random,
    region: str,
    now: datetime,
) -> list[str]:
    """Create the step's instances, NodeClaims and Nodes as Karpenter would; their claim names.

    ``resolve`` resolves an EC2NodeClass (the AWS provider's resolver on the simulated account).

    Raises:
        SeedError: the NodePool or its EC2NodeClass is missing or invalid, a type or zone is
            unknown, or the NodeClass resolves nothing to launch from.
    """
    try:
        nodepool = parse_object(
            NodePool, _get(kube, NODE_POOLS, step.nodepool, "NodePool"), kind="NodePool"
        )
        nodeclass = parse_nodeclass(
            _get(kube, EC2_NODE_CLASSES, nodepool.node_class_ref.name, "EC2NodeClass")
        )
    except ApiValidationError as error:
        raise SeedError(str(error)) from error
    resolved = resolve(nodeclass)
    if not resolved.subnets or not resolved.security_groups or not resolved.amis:
        raise SeedError(f"EC2NodeClass {nodeclass.name!r} resolves no subnet, group or AMI")
    seeder = _Seeder(
        kube=kube,
        account=account,
        kubelet=kubelet,
        catalog=catalog,
        rng=rng,
        region=region,
        now=now,
    )
    return [
        seeder.one(
            nodepool,
            nodeclass,
            resolved,
            instance_type=node.instance_type,
            zone=node.zone,
            capacity_type=node.capacity_type,
        )
        for node in step.nodes
        for _ in range(node.count)
    ]
