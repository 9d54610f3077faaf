"""NodeClaim (``karpenter.sh/v1``): the request for one node, and shapes it shares with NodePool.

Every field of ``shared/karpenter/crds/karpenter.sh_nodeclaims.yaml`` is modelled; the CRD's
patterns, enums and CEL rules are re-implemented so a bad field is reported by its path. Durations
stay the strings they were written as (``expireAfter: 168h``); ``timedelta`` views are properties.

Also here, because NodePool's template spec is a NodeClaim spec without resources:
``NodeClassReference``, the resource ``Quantity`` type and the duration field types.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Annotated, Final, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    PlainValidator,
    ValidationInfo,
    field_validator,
)

from provisioner.apis import labels
from provisioner.apis.base import ApiModel
from provisioner.apis.conditions import Conditions
from provisioner.apis.core import ObjectMeta, Taint
from provisioner.apis.duration import DurationError, parse_duration
from provisioner.apis.requirements import (
    NodeSelectorRequirementWithMinValues,
    check_requirement_count,
    one_of,
)

__all__ = [
    "DEFAULT_EXPIRE_AFTER",
    "NODECLAIM_API_VERSION",
    "NODECLAIM_KIND",
    "ExpireAfter",
    "NodeClaim",
    "NodeClaimResources",
    "NodeClaimSpec",
    "NodeClaimSpecBase",
    "NodeClaimStatus",
    "NodeClassReference",
    "Quantity",
    "ResourceList",
    "TerminationGracePeriod",
    "check_quantity",
    "duplicate_taint_problem",
]

NODECLAIM_API_VERSION: Final = "karpenter.sh/v1"
NODECLAIM_KIND: Final = "NodeClaim"
DEFAULT_EXPIRE_AFTER: Final = "720h"
"""Karpenter's default ``expireAfter`` (30 days)."""

_QUANTITY = re.compile(
    r"[+-]?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE][+-]?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?",
    re.ASCII,
)


def check_quantity(value: object) -> int | str:
    """Validate a resource quantity as the CRDs accept it: an integer, or a quantity string.

    Raises:
        ValueError: neither an integer nor a string matching the Kubernetes quantity grammar.
    """
    if isinstance(value, bool) or not isinstance(value, int | str):
        # pydantic reports ValueError, not TypeError, as a field problem
        raise ValueError("must be an integer or a quantity string (100m, 1.5, 1Gi)")  # noqa: TRY004
    if isinstance(value, str) and not _QUANTITY.fullmatch(value):
        raise ValueError(f'"{value}" is not a quantity (100m, 1.5, 1Gi)')
    return value


Quantity = Annotated[int | str, PlainValidator(check_quantity)]
"""A resource quantity as written (``"100m"``, ``2``, ``"1Gi"``); parse it in ``scheduling``."""
ResourceList = dict[str, Quantity]
"""Resource name to quantity (``cpu``, ``memory``, ``nvidia.com/gpu``...)."""


def _check_expire_after(value: str) -> str:
    try:
        parse_duration(value, allow_never=True)
    except DurationError as exc:
        raise ValueError(str(exc)) from exc
    return value


def _check_grace_period(value: str) -> str:
    try:
        parse_duration(value, allow_never=False)
    except DurationError as exc:
        raise ValueError(str(exc)) from exc
    return value


ExpireAfter = Annotated[str, AfterValidator(_check_expire_after)]
"""A CRD duration that may be ``Never`` (``expireAfter``, ``consolidateAfter``)."""
TerminationGracePeriod = Annotated[str, AfterValidator(_check_grace_period)]
"""A CRD duration that may not be ``Never`` (``terminationGracePeriod``)."""


def duplicate_taint_problem(
    taints: tuple[Taint, ...], startup_taints: tuple[Taint, ...] = ()
) -> str | None:
    """Describe the first key/effect pair that appears twice across ``taints`` and startup taints.

    Returns:
        ``None`` when every pair is unique, else a message naming the pair and both places.
    """
    seen: dict[tuple[str, str], str] = {}
    places = [(f"taints[{i}]", t) for i, t in enumerate(taints)]
    places += [(f"startupTaints[{i}]", t) for i, t in enumerate(startup_taints)]
    for place, taint in places:
        pair = (taint.key, taint.effect)
        if pair in seen:
            return (
                f'duplicate taint key/effect pair "{taint.key}:{taint.effect}" '
                f"({seen[pair]} and {place})"
            )
        seen[pair] = place
    return None


class NodeClassReference(ApiModel):
    """The provider node class a NodeClaim uses (``{group, kind, name}``, all required)."""

    group: str
    kind: str
    name: str

    @field_validator("group")
    @classmethod
    def _check_group(cls, group: str) -> str:
        if not group:
            raise ValueError("group may not be empty")
        if "/" in group:
            suggestion = group.split("/", 1)[0]
            raise ValueError(
                f'must be an API group without a version: "{suggestion}", not "{group}"'
            )
        return group

    @field_validator("kind", "name")
    @classmethod
    def _check_not_empty(cls, value: str, info: ValidationInfo) -> str:
        if not value:
            raise ValueError(f"{info.field_name} may not be empty")
        return value


