"""EC2NodeClass status resolution: subnets, security groups, AMIs, profile, reservations, Ready.

:class:`NodeClassResolver` resolves every selector of an EC2NodeClass through the providers and
returns a :class:`ResolvedNodeClass`: the resolved resources plus Karpenter's conditions
(``SubnetsReady``, ``SecurityGroupsReady``, ``AMIsReady``, ``InstanceProfileReady``,
``CapacityReservationsReady`` when the reservation provider is wired, and the root ``Ready``).
``status.capacityReservations`` is written only for a class with
``capacityReservationSelectorTerms``. ``Ready`` is False with the reason of the first failing
dependency (``SubnetsNotFound``, ``SecurityGroupsNotFound``, ``AMINotFound``,
``UnsupportedAlias``, ...) and a message naming what is missing; Unknown when AWS could not be
asked (throttled, unauthorized).
The status controller writes :meth:`ResolvedNodeClass.to_status` as a merge patch; the cloud
provider launches from the same resolution.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Final

from cloudprovider.aws.ami import AMI, AmiProvider, UnsupportedAliasError
from cloudprovider.aws.capacityreservation import CapacityReservation, CapacityReservationProvider
from cloudprovider.aws.errors import AwsError, NotFoundError
from cloudprovider.aws.instanceprofile import InstanceProfileProvider
from cloudprovider.aws.nodeclass import (
    AMIStatus,
    CapacityReservationStatus,
    Condition,
    EC2NodeClass,
    EC2NodeClassStatus,
    SecurityGroupStatus,
    SubnetStatus,
)
from cloudprovider.aws.securitygroup import SecurityGroup, SecurityGroupProvider
from cloudprovider.aws.subnet import Subnet, SubnetProvider
from provisioner.apis.core import NodeSelectorRequirement

__all__ = [
    "CONDITION_AMIS_READY",
    "CONDITION_CAPACITY_RESERVATIONS_READY",
    "CONDITION_INSTANCE_PROFILE_READY",
    "CONDITION_READY",
    "CONDITION_SECURITY_GROUPS_READY",
    "CONDITION_SUBNETS_READY",
    "ConditionState",
    "NodeClassCondition",
    "NodeClassResolver",
    "ResolvedNodeClass",
]

CONDITION_READY: Final = "Ready"
CONDITION_SUBNETS_READY: Final = "SubnetsReady"
CONDITION_SECURITY_GROUPS_READY: Final = "SecurityGroupsReady"
CONDITION_AMIS_READY: Final = "AMIsReady"
CONDITION_INSTANCE_PROFILE_READY: Final = "InstanceProfileReady"
CONDITION_CAPACITY_RESERVATIONS_READY: Final = "CapacityReservationsReady"


class ConditionState(StrEnum):
    """A condition's status."""

    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


@dataclass(frozen=True, slots=True)
class NodeClassCondition:
    """One status condition as resolved (no timestamps)."""

    type: str
    status: ConditionState
    reason: str
    message: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ResolvedNodeClass:
    """What an EC2NodeClass resolves to now.

    Attributes:
        nodeclass: the object resolved.
        subnets: matching subnets.
        security_groups: matching security groups.
        amis: matching AMIs, best first.
        instance_profile: the profile name, None when unresolved.
        capacity_reservations: active reservations the class selects (by id).
        conditions: the dependency conditions, then ``Ready``.
    """

    nodeclass: EC2NodeClass
    subnets: tuple[Subnet, ...] = ()
    security_groups: tuple[SecurityGroup, ...] = ()
    amis: tuple[AMI, ...] = ()
    instance_profile: str | None = None
    capacity_reservations: tuple[CapacityReservation, ...] = ()
    conditions: tuple[NodeClassCondition, ...] = ()

    @property
    def ready(self) -> NodeClassCondition:
        """The root ``Ready`` condition."""
        return next(c for c in self.conditions if c.type == CONDITION_READY)

    def is_ready(self) -> bool:
        """Whether ``Ready`` is True."""
        return self.ready.status is ConditionState.TRUE

    def to_status(self, now: datetime) -> EC2NodeClassStatus:
        """The EC2NodeClass ``status`` to patch (conditions stamped with ``now``)."""
        generation = self.nodeclass.metadata.get("generation")
        return EC2NodeClassStatus(
            subnets=[
                SubnetStatus(id=s.id, zone=s.zone, zone_id=s.zone_id or None) for s in self.subnets
            ],
            security_groups=[
                SecurityGroupStatus(id=g.id, name=g.name or None) for g in self.security_groups
            ],
            amis=[
                AMIStatus(
                    id=ami.id,
                    name=ami.name or None,
                    deprecated=ami.deprecated or None,
                    requirements=[
                        NodeSelectorRequirement(
                            key=d["key"], operator=d["operator"], values=tuple(d["values"])
                        )
                        for d in ami.requirements.to_dicts()
                    ],
                )
                for ami in self.amis
            ],
            instance_profile=self.instance_profile,
            capacity_reservations=[
                CapacityReservationStatus(
                    availability_zone=r.zone,
                    end_time=r.end_time,
                    id=r.id,
                    instance_match_criteria="targeted"
                    if r.instance_match_criteria == "targeted"
                    else "open",
                    instance_type=r.instance_type,
                    interruptible=r.interruptible or None,
                    owner_id=r.owner_id,
                    reservation_type="capacity-block" if r.is_block else "default",
                    state="expiring" if r.is_block and r.expiring(now) else "active",
                )
                for r in self.capacity_reservations
            ]
            if self.nodeclass.spec.capacity_reservation_selector_terms
            else None,
            conditions=[
                Condition(
                    type=c.type,
                    status=c.status.value,
                    reason=c.reason,
                    message=c.message,
                    last_transition_time=now,
                    observed_generation=generation if isinstance(generation, int) else None,
                )
                for c in self.conditions
            ],
        )


