"""The part of Kubernetes core/v1 (and friends) that Jointer reads.

These models are lenient: fields Jointer does not use are ignored, so any valid Kubernetes
object parses. They are read-only views; Jointer never writes whole core objects back.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, Final, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
)

from provisioner.apis import labels
from provisioner.apis.base import ApiModel, LenientModel
from provisioner.apis.requirements import is_qualified_name, one_of

__all__ = [
    "TERMINAL_PHASES",
    "Affinity",
    "Container",
    "DaemonSet",
    "LabelSelector",
    "LabelSelectorRequirement",
    "Node",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "ObjectMeta",
    "OwnerReference",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "Pod",
    "PodAffinityTerm",
    "PodCondition",
    "PodDisruptionBudget",
    "PodSpec",
    "PodStatus",
    "PriorityClass",
    "QuantityValue",
    "StorageClass",
    "Taint",
    "TaintEffect",
    "Toleration",
    "TopologySpreadConstraint",
    "is_terminal",
]

QuantityValue = str | int | float
"""A quantity as it appears in YAML/JSON: ``"100m"``, ``2``, ``0.5``."""


class OwnerReference(LenientModel):
    """A reference to an owning object."""

    api_version: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool | None = None


class ObjectMeta(LenientModel):
    """Standard object metadata."""

    name: str = ""
    generate_name: str = ""
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    generation: int | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    owner_references: tuple[OwnerReference, ...] = ()
    finalizers: tuple[str, ...] = ()
    creation_timestamp: datetime | None = None
    deletion_timestamp: datetime | None = None


def _omit_if_empty(
    model: BaseModel, handler: SerializerFunctionWrapHandler, field: str
) -> dict[str, Any]:
    """Serialise ``model`` leaving ``field`` out when it is empty (Kubernetes' ``omitempty``)."""
    data: dict[str, Any] = handler(model)
    if not getattr(model, field):
        data.pop(field, None)
    return data


class NodeSelectorRequirement(LenientModel):
    """One expression of a node selector term (``key``, ``operator``, ``values``).

    Empty ``values`` are left out when written (Kubernetes' ``omitempty``).
    """

    key: str
    operator: str
    values: tuple[str, ...] = ()

    @model_serializer(mode="wrap")
    def _omit_empty_values(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _omit_if_empty(self, handler, "values")


class NodeSelectorTerm(LenientModel):
    """An AND of expressions; terms of a node selector are ORed."""

    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()


class NodeSelector(LenientModel):
    """Required node affinity: an OR of terms."""

    node_selector_terms: tuple[NodeSelectorTerm, ...] = ()


class PreferredSchedulingTerm(LenientModel):
    """A weighted preferred node affinity term."""

    weight: int
    preference: NodeSelectorTerm


class NodeAffinity(LenientModel):
    """Required and preferred node affinity."""

    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: tuple[PreferredSchedulingTerm, ...] = ()


class LabelSelectorRequirement(LenientModel):
    """One expression of a label selector."""

    key: str
    operator: str
    values: tuple[str, ...] = ()


class LabelSelector(LenientModel):
    """A label selector (matchLabels AND matchExpressions)."""

    match_labels: dict[str, str] = Field(default_factory=dict)
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()


class PodAffinityTerm(LenientModel):
    """A pod (anti-)affinity term on a topology key."""

    label_selector: LabelSelector | None = None
    namespaces: tuple[str, ...] = ()
    namespace_selector: LabelSelector | None = None
    topology_key: str = ""
    match_label_keys: tuple[str, ...] = ()


class WeightedPodAffinityTerm(LenientModel):
    """A weighted preferred pod (anti-)affinity term."""

    weight: int
    pod_affinity_term: PodAffinityTerm


class PodAffinity(LenientModel):
    """Pod affinity or anti-affinity."""

    required_during_scheduling_ignored_during_execution: tuple[PodAffinityTerm, ...] = ()
    preferred_during_scheduling_ignored_during_execution: tuple[WeightedPodAffinityTerm, ...] = ()


class Affinity(LenientModel):
    """Node affinity, pod affinity and pod anti-affinity."""

    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAffinity | None = None


class Toleration(LenientModel):
    """A pod toleration."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None


TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


def _check_taint_part(value: str, what: str) -> str:
    if not is_qualified_name(value):
        raise ValueError(
            f'"{value}" is not a valid taint {what}: an optional DNS subdomain prefix and "/", '
            'then alphanumerics, "-", "_" or ".", starting and ending with an alphanumeric'
        )
    return value


class Taint(ApiModel):
    """A taint a NodeClaim's node gets (``taints``) or starts with (``startupTaints``).

    Also a Node's taint. Validated as the NodeClaim CRD validates it; a missing or ``null`` value
    is ``""``, and an empty value is left out when written (Kubernetes' ``omitempty``).

    Attributes:
        key: the taint key.
        value: the taint value, ``""`` for none.
        effect: ``NoSchedule``, ``PreferNoSchedule`` or ``NoExecute``.
        time_added: when the taint was added (NoExecute taints).
    """

    key: str
    value: Annotated[str, BeforeValidator(lambda v: "" if v is None else v)] = ""
    effect: Annotated[TaintEffect, BeforeValidator(one_of(*labels.TAINT_EFFECTS))]
    time_added: datetime | None = None

    @field_validator("key")
    @classmethod
    def _check_key(cls, key: str) -> str:
        return _check_taint_part(key, "key")

    @field_validator("value")
    @classmethod
    def _check_value(cls, value: str) -> str:
        return _check_taint_part(value, "value") if value else value

    @model_serializer(mode="wrap")
    def _omit_empty_value(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _omit_if_empty(self, handler, "value")

    def matches(self, other: Taint) -> bool:
        """Whether both taints have the same key and effect (``Taint.MatchTaint``)."""
        return self.key == other.key and self.effect == other.effect

    def __str__(self) -> str:
        """``key=value:effect``, or ``key:effect`` without a value (``Taint.ToString``)."""
        if self.value:
            return f"{self.key}={self.value}:{self.effect}"
        return f"{self.key}:{self.effect}"


class TopologySpreadConstraint(LenientModel):
    """A pod topology spread constraint."""

    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    label_selector: LabelSelector | None = None
    min_domains: int | None = None
    node_affinity_policy: str | None = None
    node_taints_policy: str | None = None
    match_label_keys: tuple[str, ...] = ()


class ResourceRequirements(LenientModel):
    """Container requests and limits."""

    requests: dict[str, QuantityValue] = Field(default_factory=dict)
    limits: dict[str, QuantityValue] = Field(default_factory=dict)


class ContainerPort(LenientModel):
    """A container port; only host ports matter to scheduling."""

    container_port: int | None = None
    host_port: int | None = None
    host_ip: str = ""
    protocol: str = "TCP"


class Container(LenientModel):
    """A container (or init container)."""

    name: str = ""
    resources: ResourceRequirements = Field(default_factory=ResourceRequirements)
    restart_policy: str | None = None
    ports: tuple[ContainerPort, ...] = ()


class PersistentVolumeClaimSource(LenientModel):
    """A pod volume backed by a PersistentVolumeClaim."""

    claim_name: str


class Volume(LenientModel):
    """A pod volume; only claims matter to scheduling."""

    name: str = ""
    persistent_volume_claim: PersistentVolumeClaimSource | None = None


class SchedulingGate(LenientModel):
    """A scheduling gate (the pod is not scheduled while any remains)."""

    name: str


class SchedulingGroup(LenientModel):
    """Kubernetes 1.36+ ``spec.schedulingGroup`` (Workload API PodGroup membership)."""

    pod_group_name: str = ""


class WorkloadReference(LenientModel):
    """Kubernetes 1.35 ``spec.workloadRef``."""

    name: str = ""
    pod_group: str = ""
    pod_group_replica_key: str = ""


class PodSpec(LenientModel):
    """The scheduling-relevant part of a pod spec."""

    node_name: str = ""
    node_selector: dict[str, str] = Field(default_factory=dict)
    affinity: Affinity | None = None
    tolerations: tuple[Toleration, ...] = ()
    topology_spread_constraints: tuple[TopologySpreadConstraint, ...] = ()
    containers: tuple[Container, ...] = ()
    init_containers: tuple[Container, ...] = ()
    overhead: dict[str, QuantityValue] = Field(default_factory=dict)
    priority: int | None = None
    priority_class_name: str = ""
    scheduler_name: str = ""
    scheduling_gates: tuple[SchedulingGate, ...] = ()
    volumes: tuple[Volume, ...] = ()
    termination_grace_period_seconds: int | None = None
    scheduling_group: SchedulingGroup | None = None
    workload_ref: WorkloadReference | None = None


class PodCondition(LenientModel):
    """A pod status condition."""

    type: str
    status: str = ""
    reason: str = ""
    message: str = ""
    last_transition_time: datetime | None = None


class PodStatus(LenientModel):
    """The scheduling-relevant part of a pod status."""

    phase: str = ""
    conditions: tuple[PodCondition, ...] = ()
    nominated_node_name: str = ""
    start_time: datetime | None = None


class Pod(LenientModel):
    """A pod."""

    api_version: str = "v1"
    kind: Literal["Pod"] = "Pod"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PodSpec = Field(default_factory=PodSpec)
    status: PodStatus | None = None

    @property
    def key(self) -> str:
        """``namespace/name``, the way pods are named in plans and logs."""
        return f"{self.metadata.namespace or 'default'}/{self.metadata.name}"


TERMINAL_PHASES: Final = frozenset({"Succeeded", "Failed"})
"""The pod phases after which no container runs again."""


def is_terminal(pod: Pod | Mapping[str, Any]) -> bool:
    """Whether the pod (a model or its wire shape) has Succeeded or Failed.

    A terminal pod's requests no longer count anywhere.
    """
    if isinstance(pod, Pod):
        return pod.status is not None and pod.status.phase in TERMINAL_PHASES
    return (pod.get("status") or {}).get("phase") in TERMINAL_PHASES


class PodTemplateSpec(LenientModel):
    """A pod template (DaemonSets, Deployments, Jobs)."""

    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PodSpec = Field(default_factory=PodSpec)


class NodeSpec(LenientModel):
    """The part of a node spec Jointer reads."""

    provider_id: str = Field(default="", alias="providerID")
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False


class NodeCondition(LenientModel):
    """A node status condition."""

    type: str
    status: str = ""
    reason: str = ""


class NodeStatus(LenientModel):
    """Capacity, allocatable and conditions of a node."""

    capacity: dict[str, QuantityValue] = Field(default_factory=dict)
    allocatable: dict[str, QuantityValue] = Field(default_factory=dict)
    conditions: tuple[NodeCondition, ...] = ()


class Node(LenientModel):
    """A node."""

    api_version: str = "v1"
    kind: Literal["Node"] = "Node"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: NodeSpec = Field(default_factory=NodeSpec)
    status: NodeStatus = Field(default_factory=NodeStatus)


class DaemonSetSpec(LenientModel):
    """A DaemonSet's template (its pods are per-node overhead)."""

    selector: LabelSelector | None = None
    template: PodTemplateSpec = Field(default_factory=PodTemplateSpec)


class DaemonSet(LenientModel):
    """A DaemonSet."""

    api_version: str = "apps/v1"
    kind: Literal["DaemonSet"] = "DaemonSet"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: DaemonSetSpec = Field(default_factory=DaemonSetSpec)


class PersistentVolumeClaimSpec(LenientModel):
    """The part of a claim spec that decides volume topology."""

    storage_class_name: str | None = None
    volume_name: str = ""


class PersistentVolumeClaimStatus(LenientModel):
    """Claim phase (``Bound``, ``Pending``, ``Lost``)."""

    phase: str = ""


class PersistentVolumeClaim(LenientModel):
    """A PersistentVolumeClaim."""

    api_version: str = "v1"
    kind: Literal["PersistentVolumeClaim"] = "PersistentVolumeClaim"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PersistentVolumeClaimSpec = Field(default_factory=PersistentVolumeClaimSpec)
    status: PersistentVolumeClaimStatus = Field(default_factory=PersistentVolumeClaimStatus)


class VolumeNodeAffinity(LenientModel):
    """Where a volume can be attached."""

    required: NodeSelector | None = None


class PersistentVolumeSpec(LenientModel):
    """The part of a PersistentVolume spec that decides topology."""

    node_affinity: VolumeNodeAffinity | None = None
    storage_class_name: str = ""


class PersistentVolume(LenientModel):
    """A PersistentVolume."""

    api_version: str = "v1"
    kind: Literal["PersistentVolume"] = "PersistentVolume"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PersistentVolumeSpec = Field(default_factory=PersistentVolumeSpec)


class TopologySelectorLabelRequirement(LenientModel):
    """A StorageClass allowedTopologies expression."""

    key: str
    values: tuple[str, ...] = ()


class TopologySelectorTerm(LenientModel):
    """An AND of topology expressions."""

    match_label_expressions: tuple[TopologySelectorLabelRequirement, ...] = ()


class StorageClass(LenientModel):
    """A StorageClass."""

    api_version: str = "storage.k8s.io/v1"
    kind: Literal["StorageClass"] = "StorageClass"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    provisioner: str = ""
    volume_binding_mode: str = "Immediate"
    allowed_topologies: tuple[TopologySelectorTerm, ...] = ()


class PodDisruptionBudgetSpec(LenientModel):
    """minAvailable / maxUnavailable over the selected pods."""

    selector: LabelSelector | None = None
    min_available: int | str | None = None
    max_unavailable: int | str | None = None


class PodDisruptionBudgetStatus(LenientModel):
    """How many disruptions are allowed now."""

    disruptions_allowed: int | None = None
    current_healthy: int | None = None
    desired_healthy: int | None = None
    expected_pods: int | None = None


class PodDisruptionBudget(LenientModel):
    """A PodDisruptionBudget."""

    api_version: str = "policy/v1"
    kind: Literal["PodDisruptionBudget"] = "PodDisruptionBudget"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PodDisruptionBudgetSpec = Field(default_factory=PodDisruptionBudgetSpec)
    status: PodDisruptionBudgetStatus = Field(default_factory=PodDisruptionBudgetStatus)


class PriorityClass(LenientModel):
    """A PriorityClass."""

    api_version: str = "scheduling.k8s.io/v1"
    kind: Literal["PriorityClass"] = "PriorityClass"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    value: int = 0
    global_default: bool = False
    preemption_policy: str = ""
