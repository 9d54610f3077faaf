"""Label, annotation, gate and name keys read by the pod-group detection (``pod-groups.md``).

Note:
    The tree keeps every key in ``provisioner/apis/labels.py``. Keys it already has are taken
    from there; the pod-group ecosystems' keys are gathered here, in one module, until they move
    there (this package's authors may not edit ``provisioner.apis``).
"""

from __future__ import annotations

from typing import Final

from provisioner.apis import labels

# Karpenter and Jointer (from provisioner.apis.labels)
DO_NOT_DISRUPT: Final = labels.ANNOTATION_DO_NOT_DISRUPT
GANG_TOPOLOGY: Final = labels.ANNOTATION_GANG_TOPOLOGY
GANG_TOPOLOGY_NONE: Final = labels.GANG_TOPOLOGY_NONE

# KAI-Scheduler / Run:ai (§1, §9)
KAI_SCHEDULER_NAME: Final = "kai-scheduler"
KAI_POD_GROUP_NAME: Final = "pod-group-name"
KAI_SUBGROUP_NAME: Final = "kai.scheduler/subgroup-name"
KAI_QUEUE: Final = "kai.scheduler/queue"
KAI_QUEUE_LEGACY: Final = "runai/queue"
KAI_PROJECT: Final = "project"
KAI_DEFAULT_QUEUE: Final = "default-queue"
KAI_PREEMPTIBILITY: Final = "kai.scheduler/preemptibility"
KAI_PRIORITY_CLASS_LABEL: Final = "priorityClassName"
KAI_QUEUE_ADMISSION_GATE: Final = "kai.scheduler/queue-admission"
KAI_GPU_FRACTION: Final = "gpu-fraction"
KAI_GPU_MEMORY: Final = "gpu-memory"
KAI_GPU_FRACTION_NUM_DEVICES: Final = "gpu-fraction-num-devices"
KAI_RESERVATION_NAMESPACES: Final = frozenset({"kai-resource-reservation", "runai-reservation"})
KAI_RESERVATION_APP: Final = "kai-resource-reservation"
KAI_SCALE_ADJUST_NAMESPACE: Final = "kai-scale-adjust"
KAI_SCALING_POD_APP: Final = "scaling-pod"
KAI_SHARED_GPU_POD_NAME: Final = "shared-gpu-pod-name"
KAI_SHARED_GPU_POD_NAMESPACE: Final = "shared-gpu-pod-namespace"
APP: Final = "app"

# Volcano (§2)
VOLCANO_SCHEDULER_NAME: Final = "volcano"
VOLCANO_GROUP_NAME: Final = "scheduling.k8s.io/group-name"
VOLCANO_GROUP_NAME_FALLBACK: Final = "scheduling.volcano.sh/group-name"
VOLCANO_TASK_SPEC: Final = "volcano.sh/task-spec"
VOLCANO_PREEMPTABLE: Final = "volcano.sh/preemptable"
VOLCANO_QUEUE_ALLOCATION_GATE: Final = "scheduling.volcano.sh/queue-allocation-gate"

# scheduler-plugins coscheduling (§3)
COSCHEDULING_POD_GROUP: Final = "scheduling.x-k8s.io/pod-group"
COSCHEDULING_POD_GROUP_LEGACY: Final = "pod-group.scheduling.sigs.k8s.io"

# Kueue (§4)
KUEUE_POD_GROUP_NAME: Final = "kueue.x-k8s.io/pod-group-name"
KUEUE_POD_GROUP_TOTAL_COUNT: Final = "kueue.x-k8s.io/pod-group-total-count"
KUEUE_WORKLOAD: Final = "kueue.x-k8s.io/workload"
KUEUE_PODSET: Final = "kueue.x-k8s.io/podset"
KUEUE_ADMISSION_GATE: Final = "kueue.x-k8s.io/admission"
KUEUE_TOPOLOGY_GATE: Final = "kueue.x-k8s.io/topology"

# ProvisioningRequest (§7)
CONSUME_PROVISIONING_REQUEST: Final = "autoscaling.x-k8s.io/consume-provisioning-request"
PROVISIONING_CLASS_NAME: Final = "autoscaling.x-k8s.io/provisioning-class-name"
CONSUME_PROVISIONING_REQUEST_DEPRECATED: Final = (
    "cluster-autoscaler.kubernetes.io/consume-provisioning-request"
)
PROVISIONING_CLASS_NAME_DEPRECATED: Final = (
    "cluster-autoscaler.kubernetes.io/provisioning-class-name"
)

# LeaderWorkerSet (§6)
LWS_NAME: Final = "leaderworkerset.sigs.k8s.io/name"
LWS_GROUP_INDEX: Final = "leaderworkerset.sigs.k8s.io/group-index"
LWS_WORKER_INDEX: Final = "leaderworkerset.sigs.k8s.io/worker-index"
LWS_SIZE: Final = "leaderworkerset.sigs.k8s.io/size"

# JobSet (§6)
JOBSET_NAME: Final = "jobset.sigs.k8s.io/jobset-name"
JOBSET_REPLICATED_JOB_NAME: Final = "jobset.sigs.k8s.io/replicatedjob-name"
JOBSET_REPLICATED_JOB_REPLICAS: Final = "jobset.sigs.k8s.io/replicatedjob-replicas"
JOBSET_JOB_INDEX: Final = "jobset.sigs.k8s.io/job-index"

# Resources
NVIDIA_GPU: Final = "nvidia.com/gpu"
