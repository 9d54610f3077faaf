"""Every label, annotation, taint and finalizer key Jointer reads or writes, and well-known values.

Keys and values match Karpenter v1 (``pkg/apis/v1/labels.go``) and the AWS provider
(``pkg/apis/v1/labels.go`` of karpenter-provider-aws) so a cluster can move between the two. No
other module spells these strings; import them from here.

The restriction helpers mirror Karpenter's ``IsRestrictedLabel``/``IsRestrictedNodeLabel``: a key
in a restricted domain (``kubernetes.io``, ``k8s.io``, ``karpenter.sh``, ``karpenter.k8s.aws`` and
their subdomains) may not be set by a NodePool unless it is a well-known label or its domain is one
of the exceptions (``node.kubernetes.io``, ``node-restriction.kubernetes.io``, ``kops.k8s.io``).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

__all__ = [
    "ANNOTATION_CAPACITY_BUFFER_FAKE_POD",
    "ANNOTATION_CAPACITY_BUFFER_NAME",
    "ANNOTATION_CAPACITY_BUFFER_NAMESPACE",
    "ANNOTATION_CAPACITY_OVERLAY_APPLIED",
    "ANNOTATION_DO_NOT_DISRUPT",
    "ANNOTATION_EC2NODECLASS_HASH",
    "ANNOTATION_EC2NODECLASS_HASH_VERSION",
    "ANNOTATION_FLAVOR_DOWNGRADE",
    "ANNOTATION_GANG_TOPOLOGY",
    "ANNOTATION_LLMAZ_FLAVORS",
    "ANNOTATION_MANAGED_BY",
    "ANNOTATION_NODECLAIM_MIN_VALUES_RELAXED",
    "ANNOTATION_NODECLAIM_TAGGED",
    "ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP",
    "ANNOTATION_NODEPOOL_HASH",
    "ANNOTATION_NODEPOOL_HASH_VERSION",
    "ANNOTATION_POD_DELETION_COST",
    "ANNOTATION_PRICE_OVERLAY_APPLIED",
    "ANNOTATION_REQUESTED_DRA_DRIVERS",
    "ARCHITECTURE_AMD64",
    "ARCHITECTURE_ARM64",
    "AWS_API_GROUP",
    "AWS_WELL_KNOWN_LABELS",
    "CAPACITY_TYPES",
    "CAPACITY_TYPE_ON_DEMAND",
    "CAPACITY_TYPE_RESERVED",
    "CAPACITY_TYPE_SPOT",
    "CORE_WELL_KNOWN_LABELS",
    "FINALIZER_TERMINATION",
    "FLAVOR_DOWNGRADE_ALLOWED",
    "GANG_TOPOLOGY_NONE",
    "JOINTER_DOMAIN",
    "KARPENTER_API_GROUP",
    "KNOWN_EPHEMERAL_TAINT_KEYS",
    "LABEL_ARCH",
    "LABEL_CAPACITY_RESERVATION_ID",
    "LABEL_CAPACITY_RESERVATION_INTERRUPTIBLE",
    "LABEL_CAPACITY_RESERVATION_TYPE",
    "LABEL_CAPACITY_TYPE",
    "LABEL_DOMAIN_EXCEPTIONS",
    "LABEL_DO_NOT_SYNC_TAINTS",
    "LABEL_EC2NODECLASS",
    "LABEL_EXCLUDE_FROM_EXTERNAL_LOAD_BALANCERS",
    "LABEL_HOSTNAME",
    "LABEL_INITIALIZED",
    "LABEL_INSTANCE_ACCELERATOR_COUNT",
    "LABEL_INSTANCE_ACCELERATOR_MANUFACTURER",
    "LABEL_INSTANCE_ACCELERATOR_NAME",
    "LABEL_INSTANCE_CAPABILITY_FLEX",
    "LABEL_INSTANCE_CATEGORY",
    "LABEL_INSTANCE_CPU",
    "LABEL_INSTANCE_CPU_MANUFACTURER",
    "LABEL_INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ",
    "LABEL_INSTANCE_EBS_BANDWIDTH",
    "LABEL_INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED",
    "LABEL_INSTANCE_FAMILY",
    "LABEL_INSTANCE_GENERATION",
    "LABEL_INSTANCE_GPU_COUNT",
    "LABEL_INSTANCE_GPU_MANUFACTURER",
    "LABEL_INSTANCE_GPU_MEMORY",
    "LABEL_INSTANCE_GPU_NAME",
    "LABEL_INSTANCE_HYPERVISOR",
    "LABEL_INSTANCE_LOCAL_NVME",
    "LABEL_INSTANCE_MEMORY",
    "LABEL_INSTANCE_NETWORK_BANDWIDTH",
    "LABEL_INSTANCE_SIZE",
    "LABEL_INSTANCE_TENANCY",
    "LABEL_INSTANCE_TYPE",
    "LABEL_INSTANCE_TYPE_BETA",
    "LABEL_LLMAZ_MODEL_NAME",
    "LABEL_NITRO_SANDBOX",
    "LABEL_NODEPOOL",
    "LABEL_OS",
    "LABEL_PLACEMENT_GROUP_ID",
    "LABEL_PLACEMENT_GROUP_PARTITION",
    "LABEL_REGION",
    "LABEL_REGISTERED",
    "LABEL_TOPOLOGY_ZONE_ID",
    "LABEL_WINDOWS_BUILD",
    "LABEL_ZONE",
    "NORMALIZED_LABELS",
    "OS_LINUX",
    "OS_WINDOWS",
    "READINESS_TAINT_DOMAIN",
    "RESTRICTED_LABELS",
    "RESTRICTED_LABEL_DOMAINS",
    "TAINT_DISRUPTED",
    "TAINT_EFFECTS",
    "TAINT_EFFECT_NO_EXECUTE",
    "TAINT_EFFECT_NO_SCHEDULE",
    "TAINT_EFFECT_PREFER_NO_SCHEDULE",
    "TAINT_NOT_READY",
    "TAINT_UNINITIALIZED",
    "TAINT_UNREACHABLE",
    "TAINT_UNREGISTERED",
    "TRUE",
    "WELL_KNOWN_LABELS",
    "is_restricted_label",
    "is_restricted_node_label",
    "label_domain",
    "normalize_label_key",
]

# --- API groups and domains ---------------------------------------------------------------------

KARPENTER_API_GROUP: Final = "karpenter.sh"
"""Karpenter's core API group; also a restricted label domain."""
AWS_API_GROUP: Final = "karpenter.k8s.aws"
"""The AWS provider's API group (EC2NodeClass); also a restricted label domain."""
JOINTER_DOMAIN: Final = "jointer.dev"
"""Jointer's own annotation domain."""

