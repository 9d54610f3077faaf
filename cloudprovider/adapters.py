"""Conversions from the ``karpenter.sh/v1`` API models to the CloudProvider port's values.

The core persists a NodeClaim, then calls ``create(launch_request(nodeclaim))``; it calls
``delete``/``get`` with ``status.providerID`` and ``is_drifted(claim_view(nodeclaim))``.
"""

from __future__ import annotations

from cloudprovider.protocol import CloudNodeClaim, LaunchRequest, NodeClassRef
from provisioner.apis.base import to_wire
from provisioner.apis.labels import LABEL_NODEPOOL
from provisioner.apis.nodeclaim import NodeClaim
from provisioner.scheduling.quantity import parse_quantity
from provisioner.scheduling.requirements import Requirements

__all__ = ["claim_view", "launch_request"]


def _node_class(nodeclaim: NodeClaim) -> NodeClassRef:
    ref = nodeclaim.spec.node_class_ref
    return NodeClassRef(name=ref.name, kind=ref.kind, group=ref.group)


def launch_request(nodeclaim: NodeClaim) -> LaunchRequest:
    """What the provider needs to launch ``nodeclaim``."""
    metadata = nodeclaim.metadata
    requests = nodeclaim.spec.resources.requests if nodeclaim.spec.resources else None
    return LaunchRequest(
        name=metadata.name,
        uid=metadata.uid,
        nodepool=metadata.labels.get(LABEL_NODEPOOL, ""),
        node_class=_node_class(nodeclaim),
        requirements=Requirements.from_terms(to_wire(r) for r in nodeclaim.spec.requirements),
        requests={name: parse_quantity(value) for name, value in (requests or {}).items()},
        labels=dict(metadata.labels),
        annotations=dict(metadata.annotations),
        taints=nodeclaim.spec.taints,
        startup_taints=nodeclaim.spec.startup_taints,
    )


def claim_view(nodeclaim: NodeClaim) -> CloudNodeClaim:
    """The persisted NodeClaim as the provider sees it (for ``is_drifted``)."""
    status = nodeclaim.status
    provider_id = (status.provider_id if status else None) or ""
    return CloudNodeClaim(
        provider_id=provider_id,
        instance_id=provider_id.rpartition("/")[2],
        name=nodeclaim.name,
        nodepool=nodeclaim.metadata.labels.get(LABEL_NODEPOOL, ""),
        node_class=nodeclaim.spec.node_class_ref.name,
        image_id=(status.image_id if status else None) or "",
        labels=dict(nodeclaim.metadata.labels),
        annotations=dict(nodeclaim.metadata.annotations),
    )
