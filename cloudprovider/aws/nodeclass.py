"""The ``EC2NodeClass`` (``karpenter.k8s.aws/v1``) API model.

Every field of the CRD in ``shared/karpenter/crds/karpenter.k8s.aws_ec2nodeclasses.yaml`` (spec
and status), the CRD defaults (``metadataOptions``) and its ``x-kubernetes-validations`` CEL rules
re-implemented as pydantic validators, with the CRD's own messages. Parse with
:func:`parse_nodeclass`; a bad object raises ``ApiValidationError``::

    EC2NodeClass default: spec: must specify exactly one of ['role', 'instanceProfile']

Two CEL rules are reproduced exactly even though they look weaker than their message: the
subnet and security-group "``id`` is mutually exclusive" rules are written ``!self.all(...)`` in
the CRD, so they only reject a list where *every* term combines ``id`` with other fields. Jointer
accepts exactly what the API server accepts.

``spec.kubelet`` is an open map in the CRD (any upstream ``KubeletConfiguration`` field). The
fields that matter to scheduling are typed and validated here (Karpenter v1.14's rules); any
other field is kept as given and passed through.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Final, Literal

import pydantic
from pydantic import Field, field_validator, model_validator

from provisioner.apis.base import ApiModel, parse_object
from provisioner.apis.core import NodeSelectorRequirement
from provisioner.scheduling.quantity import QuantityError, parse_quantity

__all__ = [
    "API_VERSION",
    "KIND",
    "AMIFamily",
    "AMISelectorTerm",
    "BlockDevice",
    "BlockDeviceMapping",
    "CapacityReservationSelectorTerm",
    "ConnectionTracking",
    "CpuOptions",
    "EC2NodeClass",
    "EC2NodeClassSpec",
    "EC2NodeClassStatus",
    "KubeletConfiguration",
    "MetadataOptions",
    "NetworkInterface",
    "PlacementGroupSelector",
    "SecurityGroupSelectorTerm",
    "SubnetSelectorTerm",
    "parse_nodeclass",
]

API_VERSION: Final = "karpenter.k8s.aws/v1"
KIND: Final = "EC2NodeClass"


class AMIFamily(StrEnum):
    """The AMI families Karpenter knows (user data format and default block devices)."""

    AL2 = "AL2"
    AL2023 = "AL2023"
    BOTTLEROCKET = "Bottlerocket"
    CUSTOM = "Custom"
    WINDOWS2019 = "Windows2019"
    WINDOWS2022 = "Windows2022"
    WINDOWS2025 = "Windows2025"

    @property
    def is_windows(self) -> bool:
        """Whether nodes of this family run Windows."""
        return self.value.startswith("Windows")


# alias family prefix -> AMI family
ALIAS_FAMILIES: Final[Mapping[str, AMIFamily]] = {
    "al2": AMIFamily.AL2,
    "al2023": AMIFamily.AL2023,
    "bottlerocket": AMIFamily.BOTTLEROCKET,
    "windows2019": AMIFamily.WINDOWS2019,
    "windows2022": AMIFamily.WINDOWS2022,
    "windows2025": AMIFamily.WINDOWS2025,
}
_WINDOWS_ALIASES: Final = frozenset({"windows2019", "windows2022", "windows2025"})
_ALIAS_RE: Final = re.compile(r"^[a-zA-Z0-9]+@.+$")
_VOLUME_SIZE_RE: Final = re.compile(
    r"^((?:[1-9][0-9]{0,3}|[1-4][0-9]{4}|[5][0-8][0-9]{3}|59000)Gi"
    r"|(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|[6][0-3][0-9]{3}|64000)G"
    r"|([1-9]||[1-5][0-7]|58)Ti|([1-9]||[1-5][0-9]|6[0-3]|64)T)$"
)
_RESTRICTED_TAGS: Final = (
    "eks:eks-cluster-name",
    "karpenter.sh/nodepool",
    "karpenter.sh/nodeclaim",
    "karpenter.k8s.aws/ec2nodeclass",
)
RESERVED_RESOURCE_KEYS: Final = frozenset({"cpu", "memory", "ephemeral-storage", "pid"})
EVICTION_SIGNALS: Final = frozenset(
    {
        "memory.available",
        "nodefs.available",
        "nodefs.inodesFree",
        "imagefs.available",
        "imagefs.inodesFree",
        "pid.available",
    }
)
_PERCENT_RE: Final = re.compile(r"^(100|[0-9]{1,2}(\.[0-9]+)?)%$")

SelectorTags = Annotated[dict[str, str], Field(max_length=20)]


def _check_selector_tags(tags: dict[str, str] | None) -> dict[str, str] | None:
    if tags is not None and any(key == "" or value == "" for key, value in tags.items()):
        raise ValueError("empty tag keys or values aren't supported")
    return tags


def _check_pattern(value: str | None, pattern: str) -> str | None:
    if value is not None and not re.search(pattern, value):
        raise ValueError(f"should match '{pattern}'")
    return value


class SubnetSelectorTerm(ApiModel):
    """Selects subnets by tags or id (fields ANDed)."""

    tags: SelectorTags | None = None
    id: str | None = None

    _tags = field_validator("tags")(_check_selector_tags)

    @field_validator("id")
    @classmethod
    def _id(cls, value: str | None) -> str | None:
        return _check_pattern(value, "subnet-[0-9a-z]+")


class SecurityGroupSelectorTerm(ApiModel):
    """Selects security groups by tags, id or name (fields ANDed)."""

    tags: SelectorTags | None = None
    id: str | None = None
    name: str | None = None

    _tags = field_validator("tags")(_check_selector_tags)

    @field_validator("id")
    @classmethod
    def _id(cls, value: str | None) -> str | None:
        return _check_pattern(value, "sg-[0-9a-z]+")


class CapacityReservationSelectorTerm(ApiModel):
    """Selects capacity reservations by tags, id, owner or match criteria."""

    tags: SelectorTags | None = None
    id: str | None = None
    owner_id: str | None = Field(default=None, alias="ownerID")
    instance_match_criteria: Literal["open", "targeted"] | None = None

    _tags = field_validator("tags")(_check_selector_tags)

    @field_validator("id")
    @classmethod
    def _id(cls, value: str | None) -> str | None:
        return _check_pattern(value, "^cr-[0-9a-z]+$")

    @field_validator("owner_id")
    @classmethod
    def _owner(cls, value: str | None) -> str | None:
        return _check_pattern(value, "^[0-9]{12}$")


class PlacementGroupSelector(ApiModel):
    """Selects one placement group by name or id."""

    name: Annotated[str, Field(min_length=1)] | None = None
    id: str | None = None

    @field_validator("id")
    @classmethod
    def _id(cls, value: str | None) -> str | None:
        return _check_pattern(value, "^pg-[0-9a-z]+$")

    @model_validator(mode="after")
    def _one_of(self) -> PlacementGroupSelector:
        if self.name is None and self.id is None:
            raise ValueError("expected at least one, got none, ['name', 'id']")
        if self.name is not None and self.id is not None:
            raise ValueError("'name' and 'id' are mutually exclusive")
        return self


class AMISelectorTerm(ApiModel):
    """Selects AMIs by alias (alone), tags, id, name, owner or SSM parameter."""

    alias: Annotated[str, Field(max_length=30)] | None = None
    tags: SelectorTags | None = None
    id: str | None = None
    name: str | None = None
    owner: str | None = None
    ssm_parameter: str | None = None

    _tags = field_validator("tags")(_check_selector_tags)

    @field_validator("id")
    @classmethod
    def _id(cls, value: str | None) -> str | None:
        return _check_pattern(value, "ami-[0-9a-z]+")

    @field_validator("alias")
    @classmethod
    def _alias(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not _ALIAS_RE.match(value):
            raise ValueError(
                "'alias' is improperly formatted, must match the format 'family@version'"
            )
        family, _, version = value.partition("@")
        if family not in ALIAS_FAMILIES:
            raise ValueError(
                "family is not supported, must be one of the following: 'al2', 'al2023', "
                "'bottlerocket', 'windows2019', 'windows2022', 'windows2025'"
            )
        if family in _WINDOWS_ALIASES and version != "latest":
            raise ValueError("windows families may only specify version 'latest'")
        return value

    def has_only_alias(self) -> bool:
        """Whether the term is an alias term (which must stand alone)."""
        return self.alias is not None

    def alias_family(self) -> str | None:
        """The family part of the alias (``al2023`` of ``al2023@latest``), if any."""
        return self.alias.partition("@")[0] if self.alias else None


class BlockDevice(ApiModel):
    """EBS parameters of a block device mapping."""

    delete_on_termination: bool | None = None
    encrypted: bool | None = None
    iops: int | None = None
    kms_key_id: str | None = Field(default=None, alias="kmsKeyID")
    snapshot_id: str | None = Field(default=None, alias="snapshotID")
    throughput: int | None = None
    volume_initialization_rate: Annotated[int, Field(ge=100, le=300)] | None = None
    volume_size: str | None = None
    volume_type: Literal["standard", "io1", "io2", "gp2", "sc1", "st1", "gp3"] | None = None

    @field_validator("volume_size")
    @classmethod
    def _size(cls, value: str | None) -> str | None:
        if value is not None and not _VOLUME_SIZE_RE.match(value):
            raise ValueError(
                "must be a volume size in Gi, G, Ti or T within EBS limits (for example 20Gi)"
            )
        return value

    @model_validator(mode="after")
    def _rules(self) -> BlockDevice:
        if self.snapshot_id is None and self.volume_size is None:
            raise ValueError("snapshotID or volumeSize must be defined")
        if self.volume_initialization_rate is not None and not self.snapshot_id:
            raise ValueError("snapshotID must be set when volumeInitializationRate is set")
        return self

    def volume_size_bytes(self) -> int | None:
        """The volume size in bytes, or None when only a snapshot is given."""
        if self.volume_size is None:
            return None
        return parse_quantity(self.volume_size) // 1000


class BlockDeviceMapping(ApiModel):
    """One block device attached at launch; ``rootVolume`` marks the kubelet root dir."""

    device_name: str | None = None
    ebs: BlockDevice | None = None
    root_volume: bool | None = None


class MetadataOptions(ApiModel):
    """Instance metadata service options; defaults are the CRD's (IMDSv2 required, 1 hop)."""

    http_endpoint: Literal["enabled", "disabled"] = "enabled"
    http_protocol_ipv6: Literal["enabled", "disabled"] = Field(
        default="disabled", alias="httpProtocolIPv6"
    )
    http_put_response_hop_limit: Annotated[int, Field(ge=1, le=64)] = 1
    http_tokens: Literal["required", "optional"] = "required"


