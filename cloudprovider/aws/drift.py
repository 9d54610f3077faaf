"""Drift of launched instances from their EC2NodeClass, with Karpenter's reasons.

* ``NodeClassDrift``: the static part of the spec changed — the NodeClaim's
  ``karpenter.k8s.aws/ec2nodeclass-hash`` annotation differs from the current hash (same hash
  version only; selector terms are excluded, their results are checked dynamically below).
* ``AMIDrift``: the instance's image is not among the AMIs the nodeclass resolves to now.
* ``SubnetDrift``: the instance's subnet is not among the resolved subnets.
* ``SecurityGroupDrift``: the instance's security groups differ from the resolved set.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Final

from cloudprovider.aws.nodeclass import EC2NodeClass, EC2NodeClassStatus
from cloudprovider.aws.nodeclassstatus import CONDITION_READY
from cloudprovider.protocol import DRIFT_AMI, DRIFT_NODECLASS, DRIFT_SECURITY_GROUP, DRIFT_SUBNET
from provisioner.apis.labels import (
    ANNOTATION_EC2NODECLASS_HASH,
    ANNOTATION_EC2NODECLASS_HASH_VERSION,
)
from provisioner.apis.nodepool import restamp

__all__ = [
    "KARPENTER_NODECLASS_HASH_VERSION",
    "NODECLASS_HASH_VERSION",
    "dynamic_drift",
    "nodeclass_annotations",
    "nodeclass_hash",
    "ready_in_status",
    "restamp_nodeclass",
    "static_drift",
]

# Jointer's hash is not Karpenter's hashstructure value, so it carries its own version: claims
# annotated by Karpenter (``v5``) are skipped by the static check and re-stamped
# (:func:`restamp_nodeclass`) instead of all reported drifted after a migration.
NODECLASS_HASH_VERSION: Final = "jointer-v1"
KARPENTER_NODECLASS_HASH_VERSION: Final = "v5"
"""The version Karpenter's AWS provider writes (``v3`` in v1.0.0); never written by Jointer."""
# Selector results drift dynamically (checked against resolved resources), not by hash.
_DYNAMIC_FIELDS: Final = frozenset(
    {
        "subnetSelectorTerms",
        "securityGroupSelectorTerms",
        "amiSelectorTerms",
        "capacityReservationSelectorTerms",
    }
)


def nodeclass_hash(nodeclass: EC2NodeClass) -> str:
    """The hash of the nodeclass's static spec (decimal, like Karpenter's hashstructure)."""
    spec = nodeclass.spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    static = {k: v for k, v in spec.items() if k not in _DYNAMIC_FIELDS}
    digest = hashlib.sha256(json.dumps(static, sort_keys=True).encode()).hexdigest()
    return str(int(digest[:16], 16))


def nodeclass_annotations(nodeclass: EC2NodeClass) -> dict[str, str]:
    """The annotations a NodeClaim launched from ``nodeclass`` carries."""
    return {
        ANNOTATION_EC2NODECLASS_HASH: nodeclass_hash(nodeclass),
        ANNOTATION_EC2NODECLASS_HASH_VERSION: NODECLASS_HASH_VERSION,
    }


def restamp_nodeclass(
    nodeclass: EC2NodeClass, annotations: Mapping[str, str], *, drifted: bool
) -> dict[str, str]:
    """AWS ``nodeclass.hash``: the changes for a claim stamped under another hash version."""
    return restamp(
        annotations,
        hash_key=ANNOTATION_EC2NODECLASS_HASH,
        version_key=ANNOTATION_EC2NODECLASS_HASH_VERSION,
        current_hash=nodeclass_hash(nodeclass),
        version=NODECLASS_HASH_VERSION,
        drifted=drifted,
    )


def static_drift(nodeclass: EC2NodeClass, annotations: Mapping[str, str]) -> str | None:
    """``NodeClassDrift`` when the recorded hash (of the same version) differs."""
    recorded = annotations.get(ANNOTATION_EC2NODECLASS_HASH)
    version = annotations.get(ANNOTATION_EC2NODECLASS_HASH_VERSION)
    if recorded is None or version != NODECLASS_HASH_VERSION:
        return None
    return DRIFT_NODECLASS if recorded != nodeclass_hash(nodeclass) else None


def ready_in_status(status: EC2NodeClassStatus) -> bool:
    """Whether the status does not say the class is not Ready."""
    ready = next((c for c in status.conditions or () if c.type == CONDITION_READY), None)
    return ready is None or ready.status == "True"


def dynamic_drift(
    status: EC2NodeClassStatus,
    *,
    image_id: str,
    subnet_id: str,
    security_group_ids: frozenset[str],
) -> str | None:
    """AMI, subnet or security-group drift of one instance (first found, in that order).

    Judged against what the EC2NodeClass's status holds (the nodeclass controller keeps it
    resolved), as Karpenter does; none while the class is not Ready, and a kind the status
    lists nothing of is not judged.
    """
    if not ready_in_status(status):
        return None
    amis = {a.id for a in status.amis or ()}
    if amis and image_id and image_id not in amis:
        return DRIFT_AMI
    subnets = {s.id for s in status.subnets or ()}
    if subnets and subnet_id and subnet_id not in subnets:
        return DRIFT_SUBNET
    groups = {g.id for g in status.security_groups or ()}
    if groups and security_group_ids != groups:
        return DRIFT_SECURITY_GROUP
    return None