TRUE: Final = "true"
"""The value of boolean labels and annotations (``karpenter.sh/registered=true``)."""

# --- Kubernetes well-known labels ---------------------------------------------------------------

LABEL_HOSTNAME: Final = "kubernetes.io/hostname"
LABEL_ARCH: Final = "kubernetes.io/arch"
LABEL_OS: Final = "kubernetes.io/os"
LABEL_INSTANCE_TYPE: Final = "node.kubernetes.io/instance-type"
LABEL_INSTANCE_TYPE_BETA: Final = "beta.kubernetes.io/instance-type"
LABEL_ZONE: Final = "topology.kubernetes.io/zone"
LABEL_REGION: Final = "topology.kubernetes.io/region"
LABEL_WINDOWS_BUILD: Final = "node.kubernetes.io/windows-build"
LABEL_EXCLUDE_FROM_EXTERNAL_LOAD_BALANCERS: Final = (
    "node.kubernetes.io/exclude-from-external-load-balancers"
)
"""Set to ``karpenter`` on a Node when its termination starts."""

ARCHITECTURE_AMD64: Final = "amd64"
ARCHITECTURE_ARM64: Final = "arm64"
OS_LINUX: Final = "linux"
OS_WINDOWS: Final = "windows"

# --- Karpenter core labels ----------------------------------------------------------------------

