"""llmaz inference flavors: which flavor each model pod is planned on, chosen per batch.

A pod labelled ``llmaz.io/model-name`` serves an OpenModel whose ``inferenceConfig.flavors``
list accelerator choices in preference order; ``llmaz.io/inference-service-flavors`` on the pod
selects and orders a subset. Like InftyAI's Karpenter fork (which orders one node-affinity term
per flavor and lets the scheduler relax them front to back), each pending pod is planned on its
FIRST flavor that can take it now:

1. an offering of a ready NodePool that is available (not marked insufficient-capacity) and
   fits the pod with the flavor's node selector and limits, or
2. room on an existing node or in-flight NodeClaim of that flavor (room is counted down as
   pods of the batch claim it).

So an outage (the ICE cache) moves new pods to the next flavor, and when it ends they go back
to the first. The pod is rewritten for this batch only: the flavor's ``nodeSelector`` ANDed into
every required node-affinity term, its ``limits`` set on the serving container. A flavor name
the model does not have gets the pod a ``FailedScheduling`` warning and no plan.

Disruption (:func:`choose_flavors` with ``displaced``) lets a pod it moves use its current
flavor or a better one, never a later one, unless the NodePool of its node is annotated
``jointer.dev/flavor-downgrade: allowed``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from provisioner.apis import labels as wk
from provisioner.apis.base import parse_object
from provisioner.apis.core import (
    Affinity,
    Container,
    NodeAffinity,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
    ResourceRequirements,
)
from provisioner.apis.errors import ApiValidationError
from provisioner.apis.openmodel import OPENMODEL_API_GROUP, OPENMODEL_KIND, Flavor, OpenModel
from provisioner.controllers.provisioning.builder import existing_room
from provisioner.controllers.provisioning.cluster import ClusterView
from provisioner.controllers.provisioning.offerings import (
    SCHEDULING_EFFECTS,
    DaemonOverhead,
    Option,
    enumerate_options,
)
from provisioner.controllers.provisioning.plan import Plan, UnschedulablePod
from provisioner.controllers.provisioning.podfacts import (
    PodError,
    RequestsCache,
    Signature,
    pod_facts,
)
from provisioner.scheduling.taints import untolerated

__all__ = [
    "SERVING_CONTAINER",
    "Displaced",
    "FlavorChoice",
    "choose_flavors",
    "flavor_index",
    "openmodels",
    "with_flavor_rejections",
    "with_flavors",
]

SERVING_CONTAINER: Final = "model-runner"
"""llmaz's serving container; flavor limits go there (else on the first container)."""

Models = Mapping[str, OpenModel | str]
"""OpenModels by name; a string is why the object named so does not validate."""


def openmodels(objects: Iterable[Mapping[str, Any]]) -> dict[str, OpenModel | str]:
    """The OpenModels among raw objects, by name (an unreadable one maps to its error)."""
    models: dict[str, OpenModel | str] = {}
    for obj in objects:
        api_version = str(obj.get("apiVersion") or "")
        if (
            obj.get("kind") != OPENMODEL_KIND
            or api_version.split("/", maxsplit=1)[0] != OPENMODEL_API_GROUP
        ):
            continue
        try:
            model = parse_object(OpenModel, obj, kind=OPENMODEL_KIND)
        except ApiValidationError as error:
            metadata = obj.get("metadata")
            name = metadata.get("name") if isinstance(metadata, Mapping) else None
            models[str(name or "")] = str(error)
            continue
        models[model.metadata.name] = model
    return models


@dataclass(frozen=True, slots=True)
class Displaced:
    """A model pod disruption moves.

    Attributes:
        labels: the labels of the node it leaves (its current flavor).
        downgrade: its NodePool allows a later flavor (``jointer.dev/flavor-downgrade``).
    """

    labels: Mapping[str, str]
    downgrade: bool = False


@dataclass(frozen=True, slots=True)
class FlavorChoice:
    """The batch's view with model pods rewritten to their flavors.

    Attributes:
        view: the view to plan (rejected pods left out).
        chosen: pod key to the flavor names it is planned on (one, or several for a pod
            disruption moves, or when no flavor can take it now).
        rejected: pods that are not planned, with why (unknown flavor, unreadable model).
    """

    view: ClusterView
    chosen: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    rejected: tuple[UnschedulablePod, ...] = ()


