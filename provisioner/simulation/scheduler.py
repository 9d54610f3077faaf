"""The simulated kube-scheduler (with the gang and queue behaviour of the pod-group schedulers).

One scheduling pass runs whenever pods, nodes or pod-group objects change (once per virtual
instant). It takes the pending pods (not bound, not terminal, not deleting, no scheduling gates)
by priority, then age, then name, and binds each to a node that fits:

* the node is Ready, schedulable and not being deleted;
* the pod tolerates the node's ``NoSchedule``/``NoExecute`` taints;
* the pod's ``nodeSelector`` and required node affinity match the node's labels;
* its requests (containers, init containers, overhead, one pod slot) fit the node's
  allocatable minus what the pods bound there request.

The node the provisioner nominated (the ``Nominated`` event, ``Pod should schedule on:
nodeclaim/<name>``) is tried first, then the others by name. Pod anti-affinity, topology spread
and host ports are not simulated.

**Gangs** (any ecosystem of ``provisioner.podgroups``): the pending members of a group with a
minimum are placed together or not at all; they are bound only if the members already bound
plus those that fit reach the minimum. **KAI queues**: a KAI group whose PodGroup reports a
quota condition, or whose queue chain has no room for its GPUs, is not bound (what KAI does).

**KAI GPU sharing** (:mod:`provisioner.simulation.gpushare`): a ``gpu-fraction``/``gpu-memory`` pod
binds only to a GPU node with room on one device (per device it asks for); every device hosting
fractions holds one ``kai-resource-reservation`` pod (``nvidia.com/gpu: 1``, do-not-disrupt),
created when its first fraction binds and deleted when its last one is gone.

**Preemption** (kube-scheduler's default, simplified): a pod that fits nowhere, whose
``preemptionPolicy`` is not ``Never``, evicts lower-priority pods from the node where the fewest
and lowest of them make room (a ``Preempted`` event on each victim, ``Preempted by pod <uid> on
node <node>``) and binds there at once. Priorities come from ``spec.priority`` or the pod's
PriorityClass (else the ``globalDefault`` one, else 0); pods of a gang and fractions do not preempt,
GPU reservation pods are never victims. This is what keeps headroom placeholders working.

A pod that cannot be bound gets ``PodScheduled=False, reason=Unschedulable`` (and, the first time, a
``FailedScheduling`` event); a bound pod gets a ``Scheduled`` event.

**The unschedulable queue** (kube-scheduler's): a pod that could not be bound is parked, and later
passes skip it until an event that may let it fit (a Node added, changed or removed, a bound pod
deleted or finished, a pod-group object changed, the pod's own spec or labels changed) or until it
has waited ``UNSCHEDULABLE_RETRY_SECONDS`` (``podMaxInUnschedulablePodsDuration``). Members of
gangs are never parked: their group is weighed whole on every pass.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from provisioner.apis.base import parse_object
from provisioner.apis.core import Pod, Taint, is_terminal
from provisioner.apis.errors import ApiValidationError
from provisioner.kube.errors import AlreadyExistsError, ConflictError, NotFoundError
from provisioner.kube.memory import InMemoryKube
from provisioner.kube.protocol import JsonObject, WatchEvent, WatchEventType
from provisioner.kube.resource import EVENTS, NODE_CLAIMS, NODES, PODS, PRIORITY_CLASSES, Resource
from provisioner.podgroups import (
    Ecosystem,
    PodGroupRef,
    build_context,
    detect_group,
    group_info,
    kai,
)
from provisioner.podgroups.context import ProvisioningContext
from provisioner.podgroups.fractions import WHOLE_GPU_MILLI, FractionError
from provisioner.podgroups.keys import NVIDIA_GPU
from provisioner.scheduling.affinity import AffinityError, NodeAffinity, node_selector_matches
from provisioner.scheduling.quantity import QuantityError, parse_quantity
from provisioner.scheduling.resources import (
    ResourceListError,
    add,
    exceeded,
    pod_requests,
    requests_of,
    subtract,
    with_pod_slot,
)
from provisioner.scheduling.taints import (
    TaintError,
    Toleration,
    parse_taint,
    untolerated,
)
from provisioner.simulation.gpushare import (
    RECEIVED_RESOURCE_TYPE,
    RESERVATION_NAMESPACE,
    RESERVE_FOR_GPU_INDEX,
    Devices,
    asks_for_fraction,
    device_groups,
    fraction_on,
    group_labels,
    is_reservation,
    reservation_body,
    share_of,
)
from provisioner.simulation.objects import (
    condition,
    condition_true,
    is_deleting,
    name_of,
    namespace_of,
    pod_key,
    set_condition,
    uid_of,
)
from provisioner.simulation.timeline import Timeline

__all__ = ["SCHEDULER_NAME", "UNSCHEDULABLE_RETRY_SECONDS", "Scheduler"]

SCHEDULER_NAME: Final = "default-scheduler"
UNSCHEDULABLE_RETRY_SECONDS: Final = 300.0
"""How long a parked pod waits at most before it is tried again (kube-scheduler's default)."""
_RETRY_KEY: Final = ("scheduler", "unschedulable-retry")
_NOMINATED_PREFIX: Final = "Pod should schedule on: "
_BLOCKING_EFFECTS: Final = ("NoSchedule", "NoExecute")


@dataclass(frozen=True, slots=True)
class _PodFacts:
    """What placement reads of a pod (parsed once per pod uid)."""

    requests: Mapping[str, int]
    tolerations: tuple[Toleration, ...]
    node_selector: Mapping[str, str]
    affinity: NodeAffinity | None
    error: str | None = None
    fractional: bool = False


@dataclass(slots=True)
class _NodeRoom:
    name: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    free: dict[str, int]
    devices: Devices


@dataclass(frozen=True, slots=True)
class _Placement:
    room: _NodeRoom
    groups: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class _Bound:
    priority: int
    requests: Mapping[str, int]
    pod: JsonObject


@dataclass(slots=True)
class _Pass:
    nodes: list[_NodeRoom]
    by_name: dict[str, _NodeRoom]
    claims_to_nodes: dict[str, str] = field(default_factory=dict)
    priorities: Mapping[str, int] = field(default_factory=dict)
    default_priority: int = 0
    bound: dict[str, list[_Bound]] = field(default_factory=dict)
    may_preempt: bool = False


@dataclass(frozen=True, slots=True)
class _Parked:
    """A pod in the unschedulable queue: since when, and what of it a change would unpark."""

    since: float
    spec: Any
    labels: Any

    @staticmethod
    def of(pod: Mapping[str, Any], now: float) -> _Parked:
        return _Parked(now, pod.get("spec"), (pod.get("metadata") or {}).get("labels"))

    def same_pod(self, pod: Mapping[str, Any]) -> bool:
        """Whether ``pod`` still has the spec and labels it was parked with (not its status)."""
        labels = (pod.get("metadata") or {}).get("labels")
        return bool(pod.get("spec") == self.spec and labels == self.labels)


def _resources(values: Mapping[str, Any] | None) -> dict[str, int]:
    result: dict[str, int] = {}
    for key, value in (values or {}).items():
        try:
            result[key] = parse_quantity(str(value))
        except QuantityError:
            continue
    return result


def _facts(pod: Mapping[str, Any]) -> _PodFacts:
    spec = pod.get("spec") or {}
    try:
        requests = with_pod_slot(
            pod_requests(
                spec.get("containers") or [],
                spec.get("initContainers") or [],
                spec.get("overhead"),
            )
        )
        tolerations = tuple(
            Toleration.from_dict(t, field=f"spec.tolerations[{i}]")
            for i, t in enumerate(spec.get("tolerations") or [])
        )
        raw_affinity = (spec.get("affinity") or {}).get("nodeAffinity")
        affinity = NodeAffinity.from_dict(raw_affinity) if raw_affinity else None
    except (ResourceListError, TaintError, AffinityError) as error:
        return _PodFacts({}, (), {}, None, error=str(error))
    return _PodFacts(
        requests,
        tolerations,
        dict(spec.get("nodeSelector") or {}),
        affinity,
        fractional=asks_for_fraction(pod) and not requests.get(NVIDIA_GPU),
    )


_BUILTIN_PRIORITIES: Final = {
    "system-cluster-critical": 2_000_000_000,
    "system-node-critical": 2_000_001_000,
}


def _priority(pod: Mapping[str, Any], classes: Mapping[str, int], default: int) -> int:
    """The pod's priority: ``spec.priority``, else its PriorityClass's value, else the default."""
    spec = pod.get("spec") or {}
    value = spec.get("priority")
    if isinstance(value, int):
        return value
    name = spec.get("priorityClassName")
    if name:
        return classes.get(str(name), _BUILTIN_PRIORITIES.get(str(name), 0))
    return default


def _priority_classes(objects: Iterable[Mapping[str, Any]]) -> tuple[dict[str, int], int]:
    """PriorityClass values by name, and the ``globalDefault`` value (0 when none)."""
    classes: dict[str, int] = {}
    default = 0
    for obj in objects:
        value = obj.get("value")
        if not isinstance(value, int):
            continue
        classes[name_of(obj)] = value
        if obj.get("globalDefault") is True:
            default = value
    return classes, default


class Scheduler:
    """Binds pending pods to nodes, one pass per virtual instant with changes.

    Args:
        timeline: virtual time and the action queue.
        kube: the in-memory API.
        group_resources: the pod-group collections objects were applied to (for gangs).
    """

    def __init__(
        self,
        *,
        timeline: Timeline,
        kube: InMemoryKube,
        group_resources: Callable[[], Iterable[Resource]],
    ) -> None:
        self._timeline = timeline
        self._kube = kube
        self._group_resources = group_resources
        self._facts: dict[str, _PodFacts] = {}
        self._models: dict[str, Pod | None] = {}
        self._current: dict[str, tuple[str, Pod | None]] = {}
        self._nominated: dict[str, str] = {}
        self._reported: set[str] = set()
        self._parked: dict[str, _Parked] = {}
        self._shared_bound = False
        self._reservations_stale = True
        self.passes = 0
        self.binds = 0
        self.attempts = 0
        """Pods tried one by one (not as a gang) on some pass."""

    def observe(self, resource: Resource, event: WatchEvent) -> None:
        """Note nominations; schedule a pass when pods, nodes or pod-group objects change."""
        obj = event.object
        if resource == EVENTS:
            self._note_nomination(obj)
            return
        if resource == PODS:
            self._observe_pod(event)
        elif resource == NODES:
            self._parked.clear()
        elif resource != NODE_CLAIMS:
            if resource not in set(self._group_resources()):
                return
            self._parked.clear()
        self.trigger()

    def _observe_pod(self, event: WatchEvent) -> None:
        """Forget a deleted pod; unpark what a pod's change may let fit."""
        obj = event.object
        uid = uid_of(obj)
        bound = bool((obj.get("spec") or {}).get("nodeName"))
        if bound and device_groups(obj):
            self._reservations_stale = True  # a fraction or reservation came, went or changed
        if event.type == WatchEventType.DELETED:
            self._facts.pop(uid, None)
            self._models.pop(uid, None)
            self._current.pop(uid, None)
            self._nominated.pop(uid, None)
            self._reported.discard(uid)
            self._parked.pop(uid, None)
            if bound:
                self._parked.clear()  # its node has room again
        elif bound:
            if is_terminal(obj):
                self._parked.clear()
        elif (parked := self._parked.get(uid)) is not None and not parked.same_pod(obj):
            del self._parked[uid]

    def trigger(self) -> None:
        """Run a pass at the current virtual time (once, however often asked)."""
        self._timeline.after(0, self.run_pass, key=("scheduler",))

    def _note_nomination(self, event: Mapping[str, Any]) -> None:
        involved = event.get("involvedObject") or {}
        message = str(event.get("message") or "")
        if event.get("reason") != "Nominated" or involved.get("kind") != "Pod":
            return
        if not message.startswith(_NOMINATED_PREFIX):
            return
        for part in message.removeprefix(_NOMINATED_PREFIX).split(","):
            kind, _, name = part.strip().partition("/")
            if kind == "nodeclaim" and name and involved.get("uid"):
                self._nominated[str(involved["uid"])] = name

    # -- one pass ----------------------------------------------------------------------------

    def run_pass(self) -> None:
        """Bind every pending pod that fits; mark the others Unschedulable."""
        self.passes += 1
        pods = self._kube.view(PODS)
        if self._reservations_stale:
            self._reservations_stale = False
            if self._reconcile_reservations(pods):
                pods = self._kube.view(PODS)
        classes, default = _priority_classes(self._kube.view(PRIORITY_CLASSES))
        retry_before = self._timeline.now - UNSCHEDULABLE_RETRY_SECONDS
        pending = sorted(
            (
                p
                for p in pods
                if not (p.get("spec") or {}).get("nodeName")
                and not is_terminal(p)
                and not is_deleting(p)
                and not (p.get("spec") or {}).get("schedulingGates")
                and not self._waits(p, retry_before)
            ),
            key=lambda p: (
                -_priority(p, classes, default),
                (p.get("metadata") or {}).get("creationTimestamp") or "",
                pod_key(p),
            ),
        )
        if not pending:
            self._arm_retry()
            return
        state = self._state(pods)
        self._note_priorities(state, pods, classes, default)
        groups: dict[tuple[Ecosystem, str, str], list[JsonObject]] = {}
        refs: dict[str, PodGroupRef] = {}
        for pod in pending:
            ref = self._group_of(pod)
            if ref is not None:
                refs[uid_of(pod)] = ref
                groups.setdefault(ref.group_id, []).append(pod)
        context = self._context(pods) if groups else None
        done: set[tuple[Ecosystem, str, str]] = set()
        for pod in pending:
            ref = refs.get(uid_of(pod))
            if ref is None:
                self._schedule_one(pod, state)
            elif ref.group_id not in done and context is not None:
                done.add(ref.group_id)
                self._schedule_group(ref, groups[ref.group_id], pods, context, state)
        if self._shared_bound:
            self._shared_bound = False
            self._reconcile_reservations(self._kube.view(PODS))
        self._arm_retry()

    def _arm_retry(self) -> None:
        """Make sure a pass runs when the longest-parked pod has waited its time."""
        if self._parked:
            oldest = min(parked.since for parked in self._parked.values())
            self._timeline.schedule(
                oldest + UNSCHEDULABLE_RETRY_SECONDS, self.run_pass, key=_RETRY_KEY
            )

    def _note_priorities(
        self, state: _Pass, pods: Sequence[JsonObject], classes: Mapping[str, int], default: int
    ) -> None:
        """Priorities, and the bound pods preemption may evict (none when all are equal)."""
        state.priorities, state.default_priority = classes, default
        # all priorities are 0 unless a PriorityClass or a pod says otherwise: nothing to preempt
        state.may_preempt = bool(classes) or any(
            (p.get("spec") or {}).get("priority") is not None
            or (p.get("spec") or {}).get("priorityClassName")
            for p in pods
        )
        for pod in pods if state.may_preempt else ():
            node = (pod.get("spec") or {}).get("nodeName")
            if node and not is_terminal(pod) and not is_deleting(pod) and not is_reservation(pod):
                state.bound.setdefault(str(node), []).append(
                    _Bound(_priority(pod, classes, default), self._pod_facts(pod).requests, pod)
                )

    def _waits(self, pod: Mapping[str, Any], retry_before: float) -> bool:
        """Whether the pod is parked, unchanged, and has not waited the retry period yet."""
        parked = self._parked.get(uid_of(pod))
        return parked is not None and parked.since > retry_before and parked.same_pod(pod)

    def _state(self, pods: Sequence[JsonObject]) -> _Pass:
        used: dict[str, dict[str, int]] = {}
        on_node: dict[str, list[JsonObject]] = {}
        for pod in pods:
            node = (pod.get("spec") or {}).get("nodeName")
            if node and not is_terminal(pod):
                used[node] = add(used.get(node, {}), self._pod_facts(pod).requests)
                if is_reservation(pod) or self._pod_facts(pod).fractional:
                    on_node.setdefault(str(node), []).append(pod)
        rooms = []
        for node in self._kube.view(NODES):
            spec = node.get("spec") or {}
            if is_deleting(node) or spec.get("unschedulable") or not condition_true(node, "Ready"):
                continue
            try:
                taints = tuple(
                    parse_taint(t)
                    for t in spec.get("taints") or []
                    if t.get("effect") in _BLOCKING_EFFECTS
                )
            except TaintError:
                continue
            allocatable = _resources((node.get("status") or {}).get("allocatable"))
            name = name_of(node)
            labels = dict((node.get("metadata") or {}).get("labels") or {})
            free = subtract(allocatable, used.get(name, {}))
            rooms.append(
                _NodeRoom(
                    name=name,
                    labels=labels,
                    taints=taints,
                    free=free,
                    devices=self._devices(name, labels, free, on_node.get(name, [])),
                )
            )
        state = _Pass(nodes=rooms, by_name={r.name: r for r in rooms})
        if self._nominated:
            for claim in self._kube.view(NODE_CLAIMS):
                node_name = (claim.get("status") or {}).get("nodeName")
                if node_name:
                    state.claims_to_nodes[name_of(claim)] = str(node_name)
        return state

    def _devices(
        self,
        node: str,
        labels: Mapping[str, str],
        free: Mapping[str, int],
        pods: Sequence[JsonObject],
    ) -> Devices:
        """The node's shared devices: reservation pods name them, fractions fill them."""
        devices = Devices(node, max(free.get(NVIDIA_GPU, 0) // WHOLE_GPU_MILLI, 0))
        for pod in pods:
            if is_reservation(pod):
                for group in device_groups(pod):
                    devices.used.setdefault(group, 0)
        for pod in pods:
            if not is_reservation(pod):
                share = share_of(self._model(pod), labels)
                for group in device_groups(pod):
                    devices.used[group] = devices.used.get(group, 0) + share
        return devices

    def _reconcile_reservations(self, pods: Sequence[JsonObject]) -> bool:
        """Create the reservation pod of each device with fractions; delete those without.

        Returns whether anything changed.
        """
        fractions: set[tuple[str, str]] = set()
        reservations: dict[tuple[str, str], JsonObject] = {}
        for pod in pods:
            node = (pod.get("spec") or {}).get("nodeName")
            if not node or is_terminal(pod) or is_deleting(pod):
                continue
            for group in device_groups(pod):
                if is_reservation(pod):
                    reservations[(str(node), group)] = pod
                else:
                    fractions.add((str(node), group))
        changed = False
        for (node, group), pod in sorted(reservations.items()):
            if (node, group) not in fractions:
                with contextlib.suppress(NotFoundError):
                    self._kube.delete(
                        PODS, name_of(pod), namespace=namespace_of(pod), grace_period_seconds=0
                    )
                changed = True
        taken: dict[str, set[int]] = {}
        for (node, _), pod in reservations.items():
            index = ((pod.get("metadata") or {}).get("annotations") or {}).get(
                RESERVE_FOR_GPU_INDEX, ""
            )
            if index.isdigit():
                taken.setdefault(node, set()).add(int(index))
        for node, group in sorted(fractions - set(reservations)):
            index = next(i for i in itertools.count() if i not in taken.setdefault(node, set()))
            taken[node].add(index)
            with contextlib.suppress(AlreadyExistsError, NotFoundError):
                self._kube.create(
                    PODS, reservation_body(node, group, index), namespace=RESERVATION_NAMESPACE
                )
            changed = True
        return changed

    def _pod_facts(self, pod: Mapping[str, Any]) -> _PodFacts:
        uid = uid_of(pod)
        facts = self._facts.get(uid)
        if facts is None:
            facts = _facts(pod)
            self._facts[uid] = facts
        return facts

    def _model(self, pod: Mapping[str, Any]) -> Pod | None:
        uid = uid_of(pod)
        if uid not in self._models:
            try:
                self._models[uid] = parse_object(Pod, pod, kind="Pod")
            except ApiValidationError:
                self._models[uid] = None
        return self._models[uid]

    def _group_of(self, pod: Mapping[str, Any]) -> PodGroupRef | None:
        model = self._model(pod)
        return detect_group(model) if model is not None else None

    def _context(self, pods: Sequence[JsonObject]) -> ProvisioningContext | None:
        """What ``build_context`` makes of the pods and pod-group objects (None: malformed).

        Each pod version is parsed once (by uid and resourceVersion), not once per pass.
        """
        models = []
        for pod in pods:
            model = self._current_model(pod)
            if model is None:
                return None
            models.append(model)
        objects: list[Mapping[str, Any]] = []
        for resource in [*self._group_resources(), PRIORITY_CLASSES]:
            objects.extend(self._kube.view(resource))
        try:
            context = build_context(objects)
        except ApiValidationError:
            return None
        return dataclasses.replace(context, pods=tuple({m.key: m for m in models}.values()))

    def _current_model(self, pod: Mapping[str, Any]) -> Pod | None:
        uid, version = uid_of(pod), str((pod.get("metadata") or {}).get("resourceVersion"))
        cached = self._current.get(uid)
        if cached is None or cached[0] != version:
            try:
                cached = (version, parse_object(Pod, pod, kind="Pod"))
            except ApiValidationError:
                cached = (version, None)
            self._current[uid] = cached
        return cached[1]

    def _candidates(self, pod: Mapping[str, Any], state: _Pass) -> list[_NodeRoom]:
        nominated = self._nominated.get(uid_of(pod))
        first = state.by_name.get(state.claims_to_nodes.get(nominated or "", ""))
        rest = [room for room in state.nodes if room is not first]
        return [first, *rest] if first is not None else rest

    def _place(self, pod: Mapping[str, Any], state: _Pass) -> _Placement | None:
        facts = self._pod_facts(pod)
        if facts.error is not None:
            return None
        model = self._model(pod) if facts.fractional else None
        for room in self._candidates(pod, state):
            if untolerated(facts.tolerations, room.taints, _BLOCKING_EFFECTS) is not None:
                continue
            if not node_selector_matches(
                facts.node_selector, facts.affinity, room.labels, room.name
            ):
                continue
            if exceeded(facts.requests, room.free):
                continue
            groups: list[str] = []
            if model is not None:
                try:
                    fraction = fraction_on(model, room.labels)
                except FractionError:
                    continue  # asks for more memory than this node's devices have
                if fraction is None:
                    continue
                before = room.devices.whole_free
                taken = room.devices.take(*fraction, seed=uid_of(pod))
                if taken is None:
                    continue
                groups = taken
                fresh = before - room.devices.whole_free
                room.free = subtract(room.free, {NVIDIA_GPU: fresh * WHOLE_GPU_MILLI})
            room.free = subtract(room.free, facts.requests)
            return _Placement(room, tuple(groups))
        return None

    def _why_not(self, pod: Mapping[str, Any], state: _Pass) -> str:
        facts = self._pod_facts(pod)
        total = len(self._kube.view(NODES))
        if facts.error is not None:
            return f"0/{total} nodes are available: {facts.error}"
        taints = selectors = resources = 0
        for room in state.nodes:
            if untolerated(facts.tolerations, room.taints, _BLOCKING_EFFECTS) is not None:
                taints += 1
            elif not node_selector_matches(
                facts.node_selector, facts.affinity, room.labels, room.name
            ):
                selectors += 1
            else:
                resources += 1
        parts = []
        if resources:
            parts.append(f"{resources} Insufficient resources")
        if selectors:
            parts.append(f"{selectors} node(s) didn't match Pod's node affinity/selector")
        if taints:
            parts.append(f"{taints} node(s) had untolerated taint(s)")
        not_ready = total - len(state.nodes)
        if not_ready:
            parts.append(f"{not_ready} node(s) were not ready or not schedulable")
        detail = ", ".join(parts) or "no nodes available to schedule pods"
        return f"0/{total} nodes are available: {detail}."

    def _schedule_one(self, pod: JsonObject, state: _Pass) -> None:
        self.attempts += 1
        placement = self._place(pod, state) or self._preempt(pod, state)
        if placement is None:
            self._unschedulable(pod, self._why_not(pod, state))
            self._parked[uid_of(pod)] = _Parked.of(pod, self._timeline.now)
        else:
            self._bind(pod, placement)
            if not state.may_preempt:
                return
            state.bound.setdefault(placement.room.name, []).append(
                _Bound(
                    _priority(pod, state.priorities, state.default_priority),
                    self._pod_facts(pod).requests,
                    pod,
                )
            )

    def _preempt(self, pod: JsonObject, state: _Pass) -> _Placement | None:
        """Evict the fewest, lowest-priority pods of one node to make room for ``pod``."""
        facts = self._pod_facts(pod)
        spec = pod.get("spec") or {}
        if (
            not state.may_preempt
            or facts.error is not None
            or facts.fractional
            or spec.get("preemptionPolicy") == "Never"
        ):
            return None
        mine = _priority(pod, state.priorities, state.default_priority)
        best: tuple[tuple[int, int, str], _NodeRoom, list[_Bound]] | None = None
        for room in self._candidates(pod, state):
            lower = sorted(
                (b for b in state.bound.get(room.name, []) if b.priority < mine),
                key=lambda b: (b.priority, pod_key(b.pod)),
            )
            if not lower or not self._admits(facts, room):
                continue
            free, chosen = dict(room.free), []
            for victim in lower:
                if not exceeded(facts.requests, free):
                    break
                free = add(free, victim.requests)
                chosen.append(victim)
            if exceeded(facts.requests, free):
                continue
            key = (max(b.priority for b in chosen), len(chosen), room.name)
            if best is None or key < best[0]:
                best = (key, room, chosen)
        if best is None:
            return None
        _, room, chosen = best
        for victim in chosen:
            self._kube.create_event(
                victim.pod,
                reason="Preempted",
                message=f"Preempted by pod {uid_of(pod)} on node {room.name}",
                component=SCHEDULER_NAME,
            )
            with contextlib.suppress(NotFoundError):
                self._kube.delete(
                    PODS,
                    name_of(victim.pod),
                    namespace=namespace_of(victim.pod),
                    grace_period_seconds=0,
                )
            room.free = add(room.free, victim.requests)
            state.bound[room.name].remove(victim)
        room.free = subtract(room.free, facts.requests)
        return _Placement(room)

    def _admits(self, facts: _PodFacts, room: _NodeRoom) -> bool:
        """Taints and node selection allow the pod on the node (resources aside)."""
        return untolerated(
            facts.tolerations, room.taints, _BLOCKING_EFFECTS
        ) is None and node_selector_matches(
            facts.node_selector, facts.affinity, room.labels, room.name
        )

    def _schedule_group(
        self,
        ref: PodGroupRef,
        pending: list[JsonObject],
        pods: Sequence[JsonObject],
        context: ProvisioningContext,
        state: _Pass,
    ) -> None:
        info = group_info(ref, context)
        minimum = info.min_count or 1
        blocked = self._queue_reason(ref, pending, context)
        if blocked is not None:
            for pod in pending:
                self._unschedulable(pod, blocked)
            return
        if minimum <= 1:
            for pod in pending:
                self._schedule_one(pod, state)
            return
        bound = sum(
            1
            for p in pods
            if (p.get("spec") or {}).get("nodeName")
            and not is_terminal(p)
            and pod_key(p) in set(info.members)
        )
        saved = {room.name: (dict(room.free), room.devices.copy()) for room in state.nodes}
        placed = [(pod, where) for pod in pending if (where := self._place(pod, state))]
        if bound + len(placed) < minimum:
            for room in state.nodes:
                room.free, room.devices = saved[room.name]
            message = (
                f"pod group {ref.key}: {bound + len(placed)} of the {minimum} members it needs "
                "can be placed; waiting for the whole gang"
            )
            for pod in pending:
                self._unschedulable(pod, message)
            return
        for pod, placement in placed:
            self._bind(pod, placement)
        placed_keys = {pod_key(p) for p, _ in placed}
        for pod in pending:
            if pod_key(pod) not in placed_keys:
                self._unschedulable(pod, self._why_not(pod, state))

    def _queue_reason(
        self, ref: PodGroupRef, pending: Sequence[JsonObject], context: ProvisioningContext
    ) -> str | None:
        if ref.ecosystem != Ecosystem.KAI:
            return None
        group = context.kai_pod_groups.get(ref.key)
        if group is not None:
            reason = kai.condition_reason(ref.key, group)
            if reason is not None:
                return reason
        first = self._model(pending[0])
        if first is None:
            return None
        gpus = 0
        for pod in pending:
            model = self._model(pod)
            if model is None:
                continue
            try:
                gpus += requests_of(model).get(NVIDIA_GPU, 0)
            except ResourceListError:
                continue  # the pod's own filter reports it
        non_preemptible = (
            kai.non_preemptible_reason(first, ref.key, group, context.priority_classes) is not None
        )
        return kai.queue_reason(
            group_key=ref.key,
            queue=kai.queue_name(group, first),
            queues=context.kai_queues,
            requested_gpu_milli=gpus,
            non_preemptible=non_preemptible,
        )

    # -- writes ------------------------------------------------------------------------------

    def _bind(self, pod: JsonObject, placement: _Placement) -> None:
        namespace, name, node = namespace_of(pod), name_of(pod), placement.room.name
        try:
            if placement.groups:
                # KAI labels a fraction with its device before binding it
                self._kube.merge_patch(
                    PODS,
                    name,
                    {
                        "metadata": {
                            "labels": group_labels(placement.groups),
                            "annotations": {RECEIVED_RESOURCE_TYPE: "Fraction"},
                        }
                    },
                    namespace=namespace,
                )
            bound = self._kube.bind(namespace, name, node)
        except (NotFoundError, ConflictError):
            return
        self._shared_bound = self._shared_bound or bool(placement.groups)
        self.binds += 1
        self._kube.create_event(
            bound,
            reason="Scheduled",
            message=f"Successfully assigned {namespace}/{name} to {node}",
            component=SCHEDULER_NAME,
        )

    def _unschedulable(self, pod: JsonObject, message: str) -> None:
        current = condition(pod, "PodScheduled")
        if (
            current is not None
            and current.get("status") == "False"
            and current.get("reason") == "Unschedulable"
            and current.get("message") == message
        ):
            return
        now = self._timeline.clock.now()
        conditions = set_condition(
            (pod.get("status") or {}).get("conditions"),
            "PodScheduled",
            "False",
            now=now,
            reason="Unschedulable",
            message=message,
        )
        try:
            updated = self._kube.patch_status(
                PODS,
                name_of(pod),
                {"status": {"phase": "Pending", "conditions": conditions}},
                namespace=namespace_of(pod),
            )
        except NotFoundError:
            return
        if uid_of(updated) in self._reported:
            return
        self._reported.add(uid_of(updated))
        self._kube.create_event(
            updated,
            reason="FailedScheduling",
            message=message,
            type="Warning",
            component=SCHEDULER_NAME,
        )
