"""NodePool (``karpenter.sh/v1``): a template for NodeClaims, with limits and disruption settings.

Every field of ``shared/karpenter/crds/karpenter.sh_nodepools.yaml`` (spec and status) is modelled.
Parsing applies the API server's defaults (``expireAfter: 720h``, ``disruption: {consolidateAfter:
0s, consolidationPolicy: WhenEmptyOrUnderutilized, budgets: [{nodes: 10%}]}``) so a parsed NodePool
serialises (:func:`provisioner.apis.base.to_wire`) the way the API server stores it. Validation
re-implements the CRD's patterns and CEL rules and Karpenter's runtime checks (restricted label
domains, duplicate taints); each problem names its field path.

Not checked (they need the previous object): the immutability of ``nodeClassRef.group``/``kind`` and
switching between static (``replicas``) and dynamic provisioning.

:func:`nodepool_hash` is the static-drift hash of ``spec.template`` (:data:`NODEPOOL_HASH_VERSION`);
:func:`restamp` is what Karpenter's hash controllers do to a NodeClaim stamped under another hash
version (a NodeClaim Karpenter launched, taken over by Jointer, or the reverse).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from datetime import timedelta
from typing import Annotated, Any, Final, Literal

from pydantic import AfterValidator, BeforeValidator, Field, ValidationInfo, field_validator

from provisioner.apis import labels
from provisioner.apis.base import ApiModel, to_wire
from provisioner.apis.conditions import DISRUPTION_REASONS, Conditions
from provisioner.apis.core import ObjectMeta, Taint
from provisioner.apis.duration import (
    DurationError,
    format_duration,
    parse_budget_duration,
    parse_duration,
)
from provisioner.apis.nodeclaim import (
    ExpireAfter,
    NodeClaimSpecBase,
    NodeClassReference,
    ResourceList,
)
from provisioner.apis.requirements import (
    LabelValue,
    NodePoolRequirement,
    check_label_key,
    check_requirement_count,
    one_of,
    restricted_label_message,
)

__all__ = [
    "CONSOLIDATION_POLICIES",
    "DEFAULT_BUDGET_NODES",
    "DEFAULT_CONSOLIDATE_AFTER",
    "DEFAULT_CONSOLIDATION_POLICY",
    "KARPENTER_NODEPOOL_HASH_VERSION",
    "MAX_BUDGETS",
    "MAX_TEMPLATE_LABELS",
    "NODEPOOL_API_VERSION",
    "NODEPOOL_HASH_VERSION",
    "NODEPOOL_KIND",
    "Budget",
    "ConsolidationPolicy",
    "Disruption",
    "DisruptionReason",
    "NodeClaimTemplate",
    "NodeClaimTemplateMetadata",
    "NodePool",
    "NodePoolSpec",
    "NodePoolStatus",
    "NodePoolTemplateSpec",
    "nodepool_hash",
    "restamp",
]

NODEPOOL_API_VERSION: Final = "karpenter.sh/v1"
NODEPOOL_KIND: Final = "NodePool"
NODEPOOL_HASH_VERSION: Final = "jointer-v1"
"""Written to ``karpenter.sh/nodepool-hash-version``; another version means re-stamp, not drift.