def _selected(pod: Pod, model: OpenModel) -> tuple[Flavor, ...] | str:
    """The pod's flavors in order, or why they cannot be read."""
    wanted = pod.metadata.annotations.get(wk.ANNOTATION_LLMAZ_FLAVORS)
    if wanted is None or not wanted.strip():
        return model.flavors
    by_name = {f.name: f for f in model.flavors}
    chosen: list[Flavor] = []
    for raw in wanted.split(","):
        name = raw.strip()
        if not name:
            continue
        flavor = by_name.get(name)
        if flavor is None:
            known = ", ".join(by_name) or "none"
            return (
                f'flavor "{name}" of annotation {wk.ANNOTATION_LLMAZ_FLAVORS} is not a flavor '
                f'of OpenModel "{model.metadata.name}" (flavors: {known})'
            )
        if flavor not in chosen:
            chosen.append(flavor)
    return tuple(chosen)


def flavor_index(flavors: Sequence[Flavor], labels: Mapping[str, str]) -> int | None:
    """The position of the first flavor whose node selector ``labels`` satisfy."""
    return next(
        (
            i
            for i, f in enumerate(flavors)
            if all(labels.get(k) == v for k, v in f.node_selector.items())
        ),
        None,
    )


def with_flavors(pod: Pod, flavors: Sequence[Flavor]) -> Pod:
    """``pod`` restricted to ``flavors`` (ORed, in order), with the first one's limits.

    Each required node-affinity term (or an empty one) is copied once per flavor with that
    flavor's ``nodeSelector`` ANDed in as ``In`` expressions, terms ordered by flavor (the
    fork's rewrite). The flavor's limits become the serving container's requests and limits.
    """
    spec = pod.spec
    affinity = spec.affinity or Affinity()
    node_affinity = affinity.node_affinity or NodeAffinity()
    required = node_affinity.required_during_scheduling_ignored_during_execution
    terms = required.node_selector_terms if required is not None else ()
    base = terms or (NodeSelectorTerm(),)
    expanded = tuple(
        term.model_copy(
            update={
                "match_expressions": (
                    *term.match_expressions,
                    *(
                        NodeSelectorRequirement(key=k, operator="In", values=(v,))
                        for k, v in sorted(flavor.node_selector.items())
                    ),
                )
            }
        )
        for flavor in flavors
        for term in base
    )
    node_affinity = node_affinity.model_copy(
        update={
            "required_during_scheduling_ignored_during_execution": NodeSelector(
                node_selector_terms=expanded
            )
        }
    )
    update: dict[str, Any] = {
        "affinity": affinity.model_copy(update={"node_affinity": node_affinity})
    }
    limits = flavors[0].limits if flavors else {}
    if limits and spec.containers:
        update["containers"] = _with_limits(spec.containers, limits)
    return pod.model_copy(update={"spec": spec.model_copy(update=update)})


def _with_limits(
    containers: tuple[Container, ...], limits: Mapping[str, int | str]
) -> tuple[Container, ...]:
    index = next((i for i, c in enumerate(containers) if c.name == SERVING_CONTAINER), 0)
    container = containers[index]
    resources = container.resources
    replaced = ResourceRequirements(
        requests={**resources.requests, **limits}, limits={**resources.limits, **limits}
    )
    return (
        *containers[:index],
        container.model_copy(update={"resources": replaced}),
        *containers[index + 1 :],
    )


def _fits(requests: Mapping[str, int], room: Mapping[str, int]) -> bool:
    return all(amount <= room.get(name, 0) for name, amount in requests.items() if amount > 0)


def _tolerated(signature: Signature, taints: Sequence[Any]) -> bool:
    return untolerated(signature.tolerations, taints, SCHEDULING_EFFECTS) is None


