"""The AWS CloudProvider: orchestrates the per-concept providers; holds no AWS logic itself.

``create`` (karpenter-aws.md §1): NodeClass missing or terminating -> InsufficientCapacityError;
not Ready -> NodeClassNotReadyError; readiness unknown -> CreateError
``NodeClassReadinessUnknown``. An instance already tagged for the NodeClaim is returned as is
(idempotency). Otherwise the compatible available offerings in zones with a subnet are filtered
(exotic types only when nothing else remains; spot dearer than the cheapest on-demand dropped),
the capacity type chosen in Karpenter's order (reserved, then spot, then on-demand, each when the
NodeClaim allows it and an available offering exists), and one CreateFleet issued with the ≤60
cheapest types. Reserved launches use one kind of reservation (ODCR before Capacity Block on a
tie), at most one reservation per type and zone (the one with most room), and a launch template
targeting each reservation; launches are counted against the reservation, and
``ReservationCapacityExceeded`` marks the reservation full. Capacity errors mark the
offerings in the ICE cache; when every spot pool failed for capacity and on-demand is allowed,
the same launch retries at once with a second CreateFleet call for on-demand (Jointer's
improvement over Karpenter #5743).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Final, Protocol

from cloudprovider.aws.ami import AMIS_TTL, AmiProvider, ami_for
from cloudprovider.aws.batcher import FleetBatcher
from cloudprovider.aws.cache import (
    INSTANCES_DRIFT_TTL,
    RESOLVED_INSTANCE_TYPES_TTL,
    Timer,
    TtlCache,
)
from cloudprovider.aws.capacityreservation import (
    CAPACITY_RESERVATIONS_TTL,
    CapacityReservation,
    CapacityReservationProvider,
    reservations_by_type,
    reserved_offering,
)
from cloudprovider.aws.catalog import Catalog
from cloudprovider.aws.drift import (
    dynamic_drift,
    nodeclass_annotations,
    nodeclass_hash,
    ready_in_status,
    restamp_nodeclass,
    static_drift,
)
from cloudprovider.aws.errors import (
    AwsError,
    ErrorKind,
    create_error_reason,
    is_capacity_code,
    is_launch_template_not_found,
    is_service_linked_role_code,
)
from cloudprovider.aws.instance import (
    MAX_INSTANCE_TYPES,
    FleetError,
    FleetOutcome,
    FleetOverride,
    FleetRequest,
    Instance,
    InstanceProvider,
    parse_provider_id,
)
from cloudprovider.aws.instanceprofile import INSTANCE_PROFILE_TTL, InstanceProfileProvider
from cloudprovider.aws.launchtemplate import ClusterInfo, LaunchTemplateProvider, LaunchTemplateSpec
from cloudprovider.aws.nodeclass import AMIFamily, EC2NodeClass
from cloudprovider.aws.nodeclassstatus import ConditionState, NodeClassResolver, ResolvedNodeClass
from cloudprovider.aws.retry import Caller
from cloudprovider.aws.sdk import Ec2Api, IamApi, SsmApi
from cloudprovider.aws.securitygroup import SECURITY_GROUPS_TTL, SecurityGroupProvider
from cloudprovider.aws.ssm import SsmProvider
from cloudprovider.aws.subnet import SUBNETS_TTL, SubnetProvider, zonal_subnets
from cloudprovider.aws.tags import (
    TAG_EKS_CLUSTER_NAME,
    TAG_NAME,
    TAG_NODECLAIM,
    TAG_NODECLASS,
    TAG_NODEPOOL,
    TAG_OWNED,
    cluster_tag,
)
from cloudprovider.aws.unavailable import UNAVAILABLE_OFFERINGS_TTL, UnavailableOfferings
from cloudprovider.aws.userdata import BootstrapOptions, render
from cloudprovider.errors import (
    REASON_NODECLASS_READINESS_UNKNOWN,
    CreateError,
    InsufficientCapacityError,
    NodeClaimNotFoundError,
    NodeClassNotReadyError,
)
from cloudprovider.instancetype import InstanceType, Offering
from cloudprovider.protocol import CloudNodeClaim, LaunchRequest, NodePoolRef
from cloudprovider.selection import Candidate, compatible_candidates
from provisioner.apis.labels import (
    CAPACITY_TYPE_ON_DEMAND,
    CAPACITY_TYPE_RESERVED,
    CAPACITY_TYPE_SPOT,
    LABEL_CAPACITY_RESERVATION_ID,
    LABEL_CAPACITY_RESERVATION_TYPE,
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_ACCELERATOR_COUNT,
    LABEL_INSTANCE_GPU_COUNT,
    LABEL_INSTANCE_TYPE,
    LABEL_NODEPOOL,
    LABEL_TOPOLOGY_ZONE_ID,
    LABEL_ZONE,
)

__all__ = [
    "AwsCloudProvider",
    "InstanceTypeSource",
    "NodeClassGetter",
    "build_aws_cloud_provider",
]

_ICE_MESSAGE: Final = "all requested instance types were unavailable during launch"
_PODS: Final = "pods"
_RESERVATION_CAPACITY_EXCEEDED: Final = "ReservationCapacityExceeded"
_RESERVATION_KIND_ORDER: Final = ("default", "capacity-block")


class NodeClassGetter(Protocol):
    """Reads EC2NodeClasses from the cluster (adapted from the informer cache by the wiring)."""

    def get_nodeclass(self, name: str) -> EC2NodeClass | None:
        """The EC2NodeClass called ``name``, or None."""
        ...


class InstanceTypeSource(Protocol):
    """The region's instance types for a nodeclass (``catalog.Ec2InstanceTypeProvider``)."""

    def catalog(self, nodeclass: EC2NodeClass | None = None) -> Catalog:
        """Every instance type with its capacity, allocatable and priced offerings."""
        ...


