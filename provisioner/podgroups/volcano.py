"""Volcano (``pod-groups.md`` §2, row 3): PodGroup phase, Queue state, preemptability."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from pydantic import Field

from provisioner.apis.base import LenientModel
from provisioner.apis.core import ObjectMeta, Pod
from provisioner.podgroups import keys
from provisioner.podgroups.model import Ecosystem, PodGroupRef

__all__ = [
    "VolcanoPodGroup",
    "VolcanoQueue",
    "admission_reason",
    "detect",
    "min_count",
    "non_preemptible_reason",
]

API_GROUP: Final = "scheduling.volcano.sh"
_NOT_ADMITTED_PHASES: Final = frozenset({"Pending"})
_OPEN: Final = "Open"


class VolcanoPodGroupSpec(LenientModel):
    """The part of a Volcano PodGroup spec Jointer reads."""

    min_member: int | None = None
    min_task_member: dict[str, int] = Field(default_factory=dict)
    queue: str = "default"
    priority_class_name: str = ""


class VolcanoPodGroupStatus(LenientModel):
    """``status.phase``: Pending (not admitted), Inqueue (admitted), Running, ..."""

    phase: str = ""


class VolcanoPodGroup(LenientModel):
    """A ``scheduling.volcano.sh/v1beta1`` PodGroup."""

    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: VolcanoPodGroupSpec = Field(default_factory=VolcanoPodGroupSpec)
    status: VolcanoPodGroupStatus = Field(default_factory=VolcanoPodGroupStatus)


class VolcanoQueueStatus(LenientModel):
    """``status.state``: Open, Closed, Closing, Unknown."""

    state: str = ""


class VolcanoQueue(LenientModel):
    """A ``scheduling.volcano.sh/v1beta1`` Queue (cluster-scoped)."""

    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    status: VolcanoQueueStatus = Field(default_factory=VolcanoQueueStatus)


def detect(pod: Pod) -> PodGroupRef | None:
    """Row 3: annotation ``scheduling.k8s.io/group-name`` or ``schedulerName: volcano``.

    Plain pods without the annotation get ``podgroup-<ownerUID>`` (the pod's UID when bare).
    """
    annotations = pod.metadata.annotations
    name = annotations.get(keys.VOLCANO_GROUP_NAME) or annotations.get(
        keys.VOLCANO_GROUP_NAME_FALLBACK
    )
    if not name:
        if pod.spec.scheduler_name != keys.VOLCANO_SCHEDULER_NAME:
            return None
        owner = next((o for o in pod.metadata.owner_references if o.controller), None)
        name = f"podgroup-{owner.uid if owner is not None else pod.metadata.uid}"
    return PodGroupRef(
        ecosystem=Ecosystem.VOLCANO,
        namespace=pod.metadata.namespace or "default",
        name=name,
        sub_group=annotations.get(keys.VOLCANO_TASK_SPEC) or None,
    )


def min_count(group: VolcanoPodGroup) -> int | None:
    """``spec.minMember`` (``None`` when unset or 0)."""
    value = group.spec.min_member
    return value if value is not None and value > 0 else None


def admission_reason(
    group_key: str, group: VolcanoPodGroup, queues: Mapping[str, VolcanoQueue]
) -> str | None:
    """Phase ``Pending`` or a queue that is missing or not ``Open`` keeps the group back.

    A PodGroup without a phase (no status yet, as in a manifest) is not held back; queues are
    only checked when the context knows some.
    """
    phase = group.status.phase
    if phase in _NOT_ADMITTED_PHASES:
        return f"pod group {group_key} is not admitted by its queue (Volcano phase {phase})"
    if not queues:
        return None
    queue = group.spec.queue or "default"
    if queue not in queues:
        return f"pod group {group_key}: queue {queue} does not exist"
    state = queues[queue].status.state
    if state and state != _OPEN:
        return f"pod group {group_key}: queue {queue} is {state}, not Open"
    return None


def _says_false(values: Mapping[str, str]) -> bool:
    return values.get(keys.VOLCANO_PREEMPTABLE, "").strip().lower() == "false"


def non_preemptible_reason(pod: Pod, group_key: str, group: VolcanoPodGroup | None) -> str | None:
    """``volcano.sh/preemptable: "false"`` on the pod or on its PodGroup (annotation or label).

    Volcano's PodGroup default (false when unset) is deliberately not applied: only an explicit
    ``"false"`` protects the group.
    """
    if _says_false(pod.metadata.annotations) or _says_false(pod.metadata.labels):
        return f'pod is non-preemptible ({keys.VOLCANO_PREEMPTABLE}: "false")'
    if group is not None and (
        _says_false(group.metadata.annotations) or _says_false(group.metadata.labels)
    ):
        return f'pod group {group_key} is non-preemptible ({keys.VOLCANO_PREEMPTABLE}: "false")'
    return None