class NetworkInterface(ApiModel):
    """One network interface to attach at launch."""

    network_card_index: Annotated[int, Field(ge=0)]
    device_index: Annotated[int, Field(ge=0)]
    interface_type: Literal["interface", "efa-only"]


class ConnectionTracking(ApiModel):
    """Idle connection tracking timeouts, in seconds."""

    tcp_established_timeout: Annotated[int, Field(ge=60, le=432000)] | None = None
    udp_stream_timeout: Annotated[int, Field(ge=60, le=180)] | None = None
    udp_timeout: Annotated[int, Field(ge=30, le=60)] | None = None

    @model_validator(mode="after")
    def _one_set(self) -> ConnectionTracking:
        if (
            self.tcp_established_timeout is None
            and self.udp_stream_timeout is None
            and self.udp_timeout is None
        ):
            raise ValueError(
                "at least one of tcpEstablishedTimeout, udpStreamTimeout, or udpTimeout must be set"
            )
        return self


class CpuOptions(ApiModel):
    """CPU options of the instance."""

    nested_virtualization: Literal["enabled", "disabled"] | None = None


def _check_reserved(values: dict[str, str] | None) -> dict[str, str] | None:
    if values is None:
        return None
    for key, value in values.items():
        if key not in RESERVED_RESOURCE_KEYS:
            raise ValueError(f"{key}: valid keys are ['cpu', 'memory', 'ephemeral-storage', 'pid']")
        try:
            amount = parse_quantity(value)
        except QuantityError as exc:
            raise ValueError(f"{key}: {exc}") from exc
        if amount < 0:
            raise ValueError(f"{key}: must not be negative")
    return values