def _is_exotic(instance_type: InstanceType) -> bool:
    labels = instance_type.labels
    return (
        "metal" in instance_type.name
        or LABEL_INSTANCE_GPU_COUNT in labels
        or LABEL_INSTANCE_ACCELERATOR_COUNT in labels
    )


def _filter_candidates(candidates: list[Candidate]) -> list[Candidate]:
    """Karpenter's exotic and spot-offering filters (§1.1 steps 5 and 6)."""
    ordinary = [c for c in candidates if not _is_exotic(c.instance_type)]
    if ordinary:
        candidates = ordinary
    on_demand = [
        c.offering.price for c in candidates if c.offering.capacity_type == CAPACITY_TYPE_ON_DEMAND
    ]
    if on_demand:
        ceiling = min(on_demand)
        candidates = [
            c
            for c in candidates
            if c.offering.capacity_type != CAPACITY_TYPE_SPOT or c.offering.price <= ceiling
        ]
    return candidates


def _reserved_pool(candidates: list[Candidate]) -> list[Candidate]:
    """Karpenter's reservation filters (§1.1 steps 2-4).

    One kind of reservation (the cheapest; ODCR before Capacity Block on a tie) and at most one
    reservation per type and zone (the one with most room).
    """
    reserved = [c for c in candidates if c.offering.capacity_type == CAPACITY_TYPE_RESERVED]
    if not reserved:
        return []

    def kind_rank(candidate: Candidate) -> int:
        kind = candidate.offering.reservation_type or "default"
        return _RESERVATION_KIND_ORDER.index(kind) if kind in _RESERVATION_KIND_ORDER else 2

    first = min(reserved, key=lambda c: (c.offering.price, kind_rank(c)))
    kind = first.offering.reservation_type
    best: dict[tuple[str, str], Candidate] = {}
    for candidate in reserved:
        if candidate.offering.reservation_type != kind:
            continue
        key = (candidate.instance_type.name, candidate.offering.zone)
        held = best.get(key)
        room = candidate.offering.reservation_capacity or 0
        if held is None or room > (held.offering.reservation_capacity or 0):
            best[key] = candidate
    return [c for c in reserved if best.get((c.instance_type.name, c.offering.zone)) is c]