def _unknown(kind: str, error: AwsError) -> NodeClassCondition:
    reason = "".join(part.capitalize() for part in error.kind.value.split("_"))
    return NodeClassCondition(kind, ConditionState.UNKNOWN, reason or "Unknown", str(error))


@dataclass(slots=True, kw_only=True)
class NodeClassResolver:
    """Resolves EC2NodeClasses through the subnet, security group, AMI and profile providers."""

    subnets: SubnetProvider
    security_groups: SecurityGroupProvider
    amis: AmiProvider
    instance_profiles: InstanceProfileProvider
    capacity_reservations: CapacityReservationProvider | None = None

    def resolve(self, nodeclass: EC2NodeClass) -> ResolvedNodeClass:
        """Resolve every selector; never raises for AWS errors (they become Unknown)."""
        spec = nodeclass.spec
        conditions: list[NodeClassCondition] = []
        subnets: tuple[Subnet, ...] = ()
        groups: tuple[SecurityGroup, ...] = ()
        amis: tuple[AMI, ...] = ()
        profile: str | None = None
        try:
            subnets = self.subnets.resolve(spec.subnet_selector_terms)
            conditions.append(
                NodeClassCondition(CONDITION_SUBNETS_READY, ConditionState.TRUE, "SubnetsReady")
                if subnets
                else NodeClassCondition(
                    CONDITION_SUBNETS_READY,
                    ConditionState.FALSE,
                    "SubnetsNotFound",
                    "SubnetSelector did not match any Subnets",
                )
            )
        except AwsError as error:
            conditions.append(_unknown(CONDITION_SUBNETS_READY, error))
        try:
            groups = self.security_groups.resolve(spec.security_group_selector_terms)
            conditions.append(
                NodeClassCondition(
                    CONDITION_SECURITY_GROUPS_READY, ConditionState.TRUE, "SecurityGroupsReady"
                )
                if groups
                else NodeClassCondition(
                    CONDITION_SECURITY_GROUPS_READY,
                    ConditionState.FALSE,
                    "SecurityGroupsNotFound",
                    "SecurityGroupSelector did not match any SecurityGroups",
                )
            )
        except AwsError as error:
            conditions.append(_unknown(CONDITION_SECURITY_GROUPS_READY, error))
        amis, ami_condition = self._resolve_amis(nodeclass)
        conditions.append(ami_condition)
        profile, profile_condition = self._resolve_profile(nodeclass)
        conditions.append(profile_condition)
        reservations: tuple[CapacityReservation, ...] = ()
        if self.capacity_reservations is not None:
            try:
                reservations = self.capacity_reservations.resolve(
                    spec.capacity_reservation_selector_terms
                )
                conditions.append(
                    NodeClassCondition(
                        CONDITION_CAPACITY_RESERVATIONS_READY,
                        ConditionState.TRUE,
                        CONDITION_CAPACITY_RESERVATIONS_READY,
                    )
                )
            except AwsError as error:
                conditions.append(_unknown(CONDITION_CAPACITY_RESERVATIONS_READY, error))
        conditions.append(_root(conditions))
        return ResolvedNodeClass(
            nodeclass=nodeclass,
            subnets=subnets,
            security_groups=groups,
            amis=amis,
            instance_profile=profile,
            capacity_reservations=reservations,
            conditions=tuple(conditions),
        )

    def _resolve_amis(self, nodeclass: EC2NodeClass) -> tuple[tuple[AMI, ...], NodeClassCondition]:
        try:
            amis = self.amis.resolve(nodeclass.spec.ami_selector_terms, nodeclass.ami_family())
        except UnsupportedAliasError as error:
            return (), NodeClassCondition(
                CONDITION_AMIS_READY, ConditionState.FALSE, "UnsupportedAlias", str(error)
            )
        except AwsError as error:
            return (), _unknown(CONDITION_AMIS_READY, error)
        if not amis:
            return (), NodeClassCondition(
                CONDITION_AMIS_READY,
                ConditionState.FALSE,
                "AMINotFound",
                "AMISelector did not match any AMIs",
            )
        return amis, NodeClassCondition(CONDITION_AMIS_READY, ConditionState.TRUE, "AMIsReady")

    def _resolve_profile(self, nodeclass: EC2NodeClass) -> tuple[str | None, NodeClassCondition]:
        try:
            name = self.instance_profiles.resolve(nodeclass)
        except NotFoundError as error:
            return None, NodeClassCondition(
                CONDITION_INSTANCE_PROFILE_READY,
                ConditionState.FALSE,
                "InstanceProfileNotFound",
                f"role {nodeclass.spec.role!r} not found: {error}",
            )
        except AwsError as error:
            return None, _unknown(CONDITION_INSTANCE_PROFILE_READY, error)
        return name, NodeClassCondition(
            CONDITION_INSTANCE_PROFILE_READY, ConditionState.TRUE, "InstanceProfileReady"
        )


def _root(dependencies: list[NodeClassCondition]) -> NodeClassCondition:
    for status in (ConditionState.FALSE, ConditionState.UNKNOWN):
        failing = [c for c in dependencies if c.status is status]
        if failing:
            message = "; ".join(f"{c.type}={status.value}: {c.message}" for c in failing)
            return NodeClassCondition(CONDITION_READY, status, failing[0].reason, message)
    return NodeClassCondition(CONDITION_READY, ConditionState.TRUE, "Ready")