def _check_eviction(values: dict[str, str] | None) -> dict[str, str] | None:
    if values is None:
        return None
    for key, value in values.items():
        if key not in EVICTION_SIGNALS:
            raise ValueError(f"{key}: valid keys are {sorted(EVICTION_SIGNALS)}")
        if value.endswith("%"):
            if not _PERCENT_RE.match(value):
                raise ValueError(f"{key}: percentage must be between 0% and 100%")
            continue
        try:
            amount = parse_quantity(value)
        except QuantityError as exc:
            raise ValueError(f"{key}: {exc}") from exc
        if amount < 0:
            raise ValueError(f"{key}: must not be negative")
    return values


class KubeletConfiguration(ApiModel):
    """The kubelet settings Karpenter reads; other KubeletConfiguration fields pass through."""

    model_config = pydantic.ConfigDict(extra="allow")

    cluster_dns: list[str] | None = Field(default=None, alias="clusterDNS")
    max_pods: Annotated[int, Field(ge=0)] | None = None
    pods_per_core: Annotated[int, Field(ge=0)] | None = None
    system_reserved: dict[str, str] | None = None
    kube_reserved: dict[str, str] | None = None
    eviction_hard: dict[str, str] | None = None
    eviction_soft: dict[str, str] | None = None
    eviction_soft_grace_period: dict[str, str] | None = None
    eviction_max_pod_grace_period: int | None = None
    image_gc_high_threshold_percent: Annotated[int, Field(ge=0, le=100)] | None = Field(
        default=None, alias="imageGCHighThresholdPercent"
    )
    image_gc_low_threshold_percent: Annotated[int, Field(ge=0, le=100)] | None = Field(
        default=None, alias="imageGCLowThresholdPercent"
    )
    cpu_cfs_quota: bool | None = Field(default=None, alias="cpuCFSQuota")

    _reserved = field_validator("system_reserved", "kube_reserved")(_check_reserved)
    _eviction = field_validator("eviction_hard", "eviction_soft")(_check_eviction)

    @field_validator("eviction_soft_grace_period")
    @classmethod
    def _grace_keys(cls, values: dict[str, str] | None) -> dict[str, str] | None:
        if values is not None:
            for key in values:
                if key not in EVICTION_SIGNALS:
                    raise ValueError(f"{key}: valid keys are {sorted(EVICTION_SIGNALS)}")
        return values

    @model_validator(mode="after")
    def _pairs(self) -> KubeletConfiguration:
        high, low = self.image_gc_high_threshold_percent, self.image_gc_low_threshold_percent
        if high is not None and low is not None and high <= low:
            raise ValueError(
                "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent"
            )
        soft = set(self.eviction_soft or {})
        grace = set(self.eviction_soft_grace_period or {})
        if soft - grace:
            raise ValueError(
                "evictionSoft OwnerKey does not have a matching evictionSoftGracePeriod"
            )
        if grace - soft:
            raise ValueError(
                "evictionSoftGracePeriod OwnerKey does not have a matching evictionSoft"
            )
        return self


