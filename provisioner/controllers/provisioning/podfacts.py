"""What the planner needs to know about one pod, read once from its spec.

Pods of one workload share their scheduling signature (node selector, affinity, tolerations,
spreads), so the expensive parts — parsing affinity into requirements, matching them against
offerings — are done per signature and cached, not per pod.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Final

from provisioner.apis import labels as wk
from provisioner.apis.core import (
    Container,
    LabelSelector,
    Pod,
    PodAffinityTerm,
    TopologySpreadConstraint,
)
from provisioner.scheduling.affinity import AffinityError, NodeAffinity
from provisioner.scheduling.quantity import QuantityError
from provisioner.scheduling.requirements import Requirement, RequirementError, Requirements
from provisioner.scheduling.resources import requests_of, with_pod_slot
from provisioner.scheduling.taints import TaintError, Toleration

__all__ = [
    "PodError",
    "PodFacts",
    "RequestsCache",
    "SelectorKey",
    "Signature",
    "pod_facts",
    "selector_key",
    "selector_matches",
]

DO_NOT_SCHEDULE: Final = "DoNotSchedule"
TOPOLOGY_KEYS: Final = frozenset({wk.LABEL_ZONE, wk.LABEL_HOSTNAME})


class PodError(ValueError):
    """A pod whose spec cannot be planned for; the message names the pod and the field."""


SelectorKey = tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str, tuple[str, ...]], ...]]
"""A hashable, canonical form of a label selector."""


def selector_key(selector: LabelSelector | None) -> SelectorKey:
    """Canonical form of ``selector`` (None selects nothing, as in Kubernetes)."""
    if selector is None:
        return ((("\0", "\0"),), ())
    return (
        tuple(sorted(selector.match_labels.items())),
        tuple(
            sorted((e.key, e.operator, tuple(sorted(e.values))) for e in selector.match_expressions)
        ),
    )


def selector_matches(key: SelectorKey, labels: Mapping[str, str]) -> bool:
    """Whether ``labels`` satisfy the canonical selector ``key``."""
    match_labels, expressions = key
    if any(labels.get(k) != v for k, v in match_labels):
        return False
    for label, operator, values in expressions:
        present = label in labels
        if operator == "In" and not (present and labels[label] in values):
            return False
        if operator == "NotIn" and present and labels[label] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


@dataclass(frozen=True, slots=True)
class SpreadTerm:
    """A ``DoNotSchedule`` topology spread on zone or hostname."""

    topology_key: str
    max_skew: int
    selector: SelectorKey
    min_domains: int | None


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """A required pod (anti-)affinity term on zone or hostname."""

    topology_key: str
    selector: SelectorKey
    namespaces: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Signature:
    """Everything about a pod that decides *where* it may run (not how much it needs).

    Attributes:
        alternatives: required node requirements, one per required node affinity term
            (ORed), each already ANDed with the node selector; one empty set when the pod has
            no node constraints.
        preferred: preferred node affinity terms, heaviest first.
        tolerations: the pod's tolerations.
        uses_hostname: whether a required alternative names ``kubernetes.io/hostname`` (derived
            from ``alternatives``, so it takes no part in equality; read once per signature).
    """

    alternatives: tuple[Requirements, ...]
    preferred: tuple[Requirements, ...]
    tolerations: tuple[Toleration, ...]
    uses_hostname: bool = field(compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class PodFacts:
    """One pending pod as the planner sees it."""

    pod: Pod
    key: str
    namespace: str
    labels: Mapping[str, str]
    requests: Mapping[str, int]
    signature: Signature
    spreads: tuple[SpreadTerm, ...]
    affinities: tuple[AffinityTerm, ...]
    anti_affinities: tuple[AffinityTerm, ...]
    claims: tuple[str, ...]
    uses_hostname: bool
    label_key: tuple[tuple[str, str], ...] = ()


RequestsCache = dict[tuple[object, ...], Mapping[str, int]]
"""Effective pod requests already computed, keyed by the containers' resources."""


def pod_facts(
    pod: Pod,
    *,
    cache: dict[str, Signature] | None = None,
    requests_cache: RequestsCache | None = None,
) -> PodFacts:
    """Read ``pod`` into :class:`PodFacts`.

    Args:
        pod: the pod.
        cache: signatures already built, keyed by the JSON of the scheduling fields; pass the
            same dict for every pod of one planning step.
        requests_cache: effective requests already computed, keyed by the resources of the
            pod's containers and its overhead; pass the same dict for every pod of one
            planning step (the cached mappings are shared: never mutate them).

    Raises:
        PodError: naming the pod and field for malformed requests, affinity or tolerations.
    """
    namespace = pod.metadata.namespace or "default"
    key = f"{namespace}/{pod.metadata.name}"
    requests = _requests(pod, key, requests_cache if requests_cache is not None else {})
    signatures = cache if cache is not None else {}
    signature_key = _signature_key(pod)
    signature = signatures.get(signature_key)
    if signature is None:
        signature = _signature(pod, key)
        signatures[signature_key] = signature
    return PodFacts(
        pod=pod,
        key=key,
        namespace=namespace,
        labels=pod.metadata.labels,
        label_key=tuple(sorted(pod.metadata.labels.items())),
        requests=requests,
        signature=signature,
        spreads=_spreads(pod.spec.topology_spread_constraints),
        affinities=_affinity_terms(pod, anti=False),
        anti_affinities=_affinity_terms(pod, anti=True),
        claims=tuple(
            v.persistent_volume_claim.claim_name
            for v in pod.spec.volumes
            if v.persistent_volume_claim is not None
        ),
        uses_hostname=signature.uses_hostname,
    )


