"""The unified detection table (``pod-groups.md`` §8): which pod group a pod is in.

Rows are tried in order and the first match wins:

1. Kubernetes Workload API (``spec.schedulingGroup`` / ``spec.workloadRef``)
2. KAI-Scheduler (annotation ``pod-group-name`` or ``schedulerName: kai-scheduler``)
3. Volcano (annotation ``scheduling.k8s.io/group-name`` or ``schedulerName: volcano``)
4. coscheduling (label ``scheduling.x-k8s.io/pod-group``)
5. Kueue pod group (label ``kueue.x-k8s.io/pod-group-name``)
6. Kueue Workload (annotation ``kueue.x-k8s.io/workload`` + label ``kueue.x-k8s.io/podset``)
7. ProvisioningRequest consumer (``autoscaling.x-k8s.io/consume-provisioning-request``)
8. LeaderWorkerSet (labels ``leaderworkerset.sigs.k8s.io/name`` + ``group-index``)
9. JobSet (``jobset-name`` + ``replicatedjob-name`` + ``job-index``)
10. none: the pod is its own group of one (``None``)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from provisioner.apis.core import Pod
from provisioner.apis.podmemo import PER_POD_SLACK, PerPod
from provisioner.podgroups import coscheduling, jobset, kai, kueue, lws, provreq, volcano, workload
from provisioner.podgroups.model import PodGroupRef

__all__ = ["DETECTED_SLACK", "DETECTION_TABLE", "DetectionMemo", "detect_group"]

DETECTION_TABLE: Final[tuple[Callable[[Pod], PodGroupRef | None], ...]] = (
    workload.detect,
    kai.detect,
    volcano.detect,
    coscheduling.detect,
    kueue.detect_pod_group,
    kueue.detect_workload,
    provreq.detect,
    lws.detect,
    jobset.detect,
)
"""Rows 1-9 in order."""


def detect_group(pod: Pod) -> PodGroupRef | None:
    """Return the pod's group by the first matching row, or ``None`` (row 10: no group)."""
    for row in DETECTION_TABLE:
        ref = row(pod)
        if ref is not None:
            return ref
    return None


DETECTED_SLACK: Final = PER_POD_SLACK
"""Pods a :class:`DetectionMemo` may hold beyond twice the live ones before starting again."""


class DetectionMemo:
    """``detect_group`` computed once per pod object (callable like it).

    For a caller that reads the same pods many times (a disruption pass's simulations and the
    passes that follow). Pods are immutable and each is held while remembered, so an identity
    is never recycled; :meth:`bound` lets the caller drop the pods of earlier snapshots.
    """

    __slots__ = ("_known",)

    def __init__(self) -> None:
        self._known: PerPod[PodGroupRef | None] = PerPod()

    def __call__(self, pod: Pod) -> PodGroupRef | None:
        """The pod's group, as ``detect_group`` gives it."""
        return self._known.get(pod, detect_group)

    def __len__(self) -> int:
        return len(self._known)

    def bound(self, live: int) -> None:
        """Start again when holding more than twice ``live`` pods (plus some slack)."""
        self._known.bound(live)