def _check_terms_exclusive(
    terms: list[Any], field: str, others: tuple[str, ...], message: str
) -> None:
    # CEL: !self.all(x, has(x.<field>) && (has(x.<other>) || ...)) -- see the module docstring.
    if terms and all(
        getattr(term, field) is not None and any(getattr(term, o) is not None for o in others)
        for term in terms
    ):
        raise ValueError(message)


class EC2NodeClassSpec(ApiModel):
    """The desired configuration of EC2 instances launched for NodePools using this class."""

    subnet_selector_terms: Annotated[list[SubnetSelectorTerm], Field(max_length=30)]
    security_group_selector_terms: Annotated[list[SecurityGroupSelectorTerm], Field(max_length=30)]
    ami_selector_terms: Annotated[list[AMISelectorTerm], Field(min_length=1, max_length=30)]
    capacity_reservation_selector_terms: (
        Annotated[list[CapacityReservationSelectorTerm], Field(max_length=30)] | None
    ) = None
    placement_group_selector: PlacementGroupSelector | None = None
    ami_family: AMIFamily | None = None
    associate_public_ip_address: bool | None = Field(default=None, alias="associatePublicIPAddress")
    role: str | None = None
    instance_profile: str | None = None
    user_data: str | None = None
    tags: dict[str, str] | None = None
    kubelet: KubeletConfiguration | None = None
    block_device_mappings: Annotated[list[BlockDeviceMapping], Field(max_length=50)] | None = None
    instance_store_policy: Literal["RAID0"] | None = None
    network_interfaces: Annotated[list[NetworkInterface], Field(max_length=150)] | None = None
    metadata_options: MetadataOptions = Field(default_factory=MetadataOptions)
    detailed_monitoring: bool | None = None
    ip_prefix_count: Annotated[int, Field(ge=0)] | None = None
    context: str | None = None
    connection_tracking: ConnectionTracking | None = None
    cpu_options: CpuOptions | None = None

    @field_validator("subnet_selector_terms")
    @classmethod
    def _subnets(cls, terms: list[SubnetSelectorTerm]) -> list[SubnetSelectorTerm]:
        if not terms:
            raise ValueError("subnetSelectorTerms cannot be empty")
        if not all(t.tags is not None or t.id is not None for t in terms):
            raise ValueError("expected at least one, got none, ['tags', 'id']")
        _check_terms_exclusive(
            terms,
            "id",
            ("tags",),
            "'id' is mutually exclusive, cannot be set with a combination of other fields in "
            "a subnet selector term",
        )
        return terms

    @field_validator("security_group_selector_terms")
    @classmethod
    def _security_groups(
        cls, terms: list[SecurityGroupSelectorTerm]
    ) -> list[SecurityGroupSelectorTerm]:
        if not terms:
            raise ValueError("securityGroupSelectorTerms cannot be empty")
        if not all(t.tags is not None or t.id is not None or t.name is not None for t in terms):
            raise ValueError("expected at least one, got none, ['tags', 'id', 'name']")
        _check_terms_exclusive(
            terms,
            "id",
            ("tags", "name"),
            "'id' is mutually exclusive, cannot be set with a combination of other fields in "
            "a security group selector term",
        )
        _check_terms_exclusive(
            terms,
            "name",
            ("tags", "id"),
            "'name' is mutually exclusive, cannot be set with a combination of other fields in "
            "a security group selector term",
        )
        return terms

    @field_validator("capacity_reservation_selector_terms")
    @classmethod
    def _reservations(
        cls, terms: list[CapacityReservationSelectorTerm] | None
    ) -> list[CapacityReservationSelectorTerm] | None:
        if terms is None:
            return None
        if not all(
            t.tags is not None or t.id is not None or t.instance_match_criteria is not None
            for t in terms
        ):
            raise ValueError(
                "expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']"
            )
        _check_terms_exclusive(
            terms,
            "id",
            ("tags", "owner_id", "instance_match_criteria"),
            "'id' is mutually exclusive, cannot be set along with other fields in a capacity "
            "reservation selector term",
        )
        return terms

    @field_validator("ami_selector_terms")
    @classmethod
    def _amis(cls, terms: list[AMISelectorTerm]) -> list[AMISelectorTerm]:
        fields = ("tags", "id", "name", "alias", "ssm_parameter")
        if not all(any(getattr(t, f) is not None for f in fields) for t in terms):
            raise ValueError(
                "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']"
            )
        if any(
            t.id is not None and any(x is not None for x in (t.alias, t.tags, t.name, t.owner))
            for t in terms
        ):
            raise ValueError(
                "'id' is mutually exclusive, cannot be set with a combination of other fields "
                "in amiSelectorTerms"
            )
        if any(
            t.alias is not None and any(x is not None for x in (t.id, t.tags, t.name, t.owner))
            for t in terms
        ):
            raise ValueError(
                "'alias' is mutually exclusive, cannot be set with a combination of other "
                "fields in amiSelectorTerms"
            )
        if any(t.alias is not None for t in terms) and len(terms) != 1:
            raise ValueError(
                "'alias' is mutually exclusive, cannot be set with a combination of other "
                "amiSelectorTerms"
            )
        return terms

    @field_validator("role", "instance_profile")
    @classmethod
    def _not_empty(cls, value: str | None, info: pydantic.ValidationInfo) -> str | None:
        if value == "":
            name = "role" if info.field_name == "role" else "instanceProfile"
            raise ValueError(f"{name} cannot be empty")
        return value

    @field_validator("tags")
    @classmethod
    def _tags(cls, tags: dict[str, str] | None) -> dict[str, str] | None:
        for key in tags or {}:
            if key == "":
                raise ValueError("empty tag keys aren't supported")
            if key in _RESTRICTED_TAGS:
                raise ValueError(f"tag contains a restricted tag matching {key}")
            if key.startswith("kubernetes.io/cluster"):
                raise ValueError("tag contains a restricted tag matching kubernetes.io/cluster/")
        return tags

    @field_validator("block_device_mappings")
    @classmethod
    def _one_root(
        cls, mappings: list[BlockDeviceMapping] | None
    ) -> list[BlockDeviceMapping] | None:
        if mappings is not None and sum(1 for m in mappings if m.root_volume) > 1:
            raise ValueError("must have only one blockDeviceMappings with rootVolume")
        return mappings

    @field_validator("network_interfaces")
    @classmethod
    def _interfaces(cls, nics: list[NetworkInterface] | None) -> list[NetworkInterface] | None:
        if not nics:
            return nics
        if not any(
            n.device_index == 0 and n.network_card_index == 0 and n.interface_type == "interface"
            for n in nics
        ):
            raise ValueError(
                "networkInterfaces must include a primary interface with interfaceType='interface'"
            )
        pairs = [(n.network_card_index, n.device_index) for n in nics]
        efa_cards = [n.network_card_index for n in nics if n.interface_type == "efa-only"]
        if len(set(pairs)) != len(pairs) or len(set(efa_cards)) != len(efa_cards):
            raise ValueError(
                "networkInterfaces must not have duplicate networkCardIndex and deviceIndex "
                "pairs, and can have at most one efa device per network card"
            )
        return nics

    @model_validator(mode="after")
    def _spec_rules(self) -> EC2NodeClassSpec:
        if (self.role is None) == (self.instance_profile is None):
            raise ValueError("must specify exactly one of ['role', 'instanceProfile']")
        aliases = {t.alias_family() for t in self.ami_selector_terms if t.alias is not None}
        if self.ami_family is not None:
            for family in aliases:
                expected = ALIAS_FAMILIES[str(family)]
                if self.ami_family not in (expected, AMIFamily.CUSTOM):
                    article = "an" if expected.value.startswith("AL") else "a"
                    raise ValueError(
                        f"if set, amiFamily must be '{expected.value}' or 'Custom' when using "
                        f"{article} {expected.value} alias"
                    )
        elif not aliases:
            raise ValueError("must specify amiFamily if amiSelectorTerms does not contain an alias")
        return self