def _requests(pod: Pod, key: str, cache: RequestsCache) -> Mapping[str, int]:
    """The pod's effective requests plus its pod slot, computed once per distinct resources."""
    spec = pod.spec
    resources_key = (
        tuple(_container_key(c) for c in spec.containers),
        tuple(_container_key(c) for c in spec.init_containers),
        tuple(spec.overhead.items()),
    )
    requests = cache.get(resources_key)
    if requests is None:
        try:
            requests = with_pod_slot(requests_of(pod))
        except QuantityError as error:
            raise PodError(f"Pod {key}: spec.{error}") from error
        cache[resources_key] = requests
    return requests


def _container_key(container: Container) -> tuple[object, ...]:
    resources = container.resources
    return (
        tuple(resources.requests.items()),
        tuple(resources.limits.items()),
        container.restart_policy,
    )


def _signature_key(pod: Pod) -> str:
    spec = pod.spec
    parts = [
        repr(sorted(spec.node_selector.items())),
        spec.affinity.node_affinity.model_dump_json()
        if spec.affinity and spec.affinity.node_affinity
        else "",
        repr([(t.key, t.operator, t.value, t.effect) for t in spec.tolerations]),
    ]
    return "\x1f".join(parts)


def _normalise(requirements: Requirements) -> Requirements:
    if not any(key in wk.NORMALIZED_LABELS for key in requirements):
        return requirements
    return Requirements(
        _rekey(requirement, wk.NORMALIZED_LABELS.get(key, key))
        for key, requirement in requirements.items()
    )


def _rekey(requirement: Requirement, key: str) -> Requirement:
    return replace(requirement, key=key)


def _signature(pod: Pod, key: str) -> Signature:
    spec = pod.spec
    try:
        selector = _normalise(Requirements.from_node_selector(spec.node_selector))
    except RequirementError as error:
        raise PodError(f"Pod {key}: spec.nodeSelector: {error}") from error
    node_affinity_data = (
        spec.affinity.node_affinity.model_dump(by_alias=True, exclude_none=True)
        if spec.affinity and spec.affinity.node_affinity
        else None
    )
    try:
        affinity = NodeAffinity.from_dict(node_affinity_data)
        alternatives: tuple[Requirements, ...]
        if affinity.required is None:
            alternatives = (selector,)
        else:
            alternatives = tuple(
                selector.union(_normalise(term.to_requirements(ignore_match_fields=True)))
                for term in affinity.required
            )
        preferred = tuple(_normalise(term.requirements) for term in affinity.preferred)
    except (AffinityError, RequirementError) as error:
        raise PodError(f"Pod {key}: {error}") from error
    try:
        tolerations = tuple(
            Toleration.from_dict(
                t.model_dump(by_alias=True, exclude_none=True), field=f"spec.tolerations[{i}]"
            )
            for i, t in enumerate(spec.tolerations)
        )
    except TaintError as error:
        raise PodError(f"Pod {key}: {error}") from error
    return Signature(alternatives, preferred, tolerations, _uses_hostname(alternatives))


def _uses_hostname(alternatives: tuple[Requirements, ...]) -> bool:
    return any(wk.LABEL_HOSTNAME in alternative for alternative in alternatives)


def _spreads(constraints: tuple[TopologySpreadConstraint, ...]) -> tuple[SpreadTerm, ...]:
    return tuple(
        SpreadTerm(c.topology_key, c.max_skew, selector_key(c.label_selector), c.min_domains)
        for c in constraints
        if c.when_unsatisfiable == DO_NOT_SCHEDULE and c.topology_key in TOPOLOGY_KEYS
    )


def _affinity_terms(pod: Pod, *, anti: bool) -> tuple[AffinityTerm, ...]:
    affinity = pod.spec.affinity
    if affinity is None:
        return ()
    source = affinity.pod_anti_affinity if anti else affinity.pod_affinity
    if source is None:
        return ()
    namespace = pod.metadata.namespace or "default"
    return tuple(
        _affinity_term(term, namespace)
        for term in source.required_during_scheduling_ignored_during_execution
        if term.topology_key in TOPOLOGY_KEYS
    )


def _affinity_term(term: PodAffinityTerm, namespace: str) -> AffinityTerm:
    return AffinityTerm(
        term.topology_key, selector_key(term.label_selector), term.namespaces or (namespace,)
    )
