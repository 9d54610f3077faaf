"""Pod-group, quota, preemptibility and GPU-fraction detection across schedulers (pure).

The public surface, used by the planner and disruption:

- ``build_context(objects)`` -> ``ProvisioningContext``: pods and pod-group objects by key;
- ``detect_group(pod)`` -> ``PodGroupRef | None``: the detection table of ``pod-groups.md`` §8;
- ``group_info(ref, context)`` / ``pod_groups(context)`` -> ``PodGroupInfo``: gang size,
  members, sub-groups, zone opt-out;
- ``provisionable_verdict(pod, context)`` -> ``Verdict`` (``provisionable_verdicts`` for a
  batch, judging each group once): Karpenter's rules plus admission, quota and completeness;
- ``is_non_preemptible``, ``is_gpu_reservation_pod``, ``has_active_do_not_disrupt``;
- ``gpu_fraction_milli``, ``scaling_pod_original`` (in ``provisioner.podgroups.fractions``).
"""

from provisioner.podgroups.admission import (
    karpenter_ignore_reason,
    provisionable_verdict,
    provisionable_verdicts,
)
from provisioner.podgroups.context import ProvisioningContext, build_context
from provisioner.podgroups.detect import DetectionMemo, detect_group
from provisioner.podgroups.fractions import (
    FractionError,
    gpu_fraction_milli,
    gpu_memory_mib,
    is_scaling_pod,
    scaling_pod_original,
)
from provisioner.podgroups.groups import group_info, pod_groups
from provisioner.podgroups.model import (
    Ecosystem,
    GroupId,
    PodGroupInfo,
    PodGroupRef,
    SubGroupInfo,
    Verdict,
)
from provisioner.podgroups.protection import (
    has_active_do_not_disrupt,
    is_gpu_reservation_pod,
    is_non_preemptible,
)

__all__ = [
    "DetectionMemo",
    "Ecosystem",
    "FractionError",
    "GroupId",
    "PodGroupInfo",
    "PodGroupRef",
    "ProvisioningContext",
    "SubGroupInfo",
    "Verdict",
    "build_context",
    "detect_group",
    "gpu_fraction_milli",
    "gpu_memory_mib",
    "group_info",
    "has_active_do_not_disrupt",
    "is_gpu_reservation_pod",
    "is_non_preemptible",
    "is_scaling_pod",
    "karpenter_ignore_reason",
    "pod_groups",
    "provisionable_verdict",
    "provisionable_verdicts",
    "scaling_pod_original",
]
