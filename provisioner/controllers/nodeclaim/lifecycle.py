"""``nodeclaim.lifecycle``: carry a NodeClaim from created to Ready, or give it up.

Sub-steps run in order on one NodeClaim read fresh from the API; each returns when it wants to
run again and the reconciler returns the earliest (Karpenter's lifecycle controller):

1. **Launch** (``Launched``): ``CloudProvider.create`` once per NodeClaim — a launch cache by uid
   plus the provider's own idempotency by name mean a retry or a restart never launches twice.
   Insufficient capacity or a NodeClass that is not ready deletes the claim (its pods are
   re-planned); other failures set ``Launched=Unknown`` and retry. The NodeClaims of one gang
   (label ``jointer.dev/gang``) launch as one unit: all are launched in name order before any
   is recorded, and any failure deletes the whole unit (its pods are re-planned whole).
2. **Registration** (``Registered``): the Node with the claim's providerID appears; it gets the
   claim's labels, annotations (the NodePool template's among them, e.g.
   ``karpenter.sh/do-not-disrupt``), taints and startup taints, the termination finalizer and an
   owner reference, and loses ``karpenter.sh/unregistered``.
3. **Initialization** (``Initialized``): the Node is Ready, startup and known ephemeral taints are
   gone and requested extended resources are registered; the Node is labelled initialized.
4. **Liveness**: not launched 5 min, or not registered 15 min, after creation: delete.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any, Final

from cloudprovider.errors import (
    CloudProviderError,
    CreateError,
    InsufficientCapacityError,
    NodeClassNotReadyError,
)
from cloudprovider.protocol import CloudNodeClaim, LaunchRequest, NodeClassRef
from provisioner.apis import conditions as cond
from provisioner.apis import labels as wk
from provisioner.apis.base import parse_object, to_wire
from provisioner.apis.core import Node
from provisioner.apis.nodeclaim import NodeClaim
from provisioner.controllers.events import insufficient_capacity, nodeclass_not_ready
from provisioner.controllers.nodeclaim.status import (
    get_claim,
    patch_claim_status,
    update_with_version,
)
from provisioner.controllers.ports import ControllerBase, Ports
from provisioner.kube.errors import KubeApiError, NotFoundError
from provisioner.kube.protocol import JsonObject
from provisioner.kube.resource import NODE_CLAIMS, NODES
from provisioner.runtime.reconciler import Request, Result, min_result
from provisioner.scheduling.quantity import parse_quantity
from provisioner.scheduling.requirements import Requirements
from provisioner.scheduling.resources import format_resource_list

__all__ = [
    "GANG_WAIT",
    "GANG_WAIT_LIMIT",
    "LAUNCH_RETRY",
    "LAUNCH_TTL",
    "REGISTRATION_TTL",
    "LifecycleController",
    "claim_ref",
]

NAME: Final = "nodeclaim.lifecycle"
LAUNCH_TTL: Final = timedelta(minutes=5)
"""A NodeClaim not launched this long after creation is deleted (``launch_timeout``)."""
REGISTRATION_TTL: Final = timedelta(minutes=15)
"""A NodeClaim not registered this long after creation is deleted (``registration_timeout``)."""
LAUNCH_RETRY: Final = timedelta(seconds=10)
"""Retry delay after a launch failure that is not a capacity or NodeClass problem."""
WELL_KNOWN_RESOURCES: Final = frozenset({"cpu", "memory", "pods", "ephemeral-storage"})
_READY: Final = "Ready"
GANG_WAIT: Final = timedelta(seconds=1)
"""Retry delay while not every NodeClaim of a gang unit is visible yet."""
GANG_WAIT_LIMIT: Final = timedelta(minutes=1)
"""A gang unit still incomplete this long after creation is given up (re-planned whole)."""


def _gang_size(claim: NodeClaim) -> int:
    try:
        return max(1, int(claim.metadata.annotations.get(wk.ANNOTATION_GANG_SIZE, "1")))
    except ValueError:
        return 1


def _named(claims: Sequence[NodeClaim], name: str) -> NodeClaim:
    return next(c for c in claims if c.name == name)


def _failure_reason(error: CloudProviderError) -> str:
    if isinstance(error, InsufficientCapacityError):
        return "insufficient_capacity"
    if isinstance(error, NodeClassNotReadyError):
        return "nodeclass_not_ready"
    return "launch_failed"


def claim_ref(claim: NodeClaim) -> JsonObject:
    """The NodeClaim in the minimal wire shape events need."""
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": claim.name, "uid": claim.metadata.uid},
    }


def _resources(values: Mapping[str, object] | None) -> dict[str, int]:
    return {name: parse_quantity(str(value)) for name, value in (values or {}).items()}


class LifecycleController(ControllerBase):
    """Runs launch, registration, initialization and liveness for one NodeClaim per request.

    Args:
        ports: what the controller acts through (cache, API, cloud, clock, logs, metrics,
            events).
    """

    name: Final = NAME

    def __init__(
        self,
        *,
        ports: Ports,
    ) -> None:
        super().__init__(ports, NAME)
        self._launched: dict[str, CloudNodeClaim] = {}  # NodeClaim uid -> launched instance
        self._lock = threading.Lock()
        self._gang_lock = threading.Lock()

    def reconcile(self, request: Request) -> Result:
        """Advance the NodeClaim ``request.name`` one step through its lifecycle."""
        claim = get_claim(self._kube, request.name)
        if claim is None or claim.metadata.deletion_timestamp is not None:
            with self._lock:
                if claim is not None:
                    self._launched.pop(claim.metadata.uid, None)
            return Result.done()
        results: list[Result] = []
        for step in (self._launch, self._register, self._initialize):
            next_claim, result = step(claim)
            results.append(result)
            if next_claim is None:
                break
            claim = next_claim
        if get_claim(self._kube, claim.name) is not None:
            results.append(self._liveness(claim))
        return min_result(results)

    # -- 1. launch ----------------------------------------------------------------------------

    def _launch(self, claim: NodeClaim) -> tuple[NodeClaim | None, Result]:
        conditions = claim.status.conditions if claim.status else ()
        if cond.is_true(conditions, cond.NODECLAIM_CONDITION_LAUNCHED):
            return claim, Result.done()
        if claim.metadata.labels.get(wk.LABEL_GANG):
            return self._launch_gang(claim)
        with self._lock:
            launched = self._launched.get(claim.metadata.uid)
        if launched is None:
            try:
                launched = self._cloud.create(self._launch_request(claim))
            except (InsufficientCapacityError, NodeClassNotReadyError) as error:
                self._give_up(claim, error)
                return None, Result.done()
            except CloudProviderError as error:
                return self._launch_failed(claim, error)
            with self._lock:
                self._launched[claim.metadata.uid] = launched
        updated = self._record_launch(claim, launched)
        if updated is None:
            return None, Result.done()
        self._log_launch(claim, launched)
        return updated, Result.done()

    def _log_launch(self, claim: NodeClaim, launched: CloudNodeClaim) -> None:
        self._log.info(
            "launched nodeclaim",
            NodeClaim={"name": claim.name},
            NodePool={"name": claim.nodepool_name or ""},
            **{
                "provider-id": launched.provider_id,
                "instance-type": launched.instance_type,
                "zone": launched.zone,
                "capacity-type": launched.capacity_type,
            },
            allocatable=format_resource_list(launched.allocatable),
        )

    def _launch_gang(self, claim: NodeClaim) -> tuple[NodeClaim | None, Result]:
        """Launch every NodeClaim of ``claim``'s gang as one unit, in name order.

        All launches are attempted before any is recorded; when one fails (capacity, NodeClass,
        limit or API error) every NodeClaim of the unit is deleted (termination gives back
        the instances already launched) and the gang's pods are re-planned whole. One unit is
        launched at a time, its members read fresh under the lock, so a concurrent reconcile
        of a sibling never launches for a unit being given up.
        """
        unit = claim.metadata.labels[wk.LABEL_GANG]
        with self._gang_lock:
            siblings = self._gang_members(unit)
            if siblings is not None and claim.name not in {m.name for m in siblings}:
                return None, Result.done()  # given up meanwhile
            if siblings is None or len(siblings) < _gang_size(claim):
                if siblings is not None and self._is_stale(claim):
                    self._give_up_gang(claim, siblings, None, "gang_incomplete")
                    return None, Result.done()
                return None, Result.after(GANG_WAIT)
            return self._launch_unit(claim, siblings)

    def _launch_unit(
        self, claim: NodeClaim, siblings: Sequence[NodeClaim]
    ) -> tuple[NodeClaim | None, Result]:
        launched: dict[str, CloudNodeClaim] = {}
        for member in siblings:
            conditions = member.status.conditions if member.status else ()
            if cond.is_true(conditions, cond.NODECLAIM_CONDITION_LAUNCHED):
                continue
            with self._lock:
                done = self._launched.get(member.metadata.uid)
            if done is None:
                try:
                    done = self._cloud.create(self._launch_request(member))
                except CloudProviderError as error:
                    for name, instance in launched.items():  # termination deletes them
                        self._record_launch(_named(siblings, name), instance)
                    self._give_up_gang(member, siblings, error, _failure_reason(error))
                    return None, Result.done()
                with self._lock:
                    self._launched[member.metadata.uid] = done
            launched[member.name] = done
        current: NodeClaim | None = claim
        for member in siblings:
            if member.name not in launched:
                continue
            updated = self._record_launch(member, launched[member.name])
            if updated is not None:
                self._log_launch(member, launched[member.name])
            if member.name == claim.name:
                current = updated
        return current, Result.done()

    def _gang_members(self, unit: str) -> list[NodeClaim] | None:
        """The live NodeClaims of one gang unit, by name (None: the API could not be read)."""
        try:
            items = self._kube.list(NODE_CLAIMS, label_selector=f"{wk.LABEL_GANG}={unit}").items
        except KubeApiError:
            return None
        members = [parse_object(NodeClaim, item, kind="NodeClaim") for item in items]
        return sorted(
            (m for m in members if m.metadata.deletion_timestamp is None), key=lambda m: m.name
        )

    def _is_stale(self, claim: NodeClaim) -> bool:
        created = claim.metadata.creation_timestamp
        return created is not None and self._clock.now() >= created + GANG_WAIT_LIMIT

    def _give_up_gang(
        self,
        failed: NodeClaim,
        siblings: Sequence[NodeClaim],
        error: CloudProviderError | None,
        reason: str,
    ) -> None:
        message = str(error) if error is not None else "not every NodeClaim of the gang exists"
        if isinstance(error, InsufficientCapacityError):
            self._events.publish(insufficient_capacity(claim_ref(failed), message))
        elif isinstance(error, NodeClassNotReadyError):
            self._events.publish(nodeclass_not_ready(claim_ref(failed), message))
        self._log.error(
            "failed launching nodeclaim",
            NodeClaim={"name": failed.name},
            NodePool={"name": failed.nodepool_name or ""},
            error=message,
        )
        self._log.info(
            "deleting gang nodeclaims, a launch failed",
            gang=failed.metadata.labels.get(wk.LABEL_GANG, ""),
            NodeClaim={"name": failed.name},
            nodeclaims=len(siblings),
        )
        for member in siblings:
            self._delete(member, reason)

    def _cloud_checkable(self, requests: dict[str, int]) -> dict[str, int]:
        """The requests the cloud can check: capacity NodeOverlays add is not the cloud's.

        The planner fitted the NodeClaim on the overlaid capacity and listed only the
        instance types that have it, so the launch stays within them through the requirements.
        """
        overlaid = {
            name
            for entry in self._state.overlays()
            if entry.overlay is not None
            for name in entry.overlay.spec.capacity or {}
        }
        return {name: value for name, value in requests.items() if name not in overlaid}

    def _launch_request(self, claim: NodeClaim) -> LaunchRequest:
        ref = claim.spec.node_class_ref
        return LaunchRequest(
            name=claim.name,
            uid=claim.metadata.uid,
            nodepool=claim.nodepool_name or "",
            node_class=NodeClassRef(name=ref.name, kind=ref.kind, group=ref.group),
            requirements=Requirements.from_terms(
                [r.model_dump(by_alias=True, exclude_none=True) for r in claim.spec.requirements]
            ),
            requests=self._cloud_checkable(
                _resources(claim.spec.resources.requests if claim.spec.resources else None)
            ),
            labels=dict(claim.metadata.labels),
            annotations=dict(claim.metadata.annotations),
            taints=claim.spec.taints,
            startup_taints=claim.spec.startup_taints,
        )

    def _give_up(self, claim: NodeClaim, error: CloudProviderError) -> None:
        capacity = isinstance(error, InsufficientCapacityError)
        reason = "insufficient_capacity" if capacity else "nodeclass_not_ready"
        event = (insufficient_capacity if capacity else nodeclass_not_ready)(
            claim_ref(claim), str(error)
        )
        self._events.publish(event)
        self._log.error(
            "failed launching nodeclaim",
            NodeClaim={"name": claim.name},
            NodePool={"name": claim.nodepool_name or ""},
            error=str(error),
        )
        self._delete(claim, reason)

    def _launch_failed(
        self, claim: NodeClaim, error: CloudProviderError
    ) -> tuple[NodeClaim | None, Result]:
        reason = error.reason if isinstance(error, CreateError) else cond.REASON_LAUNCH_FAILED
        self._log.error(
            "failed launching nodeclaim", NodeClaim={"name": claim.name}, error=str(error)
        )
        now = self._clock.now()
        patch_claim_status(
            self._kube,
            claim.name,
            lambda c: {
                "conditions": cond.set_unknown(
                    c.status.conditions if c.status else (),
                    cond.NODECLAIM_CONDITION_LAUNCHED,
                    now=now,
                    reason=reason,
                    message=str(error)[:1000],
                )
            },
            now=now,
        )
        return None, Result.after(LAUNCH_RETRY)

    def _record_launch(self, claim: NodeClaim, launched: CloudNodeClaim) -> NodeClaim | None:
        labels = {**launched.labels, **claim.metadata.labels}
        for key in (wk.LABEL_INSTANCE_TYPE, wk.LABEL_ZONE, wk.LABEL_CAPACITY_TYPE):
            value = launched.labels.get(key)
            if value:
                labels[key] = value
        metadata: dict[str, Any] = {"labels": labels}
        if launched.annotations:
            metadata["annotations"] = dict(launched.annotations)
        try:
            self._kube.merge_patch(NODE_CLAIMS, claim.name, {"metadata": metadata})
        except NotFoundError:
            return None
        now = self._clock.now()

        def mutate(current: NodeClaim) -> Mapping[str, Any]:
            conditions = current.status.conditions if current.status else ()
            return {
                "providerID": launched.provider_id,
                "imageID": launched.image_id or None,
                "capacity": format_resource_list(launched.capacity),
                "allocatable": format_resource_list(launched.allocatable),
                "conditions": cond.set_true(conditions, cond.NODECLAIM_CONDITION_LAUNCHED, now=now),
            }

        return patch_claim_status(self._kube, claim.name, mutate, now=now)

    # -- 2. registration ----------------------------------------------------------------------

    def _register(self, claim: NodeClaim) -> tuple[NodeClaim | None, Result]:
        conditions = claim.status.conditions if claim.status else ()
        if cond.is_true(conditions, cond.NODECLAIM_CONDITION_REGISTERED):
            return claim, Result.done()
        provider_id = claim.provider_id
        node = self._state.node_for_provider_id(provider_id) if provider_id else None
        if node is None:
            return None, Result.done()
        synced = update_with_version(
            self._kube, NODES, node.metadata.name, lambda obj: self._node_patch(claim, obj)
        )
        if synced is None:
            return None, Result.done()
        now = self._clock.now()
        updated = patch_claim_status(
            self._kube,
            claim.name,
            lambda c: {
                "nodeName": node.metadata.name,
                "conditions": cond.set_true(
                    c.status.conditions if c.status else (),
                    cond.NODECLAIM_CONDITION_REGISTERED,
                    now=now,
                ),
            },
            now=now,
        )
        if updated is None:
            return None, Result.done()
        self._log.info(
            "registered nodeclaim",
            NodeClaim={"name": claim.name},
            Node={"name": node.metadata.name},
            **{"provider-id": provider_id},
        )
        self._metrics.nodes_created.labels(
            nodepool=claim.nodepool_name or "",
            zone=node.metadata.labels.get(wk.LABEL_ZONE, ""),
        ).inc()
        return updated, Result.done()

    def _node_patch(self, claim: NodeClaim, node: JsonObject) -> dict[str, Any]:
        metadata = node.get("metadata", {})
        spec = node.get("spec", {})
        taints = [t for t in spec.get("taints") or [] if t.get("key") != wk.TAINT_UNREGISTERED]
        labels = metadata.get("labels") or {}
        if labels.get(wk.LABEL_DO_NOT_SYNC_TAINTS) != wk.TRUE:
            present = {(t.get("key"), t.get("effect")) for t in taints}
            for taint in (*claim.spec.taints, *claim.spec.startup_taints):
                if (taint.key, taint.effect) not in present:
                    taints.append(to_wire(taint))
                    present.add((taint.key, taint.effect))
        finalizers = list(metadata.get("finalizers") or [])
        if wk.FINALIZER_TERMINATION not in finalizers:
            finalizers.append(wk.FINALIZER_TERMINATION)
        owners = [
            o for o in metadata.get("ownerReferences") or [] if o.get("uid") != claim.metadata.uid
        ]
        owners.append(
            {
                "apiVersion": "karpenter.sh/v1",
                "kind": "NodeClaim",
                "name": claim.name,
                "uid": claim.metadata.uid,
                "blockOwnerDeletion": True,
            }
        )
        return {
            "metadata": {
                "labels": {**claim.metadata.labels, wk.LABEL_REGISTERED: wk.TRUE},
                "annotations": dict(claim.metadata.annotations),
                "finalizers": finalizers,
                "ownerReferences": owners,
            },
            "spec": {"taints": taints},
        }

    # -- 3. initialization --------------------------------------------------------------------

    def _initialize(  # noqa: PLR0911 - one return per guard
        self, claim: NodeClaim
    ) -> tuple[NodeClaim | None, Result]:
        conditions = claim.status.conditions if claim.status else ()
        if cond.is_true(conditions, cond.NODECLAIM_CONDITION_INITIALIZED):
            return claim, Result.done()
        node_name = claim.status.node_name if claim.status else None
        if not node_name:
            return None, Result.done()
        try:
            node = parse_object(Node, self._kube.get(NODES, node_name), kind="Node")
        except NotFoundError:
            return None, Result.done()
        blocker = _not_initialized(claim, node)
        now = self._clock.now()
        if blocker is not None:
            reason, message = blocker
            patch_claim_status(
                self._kube,
                claim.name,
                lambda c: {
                    "conditions": cond.set_unknown(
                        c.status.conditions if c.status else (),
                        cond.NODECLAIM_CONDITION_INITIALIZED,
                        now=now,
                        reason=reason,
                        message=message,
                    )
                },
                now=now,
            )
            return None, Result.done()
        try:
            self._kube.merge_patch(
                NODES, node_name, {"metadata": {"labels": {wk.LABEL_INITIALIZED: wk.TRUE}}}
            )
        except NotFoundError:
            return None, Result.done()
        updated = patch_claim_status(
            self._kube,
            claim.name,
            lambda c: {
                "conditions": cond.set_true(
                    c.status.conditions if c.status else (),
                    cond.NODECLAIM_CONDITION_INITIALIZED,
                    now=now,
                )
            },
            now=now,
        )
        if updated is None:
            return None, Result.done()
        self._log.info(
            "initialized nodeclaim",
            NodeClaim={"name": claim.name},
            Node={"name": node_name},
            allocatable=dict(node.status.allocatable),
        )
        return updated, Result.done()

    # -- 4. liveness --------------------------------------------------------------------------

    def _liveness(self, claim: NodeClaim) -> Result:
        created = claim.metadata.creation_timestamp
        conditions = claim.status.conditions if claim.status else ()
        if created is None or cond.is_true(conditions, cond.NODECLAIM_CONDITION_REGISTERED):
            return Result.done()
        now = self._clock.now()
        launched = cond.is_true(conditions, cond.NODECLAIM_CONDITION_LAUNCHED)
        ttl, reason = (
            (REGISTRATION_TTL, "registration_timeout")
            if launched
            else (LAUNCH_TTL, "launch_timeout")
        )
        deadline = created + ttl
        if now < deadline:
            return Result.after(deadline - now)
        self._log.info(
            "deleting nodeclaim, liveness timeout",
            NodeClaim={"name": claim.name},
            reason=reason,
            ttl=str(ttl),
        )
        self._delete(claim, reason)
        return Result.done()

    def _delete(self, claim: NodeClaim, reason: str) -> None:
        try:
            self._kube.delete(NODE_CLAIMS, claim.name, uid=claim.metadata.uid or None)
        except (NotFoundError, KubeApiError):
            return
        self._metrics.nodeclaims_disrupted.labels(
            reason=reason,
            nodepool=claim.nodepool_name or "",
            capacity_type=claim.metadata.labels.get(wk.LABEL_CAPACITY_TYPE, ""),
            consolidation_policy="",
            termination_mode="forceful",
        ).inc()


def _not_initialized(claim: NodeClaim, node: Node) -> tuple[str, str] | None:
    """Why ``node`` is not initialized yet, as (reason, message), or None."""
    ready = next((c for c in node.status.conditions if c.type == _READY), None)
    if ready is None or ready.status != cond.STATUS_TRUE:
        return cond.REASON_NODE_NOT_READY, "Node not ready"
    startup = {(t.key, t.effect) for t in claim.spec.startup_taints}
    for taint in node.spec.taints:
        if (taint.key, taint.effect) in startup:
            return cond.REASON_STARTUP_TAINTS_EXIST, f'StartupTaint "{taint.key}" still exists'
        if (
            taint.key in wk.KNOWN_EPHEMERAL_TAINT_KEYS
            or wk.label_domain(taint.key) == wk.READINESS_TAINT_DOMAIN
        ):
            return (
                cond.REASON_KNOWN_EPHEMERAL_TAINTS_EXIST,
                f'KnownEphemeralTaint "{taint.key}" still exists',
            )
    requests = claim.spec.resources.requests if claim.spec.resources else None
    allocatable = _resources(node.status.allocatable)
    for name in sorted(requests or {}):
        if name not in WELL_KNOWN_RESOURCES and allocatable.get(name, 0) <= 0:
            return (
                cond.REASON_RESOURCE_NOT_REGISTERED,
                f'Resource "{name}" was requested but not registered',
            )
    return None