class Condition(ApiModel):
    """A status condition (metav1.Condition)."""

    type: str
    status: Literal["True", "False", "Unknown"]
    last_transition_time: datetime
    reason: Annotated[str, Field(min_length=1, max_length=1024)]
    message: Annotated[str, Field(max_length=32768)]
    observed_generation: Annotated[int, Field(ge=0)] | None = None


class AMIStatus(ApiModel):
    """A resolved AMI."""

    id: str
    name: str | None = None
    deprecated: bool | None = None
    requirements: list[NodeSelectorRequirement]


class SubnetStatus(ApiModel):
    """A resolved subnet."""

    id: str
    zone: str
    zone_id: str | None = Field(default=None, alias="zoneID")


class SecurityGroupStatus(ApiModel):
    """A resolved security group."""

    id: str
    name: str | None = None


class CapacityReservationStatus(ApiModel):
    """A resolved capacity reservation."""

    availability_zone: str
    end_time: datetime | None = None
    id: str
    instance_match_criteria: Literal["open", "targeted"]
    instance_type: str
    interruptible: bool | None = None
    owner_id: str = Field(alias="ownerID")
    reservation_type: Literal["default", "capacity-block"] = "default"
    state: Literal["active", "expiring"] = "active"


class EC2NodeClassStatus(ApiModel):
    """What the controller resolved from the selectors."""

    subnets: list[SubnetStatus] | None = None
    security_groups: list[SecurityGroupStatus] | None = None
    capacity_reservations: list[CapacityReservationStatus] | None = None
    amis: list[AMIStatus] | None = None
    instance_profile: str | None = None
    conditions: list[Condition] | None = None


