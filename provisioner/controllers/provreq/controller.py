"""The ``provisioningrequest`` reconciler: ProvisioningRequest v1 conditions, both classes.

Per request (``namespace/name``), for the classes Jointer serves:

1. Its PodTemplates are read (``get``) into the cache and its pods built; a missing or bad
   template makes it ``Failed=True`` (``FailedToCreatePods``). Otherwise ``Accepted=True``.
2. ``check-capacity``: the request's pods are planned onto current and in-flight capacity only
   (the shared :func:`~provisioner.controllers.provisioning.controller.decide`, no NodePools);
   all fit: ``Provisioned=True`` (``CapacityIsFound``) and the room is booked; else
   ``Provisioned=False`` (``CapacityIsNotFound``), checked again every minute.
3. ``best-effort-atomic-scale-up``: the provisioning controller plans its pods as one gang with
   every batch and launches it all or nothing (NodeClaims annotated with the request). Once every
   NodeClaim holding its pods is a Ready node: ``Provisioned=True`` (``CapacityIsProvisioned``).
   Past ``ValidUntilSeconds`` (default 7 days) without it: ``Failed=True`` (``Expired``), and
   NodeClaims still in flight for it are deleted.
4. Provisioned room is booked for 10 minutes; when no consumer pod came by then:
   ``BookingExpired=True`` (``CapacityReservationTimeExpired``) and the room is released.

Every condition change is also an event on the request, its reason the condition's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Final

from provisioner.apis.base import parse_object
from provisioner.apis.core import Pod
from provisioner.apis.errors import ApiValidationError
from provisioner.controllers.events import Event, object_ref
from provisioner.controllers.ports import ControllerBase, Ports
from provisioner.controllers.provisioning.controller import PoolSet, ResolvedPools, decide
from provisioner.controllers.provisioning.planner import PlannerConfig
from provisioner.controllers.provisioning.requested import CLAIM_ANNOTATION, CLAIM_PODS_ANNOTATION
from provisioner.kube.errors import ConflictError, KubeApiError, NotFoundError
from provisioner.kube.protocol import EventType, JsonObject
from provisioner.kube.resource import NODE_CLAIMS, POD_TEMPLATES, PROVISIONING_REQUESTS
from provisioner.podgroups import provreq
from provisioner.podgroups.condition import find_condition, is_true
from provisioner.podgroups.provreq import ProvisioningRequest, ProvisioningRequestError
from provisioner.runtime.reconciler import Request, Result
from provisioner.state.cluster import Snapshot
from provisioner.state.statenode import StateNode

__all__ = ["NAME", "ProvisioningRequestController", "request_key"]

NAME: Final = "provisioningrequest"
CHECK_INTERVAL: Final = timedelta(minutes=1)
"""How often a check-capacity request without capacity is checked again."""
LAUNCH_INTERVAL: Final = timedelta(seconds=10)
"""How often an atomic request's launch is looked at while it is in flight."""
NOT_SYNCED: Final = timedelta(seconds=1)

ACCEPTED_MESSAGE: Final = "ProvisioningRequest is accepted by Jointer"
FOUND_REASON: Final = "CapacityIsFound"
FOUND_MESSAGE: Final = "Capacity is found in the cluster"
NOT_FOUND_REASON: Final = "CapacityIsNotFound"
NOT_FOUND_MESSAGE: Final = "Capacity is not found in the cluster"
PROVISIONED_REASON: Final = "CapacityIsProvisioned"
PROVISIONED_MESSAGE: Final = "Capacity is found in the cluster"
FAILED_PODS_REASON: Final = "FailedToCreatePods"
EXPIRED_REASON: Final = "Expired"
EXPIRED_MESSAGE: Final = "ProvisioningRequest is expired"
BOOKING_REASON: Final = "CapacityReservationTimeExpired"
BOOKING_MESSAGE: Final = "Capacity reservation time is expired"


def request_key(obj: Mapping[str, Any]) -> str:
    """``namespace/name`` of a request object."""
    metadata = obj.get("metadata") or {}
    return f"{metadata.get('namespace') or 'default'}/{metadata.get('name') or ''}"


def _ready(state: StateNode) -> bool:
    return state.node is not None and state.initialized and state.ready and not state.deleting