def _truncate(pool: list[Candidate]) -> list[Candidate]:
    kept: list[str] = []
    for candidate in pool:  # pool is in price order
        if candidate.instance_type.name not in kept:
            kept.append(candidate.instance_type.name)
    allowed = set(kept[:MAX_INSTANCE_TYPES])
    return [c for c in pool if c.instance_type.name in allowed]


@dataclass(frozen=True, slots=True, kw_only=True)
class _ZonalTypes:
    """A catalog's types narrowed to some zones and AMIs (see ``_zonal_types``)."""

    catalog: tuple[InstanceType, ...]
    zones: frozenset[str]
    amis: tuple[str, ...]
    types: tuple[InstanceType, ...]


@dataclass(slots=True, kw_only=True)
class AwsCloudProvider:
    """The CloudProvider for EC2.

    Attributes:
        cluster: how nodes join the cluster (name, endpoint, CA, service CIDR).
        region: the AWS region.
        nodeclasses: reads EC2NodeClasses.
        instance_types: the region's catalog per nodeclass.
        resolver: resolves EC2NodeClass selectors (subnets, groups, AMIs, profile).
        launch_templates: creates launch templates.
        instances: launches and finds instances.
        unavailable: the ICE cache.
        fleet_batcher: merges identical concurrent launches; unless inline, its
            ``BatcherThread`` must be running (``assemble_aws`` sets it). None: one CreateFleet
            per NodeClaim, synchronously.
    """

    cluster: ClusterInfo
    region: str
    nodeclasses: NodeClassGetter
    instance_types: InstanceTypeSource
    resolver: NodeClassResolver
    launch_templates: LaunchTemplateProvider
    instances: InstanceProvider
    unavailable: UnavailableOfferings
    fleet_batcher: FleetBatcher | None = None
    catalog_cache: TtlCache[str, tuple[InstanceType, ...]] = field(
        default_factory=lambda: TtlCache(ttl=RESOLVED_INSTANCE_TYPES_TTL)
    )
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _zonal: dict[str, _ZonalTypes] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """``aws``."""
        return "aws"

    # --- instance types -----------------------------------------------------------------------

    def _catalog(self, nodeclass: EC2NodeClass | None) -> tuple[InstanceType, ...]:
        key = f"{nodeclass.name}/{nodeclass_hash(nodeclass)}" if nodeclass else ""
        with self._lock:
            cached = self.catalog_cache.get(key)
        if cached is not None:
            return cached
        types = self.instance_types.catalog(nodeclass).instance_types
        with self._lock:
            self.catalog_cache.set(key, types)
        return types

    def _zonal_types(
        self, resolved: ResolvedNodeClass, zones: frozenset[str]
    ) -> tuple[InstanceType, ...]:
        """The catalog's types an AMI serves, with their offerings in ``zones`` only.

        Kept while the catalog, the zones and the AMIs are the same (Karpenter caches its
        instance-type list by the same inputs), so a pass does not rebuild every type.
        """
        nodeclass = resolved.nodeclass
        key = f"{nodeclass.name}/{nodeclass_hash(nodeclass)}"
        catalog = self._catalog(nodeclass)
        amis = tuple(ami.id for ami in resolved.amis)
        with self._lock:
            cached = self._zonal.get(key)
        if (
            cached is not None
            and cached.catalog is catalog
            and cached.zones == zones
            and cached.amis == amis
        ):
            return cached.types
        types = tuple(
            replace(it, offerings=tuple(o for o in it.offerings if o.zone in zones))
            for it in catalog
            if ami_for(resolved.amis, it.labels) is not None
        )
        with self._lock:
            self._zonal[key] = _ZonalTypes(catalog=catalog, zones=zones, amis=amis, types=types)
        return types

    def _launchable_types(self, resolved: ResolvedNodeClass) -> list[InstanceType]:
        zones = frozenset(subnet.zone for subnet in resolved.subnets)
        reservations = reservations_by_type(
            r for r in resolved.capacity_reservations if r.zone in zones
        )
        types = [
            replace(
                it,
                offerings=it.offerings
                + self._reserved_offerings(it, reservations.get(it.name, ())),
            )
            if it.name in reservations
            else it
            for it in self._zonal_types(resolved, zones)
        ]
        return self.unavailable.apply(types)

    def _reserved_offerings(
        self, instance_type: InstanceType, reservations: Sequence[CapacityReservation]
    ) -> tuple[Offering, ...]:
        provider = self.resolver.capacity_reservations
        if provider is None or not reservations:
            return ()
        offerings = []
        for reservation in reservations:
            on_demand = instance_type.cheapest(CAPACITY_TYPE_ON_DEMAND, reservation.zone) or next(
                (o for o in instance_type.offerings if o.capacity_type == CAPACITY_TYPE_ON_DEMAND),
                None,
            )
            offerings.append(
                reserved_offering(
                    reservation,
                    on_demand.price if on_demand else 0.0,
                    provider.available(reservation),
                    zone_id=on_demand.zone_id if on_demand else None,
                )
            )
        return tuple(offerings)

    def _ready(self, name: str) -> ResolvedNodeClass:
        nodeclass = self.nodeclasses.get_nodeclass(name)
        if nodeclass is None:
            raise NodeClassNotReadyError(f'EC2NodeClass "{name}" not found')
        if nodeclass.metadata.get("deletionTimestamp"):
            raise NodeClassNotReadyError(f'EC2NodeClass "{name}" is terminating')
        resolved = self.resolver.resolve(nodeclass)
        ready = resolved.ready
        if ready.status is ConditionState.FALSE:
            raise NodeClassNotReadyError(
                f'EC2NodeClass "{name}" not ready, {ready.reason}: {ready.message}'
            )
        if ready.status is ConditionState.UNKNOWN:
            raise CreateError(
                f'EC2NodeClass "{name}" readiness unknown, {ready.message}',
                reason=REASON_NODECLASS_READINESS_UNKNOWN,
            )
        return resolved

    def get_instance_types(self, nodepool: NodePoolRef) -> Sequence[InstanceType]:
        """See :meth:`CloudProvider.get_instance_types`."""
        try:
            resolved = self._ready(nodepool.node_class.name)
        except CreateError as error:
            raise NodeClassNotReadyError(str(error)) from error
        return self._launchable_types(resolved)

    # --- create --------------------------------------------------------------------------------

    def create(self, request: LaunchRequest) -> CloudNodeClaim:
        """See :meth:`CloudProvider.create`."""
        try:
            resolved = self._ready(request.node_class.name)
        except NodeClassNotReadyError as error:
            if self.nodeclasses.get_nodeclass(request.node_class.name) is None:
                raise InsufficientCapacityError(
                    f"launching nodeclaim {request.name}, {error}"
                ) from error
            raise
        try:
            existing = self.instances.find_by_nodeclaim(request.name)
        except AwsError as error:
            raise CreateError(
                f"launching nodeclaim {request.name}, {error}",
                reason=create_error_reason([error.code]),
            ) from error
        types = self._launchable_types(resolved)
        if existing is not None:
            return self._hydrate(existing, resolved.nodeclass, types, resolved)
        zonal = zonal_subnets(resolved.subnets)
        candidates = [
            c
            for c in compatible_candidates(types, request.requirements, request.requests)
            if c.offering.zone in zonal
        ]
        candidates = _filter_candidates(candidates)
        if not candidates:
            raise InsufficientCapacityError(f"launching nodeclaim {request.name}, {_ICE_MESSAGE}")
        reserved = _reserved_pool(candidates)
        spot = [c for c in candidates if c.offering.capacity_type == CAPACITY_TYPE_SPOT]
        on_demand = [c for c in candidates if c.offering.capacity_type == CAPACITY_TYPE_ON_DEMAND]
        errors: list[FleetError] = []
        for capacity_type, pool in (
            (CAPACITY_TYPE_RESERVED, reserved),
            (CAPACITY_TYPE_SPOT, spot),
            (CAPACITY_TYPE_ON_DEMAND, on_demand),
        ):
            if not pool:
                continue
            outcome = self._launch(request, resolved, capacity_type, _truncate(pool))
            self._mark_unavailable(outcome.errors)
            errors.extend(outcome.errors)
            if outcome.instances:
                instance = outcome.instances[0]
                provider = self.resolver.capacity_reservations
                if instance.reservation_id and provider is not None:
                    provider.mark_launched(instance.reservation_id)
                return self._hydrate(instance, resolved.nodeclass, types, resolved)
            if not outcome.errors or not all(
                is_capacity_code(e.code) or is_service_linked_role_code(e.code)
                for e in outcome.errors
            ):
                codes = [e.code for e in outcome.errors]
                raise CreateError(
                    f"launching nodeclaim {request.name}, creating fleet: "
                    + (
                        "; ".join(f"{e.code}: {e.message}" for e in outcome.errors)
                        or "no instance returned"
                    ),
                    reason=create_error_reason(codes),
                )
            # every pool of this capacity type failed for capacity: fall through to on-demand
        raise InsufficientCapacityError(
            f"launching nodeclaim {request.name}, {_ICE_MESSAGE} "
            f"({', '.join(sorted({e.code for e in errors}))})"
        )

    def _mark_unavailable(self, errors: Sequence[FleetError]) -> None:
        provider = self.resolver.capacity_reservations
        for error in errors:
            if error.reservation_id:  # reserved: the reservation, not the type and zone
                if provider is not None and (
                    is_capacity_code(error.code) or error.code == _RESERVATION_CAPACITY_EXCEEDED
                ):
                    provider.mark_unavailable(error.reservation_id)
            elif is_service_linked_role_code(error.code):
                self.unavailable.mark_capacity_type_unavailable(CAPACITY_TYPE_SPOT)
            elif is_capacity_code(error.code) and error.instance_type and error.zone:
                self.unavailable.mark_unavailable(
                    error.capacity_type, error.instance_type, error.zone
                )

    def _launch_tags(self, request: LaunchRequest, nodeclass: EC2NodeClass) -> dict[str, str]:
        tags = dict(nodeclass.spec.tags or {})
        tags.update(
            {
                cluster_tag(self.cluster.name): TAG_OWNED,
                TAG_EKS_CLUSTER_NAME: self.cluster.name,
                TAG_NODEPOOL: request.nodepool,
                TAG_NODECLASS: nodeclass.name,
            }
        )
        return tags

    def _user_data(
        self,
        request: LaunchRequest,
        nodeclass: EC2NodeClass,
        capacity_type: str,
        max_pods: int,
        offering: Offering | None = None,
    ) -> str:
        kubelet = nodeclass.spec.kubelet
        dns = tuple(kubelet.cluster_dns or ()) if kubelet else ()
        if not dns and self.cluster.cluster_dns:
            dns = (self.cluster.cluster_dns,)
        labels = dict(request.labels)
        labels[LABEL_NODEPOOL] = request.nodepool
        labels[LABEL_CAPACITY_TYPE] = capacity_type
        if offering is not None and offering.reservation_id:
            labels[LABEL_CAPACITY_RESERVATION_ID] = offering.reservation_id
            labels[LABEL_CAPACITY_RESERVATION_TYPE] = offering.reservation_type or "default"
        family = nodeclass.ami_family()
        options = BootstrapOptions(
            cluster_name=self.cluster.name,
            cluster_endpoint=self.cluster.endpoint,
            ca_bundle=self.cluster.ca_bundle,
            cluster_cidr=self.cluster.service_cidr,
            cluster_dns=dns,
            max_pods=kubelet.max_pods if kubelet and kubelet.max_pods is not None else max_pods,
            labels=labels,
            taints=(*request.taints, *request.startup_taints),
            kubelet=kubelet,
            instance_store_policy=nodeclass.spec.instance_store_policy,
            user_data=nodeclass.spec.user_data,
            custom=family is AMIFamily.CUSTOM,
        )
        return render(family, options)

    def _fleet_request(
        self,
        request: LaunchRequest,
        resolved: ResolvedNodeClass,
        capacity_type: str,
        pool: list[Candidate],
    ) -> FleetRequest:
        nodeclass = resolved.nodeclass
        zonal = zonal_subnets(resolved.subnets)
        lt_tags = self._launch_tags(request, nodeclass)
        templates: dict[tuple[str, int, str | None], str] = {}
        overrides: list[FleetOverride] = []
        seen: set[tuple[str, str]] = set()
        for candidate in pool:
            instance_type, zone = candidate.instance_type, candidate.offering.zone
            ami = ami_for(resolved.amis, instance_type.labels)
            if ami is None or (instance_type.name, zone) in seen:
                continue
            seen.add((instance_type.name, zone))
            max_pods = instance_type.capacity.get(_PODS, 0) // 1000
            offering = candidate.offering
            key = (ami.id, max_pods, offering.reservation_id)
            if key not in templates:
                templates[key] = self.launch_templates.ensure(
                    LaunchTemplateSpec(
                        nodeclass=nodeclass,
                        image_id=ami.id,
                        user_data=self._user_data(
                            request, nodeclass, capacity_type, max_pods, offering
                        ),
                        security_group_ids=tuple(g.id for g in resolved.security_groups),
                        instance_profile=resolved.instance_profile or "",
                        tags=lt_tags,
                        capacity_reservation_id=offering.reservation_id,
                        capacity_reservation_type=offering.reservation_type,
                    )
                )
            overrides.append(
                FleetOverride(
                    instance_type=instance_type.name,
                    zone=zone,
                    subnet_id=zonal[zone].id,
                    image_id=ami.id,
                    launch_template=templates[key],
                    price=candidate.offering.price,
                    reservation_id=offering.reservation_id,
                    reservation_type=offering.reservation_type,
                )
            )
        tags = {**lt_tags, TAG_NODECLAIM: request.name, TAG_NAME: request.name}
        return FleetRequest(
            nodeclaim=request.name,
            nodeclaim_uid=request.uid,
            capacity_type=capacity_type,
            overrides=tuple(overrides),
            tags=tags,
            context=nodeclass.spec.context,
        )

    def _launch(
        self,
        request: LaunchRequest,
        resolved: ResolvedNodeClass,
        capacity_type: str,
        pool: list[Candidate],
    ) -> FleetOutcome:
        fleet = self._fleet_request(request, resolved, capacity_type, pool)
        for attempt in range(2):
            try:
                if self.fleet_batcher is not None:
                    return self.fleet_batcher.submit(fleet).result()
                return self.instances.launch(fleet)
            except AwsError as error:
                if is_launch_template_not_found(error) and attempt == 0:
                    # the template was deleted under us (GC, manual): recreate it, retry once
                    for name in {o.launch_template for o in fleet.overrides}:
                        self.launch_templates.invalidate(name)
                    fleet = self._fleet_request(request, resolved, capacity_type, pool)
                    continue
                if error.kind is ErrorKind.CAPACITY:
                    return FleetOutcome(
                        errors=tuple(
                            FleetError(
                                code=error.code,
                                message=str(error),
                                capacity_type=capacity_type,
                                instance_type=o.instance_type,
                                zone=o.zone,
                                subnet_id=o.subnet_id,
                                reservation_id=o.reservation_id,
                            )
                            for o in fleet.overrides
                        )
                    )
                raise CreateError(
                    f"launching nodeclaim {request.name}, {error}",
                    reason=create_error_reason([error.code]),
                ) from error
        raise CreateError(f"launching nodeclaim {request.name}, launch template not found")

    # --- hydration -----------------------------------------------------------------------------

    def _hydrate(
        self,
        instance: Instance,
        nodeclass: EC2NodeClass | None,
        types: Sequence[InstanceType],
        resolved: ResolvedNodeClass | None = None,
    ) -> CloudNodeClaim:
        instance_type = next((t for t in types if t.name == instance.instance_type), None)
        labels: dict[str, str] = dict(instance_type.labels) if instance_type else {}
        labels[LABEL_INSTANCE_TYPE] = instance.instance_type
        labels[LABEL_ZONE] = instance.zone
        labels[LABEL_CAPACITY_TYPE] = instance.capacity_type
        if instance.reservation_id:
            labels[LABEL_CAPACITY_RESERVATION_ID] = instance.reservation_id
            labels[LABEL_CAPACITY_RESERVATION_TYPE] = instance.reservation_type or "default"
        nodepool = instance.tags.get(TAG_NODEPOOL, "")
        if nodepool:
            labels[LABEL_NODEPOOL] = nodepool
        if resolved is not None:
            zone_ids = {s.zone: s.zone_id for s in resolved.subnets if s.zone_id}
            if instance.zone in zone_ids:
                labels[LABEL_TOPOLOGY_ZONE_ID] = zone_ids[instance.zone]
        return CloudNodeClaim(
            provider_id=instance.provider_id,
            instance_id=instance.id,
            name=instance.tags.get(TAG_NODECLAIM, ""),
            nodepool=nodepool,
            node_class=instance.tags.get(TAG_NODECLASS, ""),
            instance_type=instance.instance_type,
            zone=instance.zone,
            capacity_type=instance.capacity_type,
            image_id=instance.image_id,
            labels=labels,
            annotations=nodeclass_annotations(nodeclass) if nodeclass else {},
            capacity=instance_type.capacity if instance_type else {},
            allocatable=instance_type.allocatable if instance_type else {},
            created_at=instance.launch_time,
            state=instance.state,
        )

    def _hydrate_found(self, instance: Instance) -> CloudNodeClaim:
        nodeclass = self.nodeclasses.get_nodeclass(instance.tags.get(TAG_NODECLASS, ""))
        return self._hydrate(instance, nodeclass, self._catalog(nodeclass))

    # --- get / list / delete -------------------------------------------------------------------

    def _instance_id(self, provider_id: str) -> str:
        try:
            return parse_provider_id(provider_id)
        except ValueError as error:
            raise NodeClaimNotFoundError(f"getting instance {provider_id}, {error}") from error

    def get(self, provider_id: str) -> CloudNodeClaim:
        """See :meth:`CloudProvider.get`."""
        instance_id = self._instance_id(provider_id)
        try:
            instance = self.instances.get(instance_id)
        except AwsError as error:
            if error.kind is ErrorKind.NOT_FOUND:
                raise NodeClaimNotFoundError(f"getting instance {provider_id}, {error}") from error
            raise
        if instance is None:
            raise NodeClaimNotFoundError(f"getting instance {provider_id}, instance not found")
        return self._hydrate_found(instance)

    def list_claims(self) -> list[CloudNodeClaim]:
        """See :meth:`CloudProvider.list_claims` (each EC2NodeClass read once per list)."""
        instances = self.instances.list_instances()
        nodeclasses = {
            name: (nodeclass, self._catalog(nodeclass))
            for name in {i.tags.get(TAG_NODECLASS, "") for i in instances}
            for nodeclass in [self.nodeclasses.get_nodeclass(name)]
        }
        return [
            self._hydrate(instance, *nodeclasses[instance.tags.get(TAG_NODECLASS, "")])
            for instance in instances
        ]

    def delete(self, provider_id: str) -> None:
        """See :meth:`CloudProvider.delete`."""
        instance_id = self._instance_id(provider_id)
        try:
            instance = self.instances.get(instance_id, skip_cache=True)
            if instance is None:
                raise NodeClaimNotFoundError(f"deleting instance {provider_id}, instance not found")
            if instance.state == "shutting-down":
                return
            self.instances.terminate(instance_id)
        except AwsError as error:
            if error.kind is ErrorKind.NOT_FOUND:
                raise NodeClaimNotFoundError(f"deleting instance {provider_id}, {error}") from error
            raise

    # --- drift ---------------------------------------------------------------------------------

    def restamp(self, claim: CloudNodeClaim, *, drifted: bool) -> Mapping[str, str]:
        """See :meth:`CloudProvider.restamp` (``karpenter.k8s.aws/ec2nodeclass-hash[-version]``)."""
        nodeclass = self.nodeclasses.get_nodeclass(claim.node_class)
        if nodeclass is None:
            return {}
        return restamp_nodeclass(nodeclass, claim.annotations, drifted=drifted)

    def is_drifted(self, claim: CloudNodeClaim) -> str | None:
        """See :meth:`CloudProvider.is_drifted`."""
        nodeclass = self.nodeclasses.get_nodeclass(claim.node_class)
        if nodeclass is None:
            return None
        if (reason := static_drift(nodeclass, claim.annotations)) is not None:
            return reason
        if nodeclass.status is None or not ready_in_status(nodeclass.status):
            return None
        instance = self.instances.get(
            self._instance_id(claim.provider_id), within=INSTANCES_DRIFT_TTL
        )
        if instance is None:
            return None
        return dynamic_drift(
            nodeclass.status,
            image_id=claim.image_id or instance.image_id,
            subnet_id=instance.subnet_id,
            security_group_ids=frozenset(instance.security_group_ids),
        )