class _Capacity:
    """What a flavor may take now: available offerings, and room counted down per pod."""

    def __init__(self, view: ClusterView) -> None:
        memo = view.options_memo
        if memo is not None:  # a disruption pass: the offerings its simulations share
            daemons, options = memo.get(view.pools, view.daemonsets, view.region)
        else:
            daemons = DaemonOverhead.from_daemonsets(view.daemonsets)
            options = enumerate_options(view.pools, daemons, view.region)
        self.options: list[Option] = options
        self.rooms = existing_room(view, daemons)
        self._signatures: dict[str, Signature] = {}
        self._requests: RequestsCache = {}
        self._offered: dict[tuple[int, tuple[tuple[str, int], ...]], bool] = {}

    def take(self, pod: Pod) -> bool:
        """Whether ``pod`` (rewritten to one flavor) fits an offering, or room (then taken)."""
        facts = pod_facts(pod, cache=self._signatures, requests_cache=self._requests)
        alternatives = facts.signature.alternatives
        # signatures are shared per scheduling fields: pods of one workload ask once
        key = (id(facts.signature), tuple(sorted(facts.requests.items())))
        offered = self._offered.get(key)
        if offered is None:
            offered = any(
                _fits(facts.requests, option.capacity)
                and _tolerated(facts.signature, option.pool.taints)
                and any(a.matches(option.labels) for a in alternatives)
                for option in self.options
            )
            self._offered[key] = offered
        if offered:
            return True
        for room in self.rooms:
            if (
                _fits(facts.requests, room.remaining)
                and _tolerated(facts.signature, room.taints)
                and any(a.matches(room.labels) for a in alternatives)
            ):
                remaining = dict(room.remaining)
                for name, amount in facts.requests.items():
                    remaining[name] = remaining.get(name, 0) - amount
                index = self.rooms.index(room)
                self.rooms[index] = dataclasses.replace(room, remaining=remaining)
                return True
        return False


def _pending_model_pods(view: ClusterView, models: Models) -> list[Pod]:
    """The view's pending llmaz model pods, in key order (none to rewrite without models)."""
    if not models:  # no OpenModel: every model pod is planned as it is
        return []
    model_pods = [p for p in view.pods if p.metadata.labels.get(wk.LABEL_LLMAZ_MODEL_NAME)]
    if not model_pods:  # most views: no model pod at all, pending or not
        return []
    pending = dataclasses.replace(view, pods=tuple(model_pods)).pending_pods()
    return sorted(pending, key=lambda p: p.key)


def choose_flavors(
    view: ClusterView, models: Models, *, displaced: Mapping[str, Displaced] | None = None
) -> FlavorChoice:
    """Rewrite the view's pending model pods to the flavor each is planned on this batch.

    Pods are taken in key order. A pod whose model is not known, has no flavors, or has a
    selected flavor without a ``nodeSelector`` (the fork then leaves it alone) is planned as
    it is. When no flavor can take a pod now it may use any of them (the planner says why
    none fits). A pod in ``displaced`` may use its current flavor or an earlier one (any, when
    its NodePool allows a downgrade).

    Raises:
        PodError: for a model pod whose spec cannot be read.
    """
    displaced = displaced or {}
    pending = _pending_model_pods(view, models)
    if not pending:
        return FlavorChoice(view)
    capacity: _Capacity | None = None
    replaced: dict[str, Pod] = {}
    chosen: dict[str, tuple[str, ...]] = {}
    rejected: list[UnschedulablePod] = []
    for pod in pending:
        name = pod.metadata.labels[wk.LABEL_LLMAZ_MODEL_NAME]
        model = models.get(name)
        if isinstance(model, str):
            rejected.append(UnschedulablePod(pod.key, f"OpenModel {name!r} is invalid: {model}"))
            continue
        if model is None:
            continue
        flavors = _selected(pod, model)
        if isinstance(flavors, str):
            rejected.append(UnschedulablePod(pod.key, flavors))
            continue
        if not flavors or any(not f.node_selector for f in flavors):
            continue
        moved = displaced.get(pod.key)
        if moved is not None:
            current = None if moved.downgrade else flavor_index(flavors, moved.labels)
            allowed = flavors if current is None else flavors[: current + 1]
        else:
            capacity = capacity or _Capacity(view)
            allowed = flavors
            for flavor in flavors:
                try:
                    usable = capacity.take(with_flavors(pod, (flavor,)))
                except PodError:
                    break  # the planner reports the pod's own error
                if usable:
                    allowed = (flavor,)
                    break
        replaced[pod.key] = with_flavors(pod, allowed)
        chosen[pod.key] = tuple(f.name for f in allowed)
    if not replaced and not rejected:
        return FlavorChoice(view)
    dropped = {r.pod for r in rejected}
    pods = tuple(replaced.get(p.key, p) for p in view.pods if p.key not in dropped)
    return FlavorChoice(dataclasses.replace(view, pods=pods), chosen, tuple(rejected))


def with_flavor_rejections(result: Plan, choice: FlavorChoice) -> Plan:
    """``result`` with the pods the flavor step rejected among its unschedulable pods."""
    if not choice.rejected:
        return result
    unschedulable = sorted((*result.unschedulable, *choice.rejected), key=lambda u: u.pod)
    return dataclasses.replace(result, unschedulable=tuple(unschedulable))