class EC2NodeClass(ApiModel):
    """``karpenter.k8s.aws/v1`` EC2NodeClass."""

    api_version: Literal["karpenter.k8s.aws/v1"] = API_VERSION
    kind: Literal["EC2NodeClass"] = KIND
    metadata: dict[str, Any] = Field(default_factory=dict)
    spec: EC2NodeClassSpec
    status: EC2NodeClassStatus | None = None

    @property
    def name(self) -> str:
        """``metadata.name`` (empty when unset)."""
        return str(self.metadata.get("name", ""))

    def alias(self) -> str | None:
        """The AMI alias (``al2023@latest``) when the class selects AMIs by alias."""
        for term in self.spec.ami_selector_terms:
            if term.alias is not None:
                return term.alias
        return None

    def ami_family(self) -> AMIFamily:
        """The AMI family in force: ``spec.amiFamily``, else the alias's family."""
        if self.spec.ami_family is not None:
            return self.spec.ami_family
        alias = self.alias()
        if alias is not None:
            return ALIAS_FAMILIES[alias.partition("@")[0]]
        return AMIFamily.CUSTOM  # unreachable: validation requires one of the two


def parse_nodeclass(data: object) -> EC2NodeClass:
    """Validate a decoded EC2NodeClass manifest.

    Raises:
        ApiValidationError: naming ``EC2NodeClass <name>`` and each bad field path.
    """
    return parse_object(EC2NodeClass, data, kind=KIND)