class NodeClaimSpecBase(ApiModel):
    """Fields shared by a NodeClaim spec and a NodePool's template spec.

    Attributes:
        taints: taints the node gets.
        startup_taints: taints the node starts with, removed by something on the node; pods need
            not tolerate them.
        node_class_ref: the provider's node class.
        termination_grace_period: how long draining may take before pods are deleted.
        expire_after: node lifetime, or ``Never``; default ``720h``.
    """

    taints: tuple[Taint, ...] = ()
    startup_taints: tuple[Taint, ...] = ()
    node_class_ref: NodeClassReference
    termination_grace_period: TerminationGracePeriod | None = None
    expire_after: ExpireAfter = DEFAULT_EXPIRE_AFTER

    @field_validator("startup_taints")
    @classmethod
    def _check_duplicate_taints(
        cls, startup_taints: tuple[Taint, ...], info: ValidationInfo
    ) -> tuple[Taint, ...]:
        problem = duplicate_taint_problem(info.data.get("taints", ()), startup_taints)
        if problem is not None:
            raise ValueError(problem)
        return startup_taints

    @field_validator("taints")
    @classmethod
    def _check_duplicate_in_taints(cls, taints: tuple[Taint, ...]) -> tuple[Taint, ...]:
        problem = duplicate_taint_problem(taints)
        if problem is not None:
            raise ValueError(problem)
        return taints

    @property
    def expire_after_duration(self) -> timedelta | None:
        """``expireAfter`` as a ``timedelta``; ``None`` for ``Never``."""
        return parse_duration(self.expire_after)

    @property
    def termination_grace_period_duration(self) -> timedelta | None:
        """``terminationGracePeriod`` as a ``timedelta``; ``None`` when unset (wait forever)."""
        if self.termination_grace_period is None:
            return None
        return parse_duration(self.termination_grace_period, allow_never=False)


class NodeClaimResources(ApiModel):
    """The resources the NodeClaim's pods need (``resources.requests``)."""

    requests: ResourceList | None = None


class NodeClaimSpec(NodeClaimSpecBase):
    """A NodeClaim's spec (immutable once created).

    Attributes:
        requirements: at most 100; the node must satisfy all.
        resources: the requests of the pods the NodeClaim was made for.
    """

    requirements: Annotated[
        tuple[NodeSelectorRequirementWithMinValues, ...], AfterValidator(check_requirement_count)
    ]
    resources: NodeClaimResources | None = None


class NodeClaimStatus(ApiModel):
    """What the cloud provider and the node reported.

    Attributes:
        node_name: the Node's name once registered.
        provider_id: the cloud provider's id (``aws:///us-east-1a/i-0123...``); the join key.
        image_id: the image the node was launched from.
        capacity: the node's capacity.
        allocatable: the node's allocatable (capacity minus overhead).
        last_pod_event_time: when a pod was last scheduled to or removed from the node.
        conditions: ``Launched``, ``Registered``, ``Initialized``, ``Ready``, ``Drifted``...
    """

    node_name: str | None = None
    provider_id: str | None = Field(default=None, alias="providerID")
    image_id: str | None = Field(default=None, alias="imageID")
    capacity: ResourceList | None = None
    allocatable: ResourceList | None = None
    last_pod_event_time: datetime | None = None
    conditions: Conditions = ()


class NodeClaim(ApiModel):
    """A ``karpenter.sh/v1`` NodeClaim."""

    api_version: Annotated[
        Literal["karpenter.sh/v1"], BeforeValidator(one_of(NODECLAIM_API_VERSION))
    ] = NODECLAIM_API_VERSION
    kind: Annotated[Literal["NodeClaim"], BeforeValidator(one_of(NODECLAIM_KIND))] = NODECLAIM_KIND
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: NodeClaimSpec
    status: NodeClaimStatus | None = None

    @property
    def name(self) -> str:
        """``metadata.name``."""
        return self.metadata.name

    @property
    def nodepool_name(self) -> str | None:
        """The owning NodePool, from the ``karpenter.sh/nodepool`` label."""
        return self.metadata.labels.get(labels.LABEL_NODEPOOL)

    @property
    def provider_id(self) -> str | None:
        """``status.providerID``, once launched."""
        return self.status.provider_id if self.status else None

    @property
    def expire_after(self) -> timedelta | None:
        """``spec.expireAfter``; ``None`` for ``Never``."""
        return self.spec.expire_after_duration

    @property
    def termination_grace_period(self) -> timedelta | None:
        """``spec.terminationGracePeriod``; ``None`` when unset."""
        return self.spec.termination_grace_period_duration