LABEL_NODEPOOL: Final = "karpenter.sh/nodepool"
LABEL_CAPACITY_TYPE: Final = "karpenter.sh/capacity-type"
LABEL_REGISTERED: Final = "karpenter.sh/registered"
LABEL_INITIALIZED: Final = "karpenter.sh/initialized"
LABEL_DO_NOT_SYNC_TAINTS: Final = "karpenter.sh/do-not-sync-taints"

CAPACITY_TYPE_SPOT: Final = "spot"
CAPACITY_TYPE_ON_DEMAND: Final = "on-demand"
CAPACITY_TYPE_RESERVED: Final = "reserved"
CAPACITY_TYPES: Final = frozenset(
    {CAPACITY_TYPE_SPOT, CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_RESERVED}
)

# --- AWS provider labels ------------------------------------------------------------------------

LABEL_EC2NODECLASS: Final = "karpenter.k8s.aws/ec2nodeclass"
"""The node class label, ``<group>/<lowercase kind>``."""
LABEL_INSTANCE_TENANCY: Final = "karpenter.k8s.aws/instance-tenancy"
LABEL_CAPACITY_RESERVATION_TYPE: Final = "karpenter.k8s.aws/capacity-reservation-type"
LABEL_CAPACITY_RESERVATION_ID: Final = "karpenter.k8s.aws/capacity-reservation-id"
LABEL_CAPACITY_RESERVATION_INTERRUPTIBLE: Final = (
    "karpenter.k8s.aws/capacity-reservation-interruptible"
)
LABEL_INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED: Final = (
    "karpenter.k8s.aws/instance-encryption-in-transit-supported"
)
LABEL_NITRO_SANDBOX: Final = "karpenter.k8s.aws/nitro-sandbox"
LABEL_INSTANCE_CATEGORY: Final = "karpenter.k8s.aws/instance-category"
LABEL_INSTANCE_HYPERVISOR: Final = "karpenter.k8s.aws/instance-hypervisor"
LABEL_INSTANCE_FAMILY: Final = "karpenter.k8s.aws/instance-family"
LABEL_INSTANCE_GENERATION: Final = "karpenter.k8s.aws/instance-generation"
LABEL_INSTANCE_LOCAL_NVME: Final = "karpenter.k8s.aws/instance-local-nvme"
LABEL_INSTANCE_SIZE: Final = "karpenter.k8s.aws/instance-size"
LABEL_INSTANCE_CPU: Final = "karpenter.k8s.aws/instance-cpu"
LABEL_INSTANCE_CPU_MANUFACTURER: Final = "karpenter.k8s.aws/instance-cpu-manufacturer"
LABEL_INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ: Final = (
    "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz"
)
LABEL_INSTANCE_MEMORY: Final = "karpenter.k8s.aws/instance-memory"
LABEL_INSTANCE_EBS_BANDWIDTH: Final = "karpenter.k8s.aws/instance-ebs-bandwidth"
LABEL_INSTANCE_NETWORK_BANDWIDTH: Final = "karpenter.k8s.aws/instance-network-bandwidth"
LABEL_INSTANCE_GPU_NAME: Final = "karpenter.k8s.aws/instance-gpu-name"
LABEL_INSTANCE_GPU_MANUFACTURER: Final = "karpenter.k8s.aws/instance-gpu-manufacturer"
LABEL_INSTANCE_GPU_COUNT: Final = "karpenter.k8s.aws/instance-gpu-count"
LABEL_INSTANCE_GPU_MEMORY: Final = "karpenter.k8s.aws/instance-gpu-memory"
LABEL_INSTANCE_ACCELERATOR_NAME: Final = "karpenter.k8s.aws/instance-accelerator-name"
LABEL_INSTANCE_ACCELERATOR_MANUFACTURER: Final = (
    "karpenter.k8s.aws/instance-accelerator-manufacturer"
)
LABEL_INSTANCE_ACCELERATOR_COUNT: Final = "karpenter.k8s.aws/instance-accelerator-count"
LABEL_INSTANCE_CAPABILITY_FLEX: Final = "karpenter.k8s.aws/instance-capability-flex"
LABEL_PLACEMENT_GROUP_ID: Final = "karpenter.k8s.aws/placement-group-id"
LABEL_PLACEMENT_GROUP_PARTITION: Final = "karpenter.k8s.aws/placement-group-partition"
LABEL_TOPOLOGY_ZONE_ID: Final = "topology.k8s.aws/zone-id"