Jointer's hash is not Karpenter's hashstructure value, so its version is its own: a NodeClaim
Karpenter stamped (:data:`KARPENTER_NODEPOOL_HASH_VERSION`) is re-stamped when Jointer takes it
over, never drifted, and Karpenter re-stamps Jointer's claims the same way when it takes them back.
"""
KARPENTER_NODEPOOL_HASH_VERSION: Final = "v3"
"""The version Karpenter v1 writes (``c/nodepool/hash``); never written by Jointer."""

ConsolidationPolicy = Literal["WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced"]
CONSOLIDATION_POLICIES: Final[tuple[ConsolidationPolicy, ...]] = (
    "WhenEmpty",
    "WhenEmptyOrUnderutilized",
    "Balanced",
)
DisruptionReason = Literal["Underutilized", "Empty", "Drifted"]

DEFAULT_CONSOLIDATE_AFTER: Final = "0s"
DEFAULT_CONSOLIDATION_POLICY: Final[ConsolidationPolicy] = "WhenEmptyOrUnderutilized"
DEFAULT_BUDGET_NODES: Final = "10%"
MAX_BUDGETS: Final = 50
MAX_TEMPLATE_LABELS: Final = 100
_MIN_WEIGHT: Final = 1
_MAX_WEIGHT: Final = 100

_BUDGET_NODES = re.compile(r"((100|[0-9]{1,2})%|[0-9]+)", re.ASCII)
# The CRD's pattern, searched as Go's regexp.MatchString does (the macro branch is only ^-anchored).
_SCHEDULE = re.compile(
    r"^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$",
    re.ASCII,
)
_CRON_FIELD = re.compile(r"[0-9A-Za-z*?,/\-]+", re.ASCII)
_CRON_FIELDS: Final = 5
_KARPENTER_TEMPLATE_LABELS: Final = frozenset({labels.LABEL_CAPACITY_TYPE, labels.LABEL_NODEPOOL})
_AWS_TEMPLATE_LABELS: Final = labels.AWS_WELL_KNOWN_LABELS - {labels.LABEL_TOPOLOGY_ZONE_ID}


def _check_schedule(schedule: str) -> str:
    message = (
        "must be a cron schedule with 5 fields (minute hour day-of-month month day-of-week) or one "
        "of @annually, @yearly, @monthly, @weekly, @daily, @midnight, @hourly"
    )
    if not _SCHEDULE.search(schedule):
        raise ValueError(message)
    if not schedule.startswith("@"):
        fields = schedule.split()
        if len(fields) != _CRON_FIELDS or not all(_CRON_FIELD.fullmatch(f) for f in fields):
            raise ValueError(message)
    return schedule


class Budget(ApiModel):
    """How many of the NodePool's nodes may be disrupted at once, optionally on a schedule.

    Attributes:
        nodes: a count (``"5"``) or a percentage of the pool's nodes (``"10%"``).
        schedule: cron (UTC) or a macro (``@daily``); when the budget starts being active.
        duration: how long it stays active after each schedule hit (``10m``, ``1h30m``).
        reasons: the disruption reasons it applies to; ``None`` = all.
    """

    nodes: str = DEFAULT_BUDGET_NODES
    schedule: Annotated[str, AfterValidator(_check_schedule)] | None = None
    duration: str | None = Field(default=None, validate_default=True)
    reasons: (
        tuple[
            Annotated[DisruptionReason, BeforeValidator(one_of(*DISRUPTION_REASONS))],
            ...,
        ]
        | None
    ) = None

    @field_validator("nodes")
    @classmethod
    def _check_nodes(cls, nodes: str) -> str:
        if not _BUDGET_NODES.fullmatch(nodes):
            raise ValueError(f'"{nodes}" must be a number of nodes ("5") or a percentage ("10%")')
        return nodes

    @field_validator("duration")
    @classmethod
    def _check_duration(cls, duration: str | None, info: ValidationInfo) -> str | None:
        if "schedule" not in info.data:
            return duration  # the schedule itself is invalid; that error is enough
        has_schedule = info.data["schedule"] is not None
        if has_schedule and duration is None:
            raise ValueError("'schedule' must be set with 'duration'")
        if duration is None:
            return None
        if not has_schedule:
            raise ValueError("'duration' must be set with 'schedule'")
        try:
            parse_budget_duration(duration)
        except DurationError as exc:
            raise ValueError(str(exc)) from exc
        return duration

    @field_validator("reasons")
    @classmethod
    def _check_reasons(cls, reasons: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if reasons is not None and len(set(reasons)) != len(reasons):
            raise ValueError("must not contain duplicates")
        if reasons is not None and len(reasons) > MAX_BUDGETS:
            raise ValueError(f"must have at most {MAX_BUDGETS} items")
        return reasons

    @property
    def duration_timedelta(self) -> timedelta | None:
        """``duration`` as a ``timedelta``; ``None`` when the budget is always active."""
        return None if self.duration is None else parse_budget_duration(self.duration)

    @property
    def is_percentage(self) -> bool:
        """Whether ``nodes`` is a percentage."""
        return self.nodes.endswith("%")

    def applies_to(self, reason: str) -> bool:
        """Whether the budget limits disruptions for ``reason`` (all reasons when unset)."""
        return self.reasons is None or reason in self.reasons

    def allowed_disruptions(self, total_nodes: int) -> int:
        """How many nodes may be disrupting when the pool has ``total_nodes``.

        Percentages round up, as Karpenter's ``GetScaledValueFromIntOrPercent(..., true)``.
        """
        if self.is_percentage:
            return -(-int(self.nodes[:-1]) * total_nodes // 100)
        return int(self.nodes)


def _default_budgets() -> tuple[Budget, ...]:
    return (Budget(nodes=DEFAULT_BUDGET_NODES),)


class Disruption(ApiModel):
    """When and how the NodePool's nodes may be disrupted.

    Attributes:
        consolidate_after: how long a node must be without pod events before consolidation, or
            ``Never``; required when ``disruption`` is given (the CRD's rule), ``0s`` when not.
        consolidation_policy: ``WhenEmpty``, ``WhenEmptyOrUnderutilized`` or ``Balanced``.
        budgets: at most 50; the most restrictive active budget wins.
    """

    consolidate_after: ExpireAfter
    consolidation_policy: Annotated[
        ConsolidationPolicy, BeforeValidator(one_of(*CONSOLIDATION_POLICIES))
    ] = DEFAULT_CONSOLIDATION_POLICY
    budgets: tuple[Budget, ...] = Field(default_factory=_default_budgets)

    @field_validator("budgets")
    @classmethod
    def _check_budget_count(cls, budgets: tuple[Budget, ...]) -> tuple[Budget, ...]:
        if len(budgets) > MAX_BUDGETS:
            raise ValueError(f"must have at most {MAX_BUDGETS} budgets, has {len(budgets)}")
        return budgets


def _default_disruption() -> Disruption:
    return Disruption(consolidate_after=DEFAULT_CONSOLIDATE_AFTER)


def _check_template_label_key(key: str) -> None:
    check_label_key(key)
    domain = key.split("/", 1)[0]
    if key not in _KARPENTER_TEMPLATE_LABELS and domain.endswith(labels.KARPENTER_API_GROUP):
        raise ValueError(f'label domain "{labels.KARPENTER_API_GROUP}" is restricted')
    if key in {labels.LABEL_NODEPOOL, labels.LABEL_HOSTNAME}:
        raise ValueError(f'label "{key}" is restricted')
    if key not in _AWS_TEMPLATE_LABELS and domain.endswith(labels.AWS_API_GROUP):
        raise ValueError(f'label domain "{labels.AWS_API_GROUP}" is restricted')
    if labels.is_restricted_label(key):
        raise ValueError(restricted_label_message(key))


class NodeClaimTemplateMetadata(ApiModel):
    """Labels and annotations every NodeClaim (and its node) of the pool gets."""

    labels: dict[str, LabelValue] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)

    @field_validator("labels")
    @classmethod
    def _check_labels(cls, value: dict[str, str]) -> dict[str, str]:
        if len(value) > MAX_TEMPLATE_LABELS:
            raise ValueError(f"must have at most {MAX_TEMPLATE_LABELS} labels, has {len(value)}")
        for key in value:
            try:
                _check_template_label_key(key)
            except ValueError as exc:
                raise ValueError(f'key "{key}": {exc}') from exc
        return value


class NodePoolTemplateSpec(NodeClaimSpecBase):
    """The NodeClaim spec a NodePool stamps out (without resources).

    Attributes:
        requirements: at most 100; layered with pod requirements for every NodeClaim.
    """

    requirements: Annotated[
        tuple[NodePoolRequirement, ...], AfterValidator(check_requirement_count)
    ]


class NodeClaimTemplate(ApiModel):
    """``spec.template``: metadata and spec of the NodeClaims the pool launches."""

    metadata: NodeClaimTemplateMetadata = Field(default_factory=NodeClaimTemplateMetadata)
    spec: NodePoolTemplateSpec


class NodePoolSpec(ApiModel):
    """A NodePool's spec.

    Attributes:
        template: what every NodeClaim of the pool looks like.
        disruption: consolidation and budgets.
        limits: the most capacity the pool may hold (``cpu``, ``memory``, ``nodes``...).
        weight: 1..100; pools with higher weight are tried first; unset = 0.
        replicas: alpha static capacity: keep exactly this many nodes.
    """

    template: NodeClaimTemplate
    disruption: Disruption = Field(default_factory=_default_disruption)
    limits: ResourceList | None = None
    weight: int | None = Field(default=None, strict=True)
    replicas: int | None = Field(default=None, strict=True)

    @field_validator("weight")
    @classmethod
    def _check_weight(cls, weight: int | None) -> int | None:
        if weight is not None and not _MIN_WEIGHT <= weight <= _MAX_WEIGHT:
            raise ValueError(f"must be between {_MIN_WEIGHT} and {_MAX_WEIGHT}")
        return weight

    @field_validator("replicas")
    @classmethod
    def _check_replicas(cls, replicas: int | None, info: ValidationInfo) -> int | None:
        if replicas is None:
            return None
        if replicas < 0:
            raise ValueError("must be at least 0")
        limits = info.data.get("limits") or {}
        if any(resource != "nodes" for resource in limits):
            raise ValueError("only 'limits.nodes' is supported on static NodePools")
        if info.data.get("weight") is not None:
            raise ValueError("'weight' is not supported on static NodePools")
        return replicas


class NodePoolStatus(ApiModel):
    """What the NodePool controller observed.

    Attributes:
        conditions: ``ValidationSucceeded``, ``NodeClassReady``, ``NodeRegistrationHealthy``,
            ``Ready``.
        nodes: how many nodes the pool has.
        node_class_observed_generation: the node class generation last observed.
        resources: the capacity the pool holds.
    """

    conditions: Conditions = ()
    nodes: int = Field(default=0, strict=True)
    node_class_observed_generation: int | None = Field(default=None, strict=True)
    resources: ResourceList | None = None


class NodePool(ApiModel):
    """A ``karpenter.sh/v1`` NodePool."""

    api_version: Annotated[
        Literal["karpenter.sh/v1"], BeforeValidator(one_of(NODEPOOL_API_VERSION))
    ] = NODEPOOL_API_VERSION
    kind: Annotated[Literal["NodePool"], BeforeValidator(one_of(NODEPOOL_KIND))] = NODEPOOL_KIND
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: NodePoolSpec
    status: NodePoolStatus | None = None

    @property
    def name(self) -> str:
        """``metadata.name``."""
        return self.metadata.name

    @property
    def weight(self) -> int:
        """``spec.weight``, 0 when unset."""
        return self.spec.weight or 0

    @property
    def is_static(self) -> bool:
        """Whether ``spec.replicas`` is set (alpha static capacity)."""
        return self.spec.replicas is not None

    @property
    def template_labels(self) -> Mapping[str, str]:
        """``spec.template.metadata.labels``."""
        return self.spec.template.metadata.labels

    @property
    def requirements(self) -> tuple[NodePoolRequirement, ...]:
        """``spec.template.spec.requirements``."""
        return self.spec.template.spec.requirements

    @property
    def taints(self) -> tuple[Taint, ...]:
        """``spec.template.spec.taints``."""
        return self.spec.template.spec.taints

    @property
    def startup_taints(self) -> tuple[Taint, ...]:
        """``spec.template.spec.startupTaints``."""
        return self.spec.template.spec.startup_taints

    @property
    def node_class_ref(self) -> NodeClassReference:
        """``spec.template.spec.nodeClassRef``."""
        return self.spec.template.spec.node_class_ref

    @property
    def limits(self) -> Mapping[str, int | str]:
        """``spec.limits`` (empty when unset)."""
        return self.spec.limits or {}

    @property
    def budgets(self) -> tuple[Budget, ...]:
        """``spec.disruption.budgets`` (defaulted to ``[{nodes: 10%}]``)."""
        return self.spec.disruption.budgets

    @property
    def consolidation_policy(self) -> ConsolidationPolicy:
        """``spec.disruption.consolidationPolicy``."""
        return self.spec.disruption.consolidation_policy

    @property
    def consolidate_after(self) -> timedelta | None:
        """``spec.disruption.consolidateAfter``; ``None`` for ``Never`` (no consolidation)."""
        return parse_duration(self.spec.disruption.consolidate_after)

    @property
    def expire_after(self) -> timedelta | None:
        """``spec.template.spec.expireAfter``; ``None`` for ``Never``."""
        return self.spec.template.spec.expire_after_duration

    @property
    def termination_grace_period(self) -> timedelta | None:
        """``spec.template.spec.terminationGracePeriod``; ``None`` when unset."""
        return self.spec.template.spec.termination_grace_period_duration


def _canonical(value: Any) -> Any:
    """hashstructure-like canonical form: zero values dropped, lists as sorted sets, maps sorted."""
    if isinstance(value, Mapping):
        items = {k: _canonical(v) for k, v in value.items()}
        kept = {k: v for k, v in sorted(items.items()) if v is not None}
        return kept or None
    if isinstance(value, list | tuple):
        members = [_canonical(v) for v in value]
        encoded = sorted({json.dumps(m, sort_keys=True) for m in members if m is not None})
        return [json.loads(m) for m in encoded] or None
    if value in ("", 0, False, None):
        return None
    return value


def nodepool_hash(nodepool: NodePool) -> str:
    """The static-drift hash of ``spec.template``, requirements excluded.

    A NodeClaim carries the hash of its NodePool at launch (``karpenter.sh/nodepool-hash``, version
    :data:`NODEPOOL_HASH_VERSION` in ``karpenter.sh/nodepool-hash-version``); when the pool's hash
    changes the claim is ``Drifted`` (``NodePoolDrifted``). Requirements are excluded because they
    drift semantically (``RequirementsDrifted``), not by hash.

    Like Karpenter's hashstructure options (SlicesAsSets, IgnoreZeroValue, ZeroNil): list order
    does not matter, zero values (``""``, ``0``, ``false``, empty lists/maps, unset) are the same
    as absent, and durations are hashed by value (``720h`` = ``720h0m0s``). The digest is SHA-256 of
    canonical JSON, reported as the decimal value of its first 8 bytes (the shape of Karpenter's
    uint64 hashes; the values differ from Karpenter's, so a fleet moved from Karpenter is
    re-stamped under a version mismatch rather than drifting, see :func:`restamp`).
    """
    template = to_wire(nodepool.spec.template)
    spec = template.setdefault("spec", {})
    spec.pop("requirements", None)
    for field in ("expireAfter", "terminationGracePeriod"):
        if field in spec:
            spec[field] = format_duration(parse_duration(spec[field]))
    encoded = json.dumps(_canonical(template) or {}, sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(encoded.encode("utf-8")).digest()
    return str(int.from_bytes(digest[:8], "big"))


def restamp(
    annotations: Mapping[str, str],
    *,
    hash_key: str,
    version_key: str,
    current_hash: str,
    version: str,
    drifted: bool,
) -> dict[str, str]:
    """The annotations to set on a NodeClaim stamped under another hash version ({} if none).

    Karpenter's ``nodepool.hash`` (and AWS ``nodeclass.hash``) controllers: a hash of another
    version cannot be compared, so the claim takes the current version and, unless it is already
    ``Drifted`` (which then stays, it cannot be re-evaluated), the current hash.
    """
    if annotations.get(version_key) == version:
        return {}
    changes = {version_key: version}
    if not drifted:
        changes[hash_key] = current_hash
    return changes
