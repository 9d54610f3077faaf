"""Identity and summary types of pod groups, and the provisioning verdict."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["Ecosystem", "GroupId", "PodGroupInfo", "PodGroupRef", "SubGroupInfo", "Verdict"]


class Ecosystem(StrEnum):
    """The row of the detection table (``pod-groups.md`` §8) a pod group was found by."""

    WORKLOAD_API = "workload-api"
    """Kubernetes Workload / PodGroup API (``scheduling.k8s.io``), row 1."""
    KAI = "kai"
    """KAI-Scheduler / Run:ai PodGroup (``scheduling.run.ai``), row 2."""
    VOLCANO = "volcano"
    """Volcano PodGroup (``scheduling.volcano.sh``), row 3."""
    COSCHEDULING = "coscheduling"
    """scheduler-plugins coscheduling PodGroup (``scheduling.x-k8s.io``), row 4."""
    KUEUE_POD_GROUP = "kueue-pod-group"
    """Kueue plain-pod group (label ``kueue.x-k8s.io/pod-group-name``), row 5."""
    KUEUE_WORKLOAD = "kueue-workload"
    """Kueue Workload of a job integration (annotation ``kueue.x-k8s.io/workload``), row 6."""
    PROVISIONING_REQUEST = "provisioning-request"
    """Consumers of a ProvisioningRequest (``autoscaling.x-k8s.io``), row 7."""
    LEADER_WORKER_SET = "leaderworkerset"
    """One LeaderWorkerSet group (leader + workers), row 8."""
    JOBSET = "jobset"
    """One replicated job of a JobSet, row 9."""


GroupId = tuple[Ecosystem, str, str]
"""(ecosystem, namespace, name): the identity of a group; keys may repeat across ecosystems."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PodGroupRef:
    """Which pod group a pod belongs to."""

    ecosystem: Ecosystem
    """The detection row that matched."""
    namespace: str
    """The group's namespace (always the pod's)."""
    name: str
    """The group's name (for ``spec.workloadRef``: ``<workload>-<podGroup>[-<replicaKey>]``)."""
    sub_group: str | None = None
    """The (leaf) sub-group the pod is in, when its ecosystem has them."""

    @property
    def key(self) -> str:
        """``namespace/name``, the way groups are named in reasons and logs."""
        return f"{self.namespace}/{self.name}"

    @property
    def group_id(self) -> GroupId:
        """The identity of the group, without the sub-group."""
        return (self.ecosystem, self.namespace, self.name)


@dataclass(frozen=True, slots=True, kw_only=True)
class SubGroupInfo:
    """A sub-group with its own minimum (KAI ``subGroups[]``, Kueue pod sets, Volcano tasks)."""

    name: str
    """The sub-group's name."""
    min_count: int
    """Members the sub-group needs before the group may run."""
    members: tuple[str, ...] = ()
    """Keys (``namespace/name``) of the live, ungated members present."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PodGroupInfo:
    """What Jointer knows about one pod group."""

    key: str
    """``namespace/name``."""
    ecosystem: Ecosystem
    """The detection row that matched."""
    namespace: str
    """The group's namespace."""
    name: str
    """The group's name."""
    min_count: int | None
    """The gang size; ``None`` or ``1`` means the group is not a gang (elastic or basic)."""
    members: tuple[str, ...] = ()
    """Keys of the live members present (not Succeeded/Failed), sorted, gated ones included."""
    gated_members: tuple[str, ...] = ()
    """Keys of the live members that still carry a scheduling gate."""
    sub_groups: tuple[SubGroupInfo, ...] = ()
    """Sub-groups with their own minimum, sorted by name."""
    same_zone: bool = True
    """Whether placed members must share one zone (``jointer.dev/gang-topology: none`` opts out)."""
    size_from_first_pod: bool = False
    """True for LWS and JobSet (rows 8-9): the size is known from the first pod, so the group may
    be planned before all members exist (the planner adds virtual pods for the rest)."""
    object_found: bool = False
    """Whether the group object (PodGroup, Workload, ProvisioningRequest, ...) was found."""

    @property
    def is_gang(self) -> bool:
        """Whether the group is all-or-nothing (``min_count`` of at least 2)."""
        return self.min_count is not None and self.min_count > 1

    @property
    def ready_count(self) -> int:
        """Live members that are not gated: the ones its scheduler counts."""
        return len(self.members) - len(self.gated_members)

    @property
    def missing_count(self) -> int:
        """How many members short of ``min_count`` the group is (0 when complete)."""
        if self.min_count is None:
            return 0
        return max(0, self.min_count - self.ready_count)


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """Whether Jointer should provision for a pending pod, and why not."""

    provisionable: bool
    """True when the pod is work for the planner."""
    reason: str = ""
    """Why the pod is ignored (empty when provisionable), in ``plan``'s ``ignored`` style."""
    group: PodGroupRef | None = None
    """The pod's group, when it has one."""

    @classmethod
    def ok(cls, group: PodGroupRef | None = None) -> Verdict:
        """A provisionable verdict."""
        return cls(provisionable=True, group=group)

    @classmethod
    def ignored(cls, reason: str, group: PodGroupRef | None = None) -> Verdict:
        """An ignored verdict with its reason."""
        return cls(provisionable=False, reason=reason, group=group)