# --- Well-known and restricted sets -------------------------------------------------------------

CORE_WELL_KNOWN_LABELS: Final = frozenset(
    {
        LABEL_NODEPOOL,
        LABEL_ZONE,
        LABEL_REGION,
        LABEL_INSTANCE_TYPE,
        LABEL_ARCH,
        LABEL_OS,
        LABEL_CAPACITY_TYPE,
        LABEL_WINDOWS_BUILD,
    }
)
"""Karpenter core's ``WellKnownLabels``."""

AWS_WELL_KNOWN_LABELS: Final = frozenset(
    {
        LABEL_EC2NODECLASS,
        LABEL_INSTANCE_TENANCY,
        LABEL_CAPACITY_RESERVATION_TYPE,
        LABEL_CAPACITY_RESERVATION_ID,
        LABEL_CAPACITY_RESERVATION_INTERRUPTIBLE,
        LABEL_INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED,
        LABEL_NITRO_SANDBOX,
        LABEL_INSTANCE_CATEGORY,
        LABEL_INSTANCE_HYPERVISOR,
        LABEL_INSTANCE_FAMILY,
        LABEL_INSTANCE_GENERATION,
        LABEL_INSTANCE_LOCAL_NVME,
        LABEL_INSTANCE_SIZE,
        LABEL_INSTANCE_CPU,
        LABEL_INSTANCE_CPU_MANUFACTURER,
        LABEL_INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ,
        LABEL_INSTANCE_MEMORY,
        LABEL_INSTANCE_EBS_BANDWIDTH,
        LABEL_INSTANCE_NETWORK_BANDWIDTH,
        LABEL_INSTANCE_GPU_NAME,
        LABEL_INSTANCE_GPU_MANUFACTURER,
        LABEL_INSTANCE_GPU_COUNT,
        LABEL_INSTANCE_GPU_MEMORY,
        LABEL_INSTANCE_ACCELERATOR_NAME,
        LABEL_INSTANCE_ACCELERATOR_MANUFACTURER,
        LABEL_INSTANCE_ACCELERATOR_COUNT,
        LABEL_INSTANCE_CAPABILITY_FLEX,
        LABEL_PLACEMENT_GROUP_ID,
        LABEL_PLACEMENT_GROUP_PARTITION,
        LABEL_TOPOLOGY_ZONE_ID,
    }
)
"""The AWS provider's additions to ``WellKnownLabels`` (the CRDs' ``karpenter.k8s.aws`` list)."""

WELL_KNOWN_LABELS: Final = CORE_WELL_KNOWN_LABELS | AWS_WELL_KNOWN_LABELS
"""Labels Karpenter knows the values of; a requirement on one may be undefined on the other side."""

RESTRICTED_LABEL_DOMAINS: Final = frozenset(
    {"kubernetes.io", "k8s.io", KARPENTER_API_GROUP, AWS_API_GROUP}
)
"""Domains (and their subdomains) a NodePool may not use for labels or requirement keys."""

LABEL_DOMAIN_EXCEPTIONS: Final = frozenset(
    {"kops.k8s.io", "node.kubernetes.io", "node-restriction.kubernetes.io"}
)
"""Subdomains of restricted domains that are allowed anyway."""