class ProvisioningRequestController(ControllerBase):
    """Writes ``Accepted``, ``Provisioned``, ``Failed`` and ``BookingExpired``.

    Args:
        ports: the controller ports.
        planner: the planner settings (check-capacity plans with them).
        region: the region label value for templates.
    """

    name: Final = NAME

    def __init__(
        self, *, ports: Ports, planner: PlannerConfig | None = None, region: str = ""
    ) -> None:
        super().__init__(ports, NAME)
        self._planner = planner or PlannerConfig()
        self._region = region
        self._consumed: set[str] = set()
        """Requests (by uid) whose consumer pods came: their booking is used, never expired."""

    def reconcile(self, request: Request) -> Result:  # noqa: PLR0911 - one return per state
        """Advance one request's conditions."""
        if not self._state.synced:
            return Result.after(NOT_SYNCED)
        obj = self._find(request.name)
        if obj is None:
            return Result.done()
        try:
            found = parse_object(ProvisioningRequest, obj, kind="ProvisioningRequest")
        except ApiValidationError as error:
            self._log.error("reading provisioning request", error=str(error))
            return Result.done()
        if not provreq.is_active(found):
            return Result.done()
        now = self._clock.now()
        try:
            pods = provreq.virtual_pods(found, self._templates(found))
            until = provreq.valid_until(found)
        except ProvisioningRequestError as error:
            self._set(found, provreq.FAILED, "True", FAILED_PODS_REASON, str(error))
            return Result.done()
        if not is_true(found.status.conditions, provreq.ACCEPTED):
            found = self._set(found, provreq.ACCEPTED, "True", "Accepted", ACCEPTED_MESSAGE)
        since = provreq.provisioned_at(found)
        if since is not None:
            return self._booking(found, since, now)
        if until is not None and now >= until:
            self._expire(found)
            return Result.done()
        if found.spec.provisioning_class_name == provreq.CHECK_CAPACITY:
            result = self._check(found, pods, now)
        else:
            result = self._atomic(found, len(pods), now)
        if until is not None and result.requeue_after is not None:
            return Result.after(min(result.requeue_after, until - now))
        return result

    # -- reads --------------------------------------------------------------------------------

    def _find(self, key: str) -> JsonObject | None:
        objects, _ = self._state.group_objects()
        for obj in objects:
            if obj.get("kind") == "ProvisioningRequest" and request_key(obj) == key:
                return obj
        return None

    def _templates(self, request: ProvisioningRequest) -> dict[str, provreq.PodTemplate]:
        """The request's PodTemplates, read from the API into the cache (missing ones left out)."""
        namespace = request.metadata.namespace or "default"
        found: dict[str, provreq.PodTemplate] = {}
        for index, pod_set in enumerate(request.spec.pod_sets):
            name = pod_set.pod_template_ref.name
            try:
                obj = self._kube.get(POD_TEMPLATES, name, namespace=namespace)
            except NotFoundError:
                continue
            except KubeApiError as error:
                raise ProvisioningRequestError(
                    f"ProvisioningRequest {request.key}: spec.podSets[{index}].podTemplateRef: "
                    f"reading PodTemplate {namespace}/{name}: {error}"
                ) from error
            obj = {"apiVersion": "v1", "kind": "PodTemplate", **obj}
            self._state.apply_object(obj)
            try:
                found[f"{namespace}/{name}"] = parse_object(
                    provreq.PodTemplate, obj, kind="PodTemplate"
                )
            except ApiValidationError as error:
                raise ProvisioningRequestError(str(error)) from error
        return found

    def _consumers(self, request: ProvisioningRequest) -> list[Pod]:
        """The pods that consume the request."""
        namespace = request.metadata.namespace or "default"
        return [
            pod
            for pod in self._state.pods()
            if (pod.metadata.namespace or "default") == namespace
            and provreq.consumed_request(pod) == request.metadata.name
        ]

    def _claims(self, snapshot: Snapshot, key: str) -> list[StateNode]:
        return [
            s
            for s in snapshot.state_nodes.values()
            if s.claim is not None and s.claim.metadata.annotations.get(CLAIM_ANNOTATION) == key
        ]

    # -- classes ------------------------------------------------------------------------------

    def _check(self, request: ProvisioningRequest, pods: Sequence[Pod], now: datetime) -> Result:
        """check-capacity: do all pods fit current and in-flight capacity (no new nodes)?"""
        snapshot = self._state.snapshot(now)
        pools: PoolSet = ResolvedPools()
        plan = decide(snapshot, pools, planner=self._planner, region=self._region, extra_pods=pods)
        placed = {key for placement in plan.existing_nodes for key in placement.pods}
        if all(pod.key in placed for pod in pods):
            self._set(request, provreq.PROVISIONED, "True", FOUND_REASON, FOUND_MESSAGE)
            return self._booking(request, now, now)
        self._set(request, provreq.PROVISIONED, "False", NOT_FOUND_REASON, NOT_FOUND_MESSAGE)
        return Result.after(CHECK_INTERVAL)

    def _atomic(self, request: ProvisioningRequest, total: int, now: datetime) -> Result:
        """best-effort-atomic-scale-up: Provisioned once every NodeClaim for it is Ready."""
        claims = [s for s in self._claims(self._state.snapshot(now), request.key) if not s.deleting]
        slots = sum(_slots(s) for s in claims)
        if claims and slots >= total and all(_ready(s) for s in claims):
            message = f"{PROVISIONED_MESSAGE}: {len(claims)} node(s)"
            self._set(request, provreq.PROVISIONED, "True", PROVISIONED_REASON, message)
            return self._booking(request, now, now)
        return Result.after(LAUNCH_INTERVAL)

    def _booking(self, request: ProvisioningRequest, since: datetime, now: datetime) -> Result:
        """Hold the room for 10 minutes; expire the booking if no consumer pod came."""
        identity = request.metadata.uid or request.key
        if identity in self._consumed or self._consumers(request):
            self._consumed.add(identity)
            return Result.done()
        ends = since + provreq.BOOKING_TIME
        if now < ends:
            return Result.after(ends - now)
        self._set(request, provreq.BOOKING_EXPIRED, "True", BOOKING_REASON, BOOKING_MESSAGE)
        return Result.done()

    def _expire(self, request: ProvisioningRequest) -> None:
        """Past ``ValidUntilSeconds``: ``Failed``, and what is still in flight for it deleted."""
        self._set(request, provreq.FAILED, "True", EXPIRED_REASON, EXPIRED_MESSAGE)
        for state in self._claims(self._state.snapshot(), request.key):
            if state.deleting or _ready(state):
                continue
            try:
                self._kube.delete(NODE_CLAIMS, state.claim_name)
            except KubeApiError as error:
                self._log.error(
                    "deleting nodeclaim", NodeClaim={"name": state.claim_name}, error=str(error)
                )

    # -- writes -------------------------------------------------------------------------------

    def _set(
        self, request: ProvisioningRequest, kind: str, status: str, reason: str, message: str
    ) -> ProvisioningRequest:
        """Write one condition (when it changes) and an event; the request as now stored."""
        current = find_condition(request.status.conditions, kind)
        if current is not None and (current.status, current.reason) == (status, reason):
            return request
        now = self._clock.now()
        conditions: list[dict[str, Any]] = []
        written = False
        for condition in request.status.conditions:
            if condition.type == kind:
                conditions.append(_condition(request, kind, status, reason, message, now=now))
                written = True
            else:
                conditions.append(condition.model_dump(by_alias=True, mode="json"))
        if not written:
            conditions.append(_condition(request, kind, status, reason, message, now=now))
        namespace = request.metadata.namespace or "default"
        try:
            stored = self._kube.patch_status(
                PROVISIONING_REQUESTS,
                request.metadata.name,
                {"status": {"conditions": conditions}},
                namespace=namespace,
            )
        except (ConflictError, NotFoundError, KubeApiError) as error:
            self._log.error(
                "updating provisioning request status",
                ProvisioningRequest={"name": request.metadata.name, "namespace": namespace},
                error=str(error),
            )
            return request
        self._state.apply_object(stored)
        kind_type: EventType = (
            "Warning"
            if kind in {provreq.FAILED, provreq.BOOKING_EXPIRED} or status != "True"
            else "Normal"
        )
        self._events.publish(
            Event(
                object_ref(
                    "ProvisioningRequest",
                    request.metadata.name,
                    api_version=PROVISIONING_REQUESTS.api_version,
                    namespace=namespace,
                    uid=request.metadata.uid,
                ),
                kind_type,
                reason,
                f"{kind}={status}: {message}",
            )
        )
        self._log.info(
            "updated provisioning request",
            ProvisioningRequest={"name": request.metadata.name, "namespace": namespace},
            condition=kind,
            status=status,
            reason=reason,
        )
        return parse_object(ProvisioningRequest, stored, kind="ProvisioningRequest")


def _slots(state: StateNode) -> int:
    try:
        return int(state.nodeclaim.metadata.annotations.get(CLAIM_PODS_ANNOTATION, "0"))
    except ValueError:
        return 0


def _condition(
    request: ProvisioningRequest,
    kind: str,
    status: str,
    reason: str,
    message: str,
    *,
    now: datetime,
) -> dict[str, Any]:
    condition: dict[str, Any] = {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    if request.metadata.generation is not None:
        condition["observedGeneration"] = request.metadata.generation
    return condition
