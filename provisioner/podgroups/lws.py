"""LeaderWorkerSet (``pod-groups.md`` §6, row 8): one group per replica (leader + workers)."""

from __future__ import annotations

from typing import Final

from pydantic import Field

from provisioner.apis.base import LenientModel
from provisioner.apis.core import ObjectMeta, Pod
from provisioner.podgroups import keys
from provisioner.podgroups.model import Ecosystem, PodGroupRef

__all__ = ["LEADER", "WORKERS", "LeaderWorkerSet", "detect", "size"]

API_GROUP: Final = "leaderworkerset.x-k8s.io"
LEADER: Final = "leader"
WORKERS: Final = "workers"


class LeaderWorkerTemplate(LenientModel):
    """``spec.leaderWorkerTemplate.size`` (leader included; default 1)."""

    size: int = 1


class LeaderWorkerSetSpec(LenientModel):
    """The part of an LWS spec Jointer reads."""

    leader_worker_template: LeaderWorkerTemplate = Field(default_factory=LeaderWorkerTemplate)


class LeaderWorkerSet(LenientModel):
    """A ``leaderworkerset.x-k8s.io/v1`` LeaderWorkerSet."""

    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: LeaderWorkerSetSpec = Field(default_factory=LeaderWorkerSetSpec)


def detect(pod: Pod) -> PodGroupRef | None:
    """Row 8: labels ``leaderworkerset.sigs.k8s.io/name`` + ``group-index``; ``<name>-<index>``."""
    labels = pod.metadata.labels
    name = labels.get(keys.LWS_NAME)
    index = labels.get(keys.LWS_GROUP_INDEX)
    if not name or index is None or index == "":
        return None
    worker = labels.get(keys.LWS_WORKER_INDEX)
    sub_group = None if worker is None else (LEADER if worker == "0" else WORKERS)
    return PodGroupRef(
        ecosystem=Ecosystem.LEADER_WORKER_SET,
        namespace=pod.metadata.namespace or "default",
        name=f"{name}-{index}",
        sub_group=sub_group,
    )


def size(pod: Pod, lws: LeaderWorkerSet | None) -> int | None:
    """Annotation ``leaderworkerset.sigs.k8s.io/size`` of any member, else the LWS's size."""
    value = pod.metadata.annotations.get(keys.LWS_SIZE)
    if value is not None:
        try:
            parsed = int(value.strip())
        except ValueError:
            parsed = 0
        if parsed > 0:
            return parsed
    if lws is not None and lws.spec.leader_worker_template.size > 0:
        return lws.spec.leader_worker_template.size
    return None