RESTRICTED_LABELS: Final = frozenset({LABEL_HOSTNAME})
"""Labels that may never be set or required, whatever their domain."""

NORMALIZED_LABELS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "failure-domain.beta.kubernetes.io/zone": LABEL_ZONE,
        "failure-domain.beta.kubernetes.io/region": LABEL_REGION,
        "beta.kubernetes.io/arch": LABEL_ARCH,
        "beta.kubernetes.io/os": LABEL_OS,
        LABEL_INSTANCE_TYPE_BETA: LABEL_INSTANCE_TYPE,
    }
)
"""Beta (aliased) label keys and the stable key each is read as."""

# --- Annotations --------------------------------------------------------------------------------

ANNOTATION_DO_NOT_DISRUPT: Final = "karpenter.sh/do-not-disrupt"
"""Node: ``"true"``; Pod: ``"true"`` or a positive Go duration from ``status.startTime``."""
ANNOTATION_MANAGED_BY: Final = "karpenter.sh/managed-by"
ANNOTATION_NODEPOOL_HASH: Final = "karpenter.sh/nodepool-hash"
ANNOTATION_NODEPOOL_HASH_VERSION: Final = "karpenter.sh/nodepool-hash-version"
ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP: Final = "karpenter.sh/nodeclaim-termination-timestamp"
ANNOTATION_NODECLAIM_MIN_VALUES_RELAXED: Final = "karpenter.sh/nodeclaim-min-values-relaxed"
ANNOTATION_REQUESTED_DRA_DRIVERS: Final = "karpenter.sh/requested-dra-drivers"
ANNOTATION_PRICE_OVERLAY_APPLIED: Final = "karpenter.sh/price-overlay-applied"
ANNOTATION_CAPACITY_OVERLAY_APPLIED: Final = "karpenter.sh/capacity-overlay-applied"
ANNOTATION_CAPACITY_BUFFER_FAKE_POD: Final = "karpenter.sh/capacity-buffer-fake-pod"
ANNOTATION_CAPACITY_BUFFER_NAME: Final = "karpenter.sh/capacity-buffer-name"
ANNOTATION_CAPACITY_BUFFER_NAMESPACE: Final = "karpenter.sh/capacity-buffer-namespace"
ANNOTATION_EC2NODECLASS_HASH: Final = "karpenter.k8s.aws/ec2nodeclass-hash"
ANNOTATION_EC2NODECLASS_HASH_VERSION: Final = "karpenter.k8s.aws/ec2nodeclass-hash-version"
ANNOTATION_NODECLAIM_TAGGED: Final = "karpenter.k8s.aws/tagged"
ANNOTATION_POD_DELETION_COST: Final = "controller.kubernetes.io/pod-deletion-cost"
ANNOTATION_GANG_TOPOLOGY: Final = "jointer.dev/gang-topology"
"""On a pod-group object or any of its pods; ``none`` lets a gang span zones."""
GANG_TOPOLOGY_NONE: Final = "none"
LABEL_GANG: Final = "jointer.dev/gang"
"""On the NodeClaims of one gang launch: the launch unit's id (its siblings share it)."""
ANNOTATION_GANG_SIZE: Final = "jointer.dev/gang-size"
"""On the NodeClaims of one gang launch: how many NodeClaims the unit has."""
ANNOTATION_GANG_GROUPS: Final = "jointer.dev/gang-groups"
"""On the NodeClaims of one gang launch: the pod groups it carries (comma-separated)."""
ANNOTATION_FLAVOR_DOWNGRADE: Final = "jointer.dev/flavor-downgrade"
"""On a NodePool: ``allowed`` lets consolidation move llmaz pods to a later (worse) flavor."""
FLAVOR_DOWNGRADE_ALLOWED: Final = "allowed"
LABEL_LLMAZ_MODEL_NAME: Final = "llmaz.io/model-name"
"""On llmaz's pods: the OpenModel they serve."""
ANNOTATION_LLMAZ_FLAVORS: Final = "llmaz.io/inference-service-flavors"
"""On llmaz's pods: the OpenModel flavors they may use, in order (comma-separated names)."""

