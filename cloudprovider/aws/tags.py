"""AWS resource tag keys Jointer writes and filters on (karpenter-aws.md §10).

Tag keys that are also Kubernetes label keys come from ``provisioner.apis.labels``; the AWS-only
ones are named here, the one place that spells them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from provisioner.apis.labels import LABEL_EC2NODECLASS, LABEL_NODEPOOL, LABEL_REGION

__all__ = [
    "TAG_EKS_CLUSTER_NAME",
    "TAG_NAME",
    "TAG_NODECLAIM",
    "TAG_NODECLASS",
    "TAG_NODEPOOL",
    "TAG_OWNED",
    "TAG_REGION",
    "cluster_tag",
    "is_owned_by",
    "to_tag_list",
]

TAG_NODEPOOL: Final = LABEL_NODEPOOL
TAG_NODECLASS: Final = LABEL_EC2NODECLASS
TAG_REGION: Final = LABEL_REGION
TAG_NODECLAIM: Final = "karpenter.sh/nodeclaim"
TAG_EKS_CLUSTER_NAME: Final = "eks:eks-cluster-name"
TAG_NAME: Final = "Name"
TAG_OWNED: Final = "owned"
_CLUSTER_TAG_PREFIX: Final = "kubernetes.io/cluster/"


def cluster_tag(cluster: str) -> str:
    """``kubernetes.io/cluster/<cluster>`` (value ``owned``)."""
    return f"{_CLUSTER_TAG_PREFIX}{cluster}"


def is_owned_by(tags: Mapping[str, str], cluster: str) -> bool:
    """Whether a resource carries this cluster's ownership tags (and a NodePool tag).

    Nothing without them is ever modified or terminated.
    """
    return (
        tags.get(cluster_tag(cluster)) == TAG_OWNED
        and tags.get(TAG_EKS_CLUSTER_NAME) == cluster
        and TAG_NODEPOOL in tags
    )


def to_tag_list(tags: Mapping[str, str]) -> list[dict[str, str]]:
    """EC2's ``[{"Key": k, "Value": v}]`` shape, sorted by key."""
    return [{"Key": key, "Value": tags[key]} for key in sorted(tags)]