def build_aws_cloud_provider(
    *,
    ec2: Ec2Api,
    ssm: SsmApi,
    iam: IamApi,
    cluster: ClusterInfo,
    region: str,
    kubernetes_version: str,
    nodeclasses: NodeClassGetter,
    instance_types: InstanceTypeSource,
    caller: Caller | None = None,
    timer: Timer = time.monotonic,
    now: Callable[[], datetime] | None = None,
) -> AwsCloudProvider:
    """Wire the per-concept providers into an AwsCloudProvider (caches share ``timer``).

    ``now`` is the wall clock Capacity Block end times are compared with.
    """
    caller = caller or Caller()
    resolver = NodeClassResolver(
        subnets=SubnetProvider(ec2=ec2, caller=caller, cache=TtlCache(SUBNETS_TTL, timer)),
        security_groups=SecurityGroupProvider(
            ec2=ec2, caller=caller, cache=TtlCache(SECURITY_GROUPS_TTL, timer)
        ),
        amis=AmiProvider(
            ec2=ec2,
            caller=caller,
            ssm=SsmProvider(ssm=ssm, caller=caller, timer=timer),
            kubernetes_version=kubernetes_version,
            cache=TtlCache(AMIS_TTL, timer),
        ),
        instance_profiles=InstanceProfileProvider(
            iam=iam,
            caller=caller,
            cluster=cluster.name,
            region=region,
            cache=TtlCache(INSTANCE_PROFILE_TTL, timer),
        ),
        capacity_reservations=CapacityReservationProvider(
            ec2=ec2,
            caller=caller,
            cache=TtlCache(CAPACITY_RESERVATIONS_TTL, timer),
            exhausted=TtlCache(UNAVAILABLE_OFFERINGS_TTL, timer),
            now=now,
        ),
    )
    return AwsCloudProvider(
        cluster=cluster,
        region=region,
        nodeclasses=nodeclasses,
        instance_types=instance_types,
        resolver=resolver,
        launch_templates=LaunchTemplateProvider(
            ec2=ec2, caller=caller, cluster=cluster.name, timer=timer
        ),
        instances=InstanceProvider(ec2=ec2, caller=caller, cluster=cluster.name, timer=timer),
        unavailable=UnavailableOfferings(timer=timer),
        catalog_cache=TtlCache(RESOLVED_INSTANCE_TYPES_TTL, timer),
    )
