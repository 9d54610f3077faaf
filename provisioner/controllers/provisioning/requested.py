"""What ProvisioningRequests ask of the planner, derived from a cache snapshot alone.

For every request Jointer serves (:func:`provisioner.podgroups.provreq.is_active`) whose pods
can be built from its PodTemplates:

- ``best-effort-atomic-scale-up``: its NodeClaims (new ones, and existing ones the planner put
  its pods on) are annotated :data:`CLAIM_ANNOTATION` with how many of its pods each holds.
  Until ``Provisioned``, the pods no NodeClaim holds are *pending*, one gang planned with the
  batch (the provisioning controller launches it all or nothing);
- the pods of consumers not yet come are *placeholders* bound to those NodeClaims, while the
  launch is in flight and for the booking after ``Provisioned``, so their room is held for the
  consumers (who take it when they arrive) and no one else is planned onto it;
- ``check-capacity`` with ``Provisioned=True``: placeholders first-fit (by requests) onto the
  registered nodes: capacity found is booked the same way.

Both the controller's batch and ``jointer plan`` read this from the same snapshot.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from provisioner.apis.core import Pod, is_terminal
from provisioner.podgroups import ProvisioningContext, build_context, provreq
from provisioner.scheduling.resources import ResourceListError, requests_of
from provisioner.state.cluster import Snapshot
from provisioner.state.statenode import StateNode

__all__ = ["CLAIM_ANNOTATION", "CLAIM_PODS_ANNOTATION", "Requested", "requested"]

CLAIM_ANNOTATION: Final = "jointer.dev/provisioning-request"
"""On a NodeClaim launched for a request: its ``namespace/name``."""
CLAIM_PODS_ANNOTATION: Final = "jointer.dev/provisioning-request-pods"
"""On a NodeClaim launched for a request: how many of the request's pods it holds."""


@dataclass(frozen=True, slots=True)
class Requested:
    """The requests' virtual pods, as the planner sees them.

    Attributes:
        pending: virtual pods to plan (atomic requests with nothing launched yet).
        placeholders: virtual pods holding booked or in-flight room, bound to a state node key.
        booked: NodeClaim name to the key of the request whose room it holds.
        requests: the active requests by key.
    """

    pending: tuple[Pod, ...] = ()
    placeholders: tuple[Pod, ...] = ()
    booked: Mapping[str, str] = field(default_factory=dict)
    requests: Mapping[str, provreq.ProvisioningRequest] = field(default_factory=dict)

    @property
    def pods(self) -> dict[str, Pod]:
        """Every pending virtual pod by key."""
        return {pod.key: pod for pod in self.pending}


def _requests(pod: Pod) -> dict[str, int]:
    try:
        return requests_of(pod)
    except ResourceListError:
        return {}


def _consumers(snapshot: Snapshot) -> dict[str, list[Pod]]:
    found: dict[str, list[Pod]] = {}
    for pod in snapshot.pods.values():
        name = provreq.consumed_request(pod)
        if name is not None and not is_terminal(pod):
            found.setdefault(f"{pod.metadata.namespace or 'default'}/{name}", []).append(pod)
    return found


def _claims_of(snapshot: Snapshot, key: str) -> list[StateNode]:
    return sorted(
        (
            s
            for s in snapshot.state_nodes.values()
            if s.claim is not None
            and not s.deleting
            and s.claim.metadata.annotations.get(CLAIM_ANNOTATION) == key
        ),
        key=lambda s: s.claim_name,
    )


def _bind(pod: Pod, node: str) -> Pod:
    return pod.model_copy(update={"spec": pod.spec.model_copy(update={"node_name": node})})


def _on_claims(
    pods: Sequence[Pod], claims: Sequence[StateNode], consumers: Sequence[Pod]
) -> list[tuple[Pod, StateNode]]:
    """Fill each NodeClaim's slots, less the consumers already on it, in name order."""
    keys = {pod.key for pod in consumers}
    placed: list[tuple[Pod, StateNode]] = []
    queue = list(pods)
    for state in claims:
        annotations = state.nodeclaim.metadata.annotations
        try:
            slots = int(annotations.get(CLAIM_PODS_ANNOTATION, "0"))
        except ValueError:
            slots = 0
        there = sum(1 for p in state.pods if p.key in keys)
        there += sum(1 for k in state.nominated if k in keys)
        for _ in range(max(0, slots - there)):
            if not queue:
                return placed
            placed.append((queue.pop(0), state))
    return placed


def _first_fit(pods: Sequence[Pod], nodes: Sequence[StateNode]) -> list[tuple[Pod, StateNode]]:
    """Place by requests alone onto registered nodes (check-capacity's booking)."""
    free: dict[str, dict[str, int]] = {}
    for state in nodes:
        if state.node is None or state.deleting or state.allocatable is None:
            continue
        room = dict(state.allocatable)
        for pod in state.pods:
            for name, value in _requests(pod).items():
                room[name] = room.get(name, 0) - value
        free[state.key] = room
    by_key = {s.key: s for s in nodes}
    placed: list[tuple[Pod, StateNode]] = []
    for pod in pods:
        need = _requests(pod)
        for key, room in free.items():
            if all(room.get(name, 0) >= value for name, value in need.items() if value):
                for name, value in need.items():
                    room[name] = room.get(name, 0) - value
                placed.append((pod, by_key[key]))
                break
    return placed


def requested(snapshot: Snapshot, context: ProvisioningContext | None = None) -> Requested:
    """The active requests' pending pods, placeholders and booked NodeClaims.

    A request whose pods cannot be built (missing PodTemplate, ...) asks for nothing: its own
    controller marks it ``Failed``.
    """
    ctx = context if context is not None else build_context(snapshot.group_objects)
    if not ctx.provisioning_requests:
        return Requested()
    consumers = _consumers(snapshot)
    pending: list[Pod] = []
    placeholders: list[Pod] = []
    booked: dict[str, str] = {}
    active: dict[str, provreq.ProvisioningRequest] = {}
    nodes = sorted(snapshot.state_nodes.values(), key=lambda s: s.key)
    for key in sorted(ctx.provisioning_requests):
        request = ctx.provisioning_requests[key]
        if not provreq.is_active(request):
            continue
        if not provreq.is_booking(request, snapshot.taken_at):
            continue
        try:
            pods = provreq.virtual_pods(request, ctx.pod_templates)
        except provreq.ProvisioningRequestError:
            continue
        active[key] = request
        came = consumers.get(key, [])
        missing = pods[len(came) :]
        provisioned = provreq.provisioned_at(request) is not None
        if request.spec.provisioning_class_name == provreq.CHECK_CAPACITY:
            placed = _first_fit(missing, nodes) if provisioned else []
        else:
            placed = _on_claims(missing, _claims_of(snapshot, key), came)
            if not provisioned:  # what no NodeClaim holds yet is planned (again)
                pending.extend(missing[len(placed) :])
        for pod, state in placed:
            placeholders.append(_bind(pod, state.key))
            if state.claim is not None:
                booked[state.claim_name] = key
        if request.spec.provisioning_class_name != provreq.CHECK_CAPACITY:
            for state in _claims_of(snapshot, key):
                booked.setdefault(state.claim_name, key)
    return Requested(
        pending=tuple(pending), placeholders=tuple(placeholders), booked=booked, requests=active
    )