# --- Finalizers ---------------------------------------------------------------------------------

FINALIZER_TERMINATION: Final = "karpenter.sh/termination"
FINALIZER_EC2NODECLASS_TERMINATION: Final = "karpenter.k8s.aws/termination"
"""On an EC2NodeClass: held until its NodeClaims are gone and its launch templates and
instance profile are deleted."""

# --- Taints -------------------------------------------------------------------------------------

TAINT_EFFECT_NO_SCHEDULE: Final = "NoSchedule"
TAINT_EFFECT_PREFER_NO_SCHEDULE: Final = "PreferNoSchedule"
TAINT_EFFECT_NO_EXECUTE: Final = "NoExecute"
TAINT_EFFECTS: Final = (
    TAINT_EFFECT_NO_SCHEDULE,
    TAINT_EFFECT_PREFER_NO_SCHEDULE,
    TAINT_EFFECT_NO_EXECUTE,
)

TAINT_DISRUPTED: Final = "karpenter.sh/disrupted"
"""``NoSchedule``; put on a node being disrupted."""
TAINT_UNREGISTERED: Final = "karpenter.sh/unregistered"
"""``NoExecute``; set at bootstrap, removed at registration."""
TAINT_NOT_READY: Final = "node.kubernetes.io/not-ready"
TAINT_UNREACHABLE: Final = "node.kubernetes.io/unreachable"
TAINT_UNINITIALIZED: Final = "node.cloudprovider.kubernetes.io/uninitialized"
READINESS_TAINT_DOMAIN: Final = "readiness.k8s.io"
"""Taints under this domain (``readiness.k8s.io/*``) are ephemeral too."""

KNOWN_EPHEMERAL_TAINT_KEYS: Final = frozenset(
    {TAINT_NOT_READY, TAINT_UNREACHABLE, TAINT_UNINITIALIZED, TAINT_UNREGISTERED}
)
"""Taints that must be gone before a node is Initialized (plus ``readiness.k8s.io/*``)."""


# --- Helpers ------------------------------------------------------------------------------------


def label_domain(key: str) -> str:
    """Return the prefix of ``key`` before ``/`` (``""`` for an unprefixed key)."""
    prefix, slash, _ = key.partition("/")
    return prefix if slash else ""


def normalize_label_key(key: str) -> str:
    """Return the stable key for a beta key (``beta.kubernetes.io/os`` -> ``kubernetes.io/os``).

    Other keys are returned unchanged.
    """
    return NORMALIZED_LABELS.get(key, key)


def _in_domain(domain: str, parent: str) -> bool:
    # Karpenter compares with strings.HasSuffix; so does Jointer.
    return domain.endswith(parent)


def is_restricted_node_label(key: str) -> bool:
    """Whether ``key`` is a label Jointer must not inject on a node from a NodePool's labels.

    Well-known labels are restricted here (the cloud provider sets them); so is every key in a
    restricted domain, except the exception subdomains; so is ``kubernetes.io/hostname``.
    """
    if key in WELL_KNOWN_LABELS:
        return True
    domain = label_domain(key)
    if any(_in_domain(domain, exception) for exception in LABEL_DOMAIN_EXCEPTIONS):
        return False
    if any(_in_domain(domain, restricted) for restricted in RESTRICTED_LABEL_DOMAINS):
        return True
    return key in RESTRICTED_LABELS


def is_restricted_label(key: str) -> bool:
    """Whether a NodePool may not use ``key`` as a template label or requirement key.

    Well-known labels are allowed; anything else in a restricted domain (outside the exceptions)
    and ``kubernetes.io/hostname`` are not. Requirement keys are normalised
    (:func:`normalize_label_key`) before this check; template labels are not.
    """
    if key in WELL_KNOWN_LABELS:
        return False
    return is_restricted_node_label(key)
