"""The pods of a planning view, indexed once: bound ones by node, pending ones in order.

:func:`view_pods` reads a snapshot's pods the way the planner sees them (a nominated pod bound
to the state node of its NodeClaim) and sorts them into the index every planning step reads
(:class:`PodIndex`). A disruption pass builds one view per rescheduling simulation, each the
pass's snapshot with a few pods changed (the displaced ones pending, some gone, nominations to
removed NodeClaims dropped): :func:`derive_view_pods` builds such a view from the pass's own,
looking only at the pods that changed (the rest is list and dict copies), with exactly the
result :func:`view_pods` gives, so a simulation no longer walks every pod of the cluster
three times.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from provisioner.apis.core import TERMINAL_PHASES, Pod

__all__ = [
    "Places",
    "PodIndex",
    "ViewPods",
    "derive_view_pods",
    "index_pods",
    "view_pods",
    "with_extras",
]

Rewrite = Callable[[Pod], Pod]
"""What a view does to every pod it takes (drop preferences; the identity otherwise)."""


@dataclass(frozen=True, slots=True)
class PodIndex:
    """Where the non-terminal pods of ``pods`` are.

    Attributes:
        pods: the pod sequence indexed (a view trusts the index only for this very object).
        bound: pods bound to a node (or nominated to a NodeClaim), by node, in order.
        pending: pods not bound and not being deleted, in order.
    """

    pods: Sequence[Pod]
    bound: Mapping[str, Sequence[Pod]]
    pending: Sequence[Pod]


def _place(pod: Pod) -> str | None:
    """The node a non-terminal pod counts on, "" when pending, None when it counts nowhere."""
    status = pod.status
    if status is not None and status.phase in TERMINAL_PHASES:
        return None
    node = pod.spec.node_name
    if node:
        return node
    return "" if pod.metadata.deletion_timestamp is None else None


def index_pods(pods: Sequence[Pod]) -> PodIndex:
    """Index ``pods`` (one walk)."""
    bound: dict[str, list[Pod]] = {}
    pending: list[Pod] = []
    for pod in pods:
        node = _place(pod)
        if node:
            bound.setdefault(node, []).append(pod)
        elif node is not None:
            pending.append(pod)
    return PodIndex(pods, bound, pending)


def with_extras(index: PodIndex, pods: Sequence[Pod], extras: Sequence[Pod]) -> PodIndex:
    """The index of ``pods``: the pods ``index`` indexes, then ``extras``."""
    if not extras:
        return index
    bound = dict(index.bound)
    pending = list(index.pending)
    for pod in extras:
        node = _place(pod)
        if node:
            bound[node] = [*bound.get(node, ()), pod]
        elif node is not None:
            pending.append(pod)
    return PodIndex(pods, bound, pending)


@dataclass(frozen=True, slots=True)
class ViewPods:
    """A snapshot's pods as a view has them, with what deriving another view needs.

    Attributes:
        source: the snapshot's pods (by key) these were read from, in their order.
        target: the state node each nominated pod counts on, by pod key.
        pods: the view's pods, in the same order.
        index: where they are (:class:`PodIndex` of ``pods``).
    """

    source: Mapping[str, Pod]
    target: Mapping[str, str]
    pods: tuple[Pod, ...]
    index: PodIndex

    def places(self) -> Places:
        """Where each of :attr:`pods` is (for :func:`derive_view_pods`)."""
        return Places(
            {key: i for i, key in enumerate(self.source)},
            {id(pod): i for i, pod in enumerate(self.pods)},
        )


@dataclass(frozen=True, slots=True)
class Places:
    """The place of each pod of a :class:`ViewPods` in its order, by key and by object."""

    by_key: Mapping[str, int]
    by_object: Mapping[int, int]


def _as_viewed(pod: Pod, key: str, target: Mapping[str, str], rewrite: Rewrite | None) -> Pod:
    if rewrite is not None:
        pod = rewrite(pod)
    node = target.get(key)
    if node is not None and not pod.spec.node_name:
        return pod.model_copy(update={"spec": pod.spec.model_copy(update={"node_name": node})})
    return pod


def view_pods(
    source: Mapping[str, Pod], target: Mapping[str, str], rewrite: Rewrite | None = None
) -> ViewPods:
    """The view of ``source``: nominated pods (``target``) bound to their state node."""
    pods = tuple(_as_viewed(pod, key, target, rewrite) for key, pod in source.items())
    return ViewPods(source, dict(target), pods, index_pods(pods))


def derive_view_pods(
    base: ViewPods,
    places: Places,
    source: Mapping[str, Pod],
    target: Mapping[str, str],
    touched: Collection[str] | None = None,
) -> ViewPods | None:
    """``view_pods(source, target)`` built from ``base`` (None when it cannot be).

    ``source`` must hold only keys of ``base.source``, in the same relative order (a
    simulation's pods: the snapshot's, some replaced, some left out); ``places`` is
    ``base.places()``. Only the pods whose object or nomination differs are looked at.
    ``touched``, when the caller knows it, holds every key whose pod was replaced or left
    out (others may be in it too); without it every pod is compared with the base's.
    """
    changes = _changes(base, source, target, touched)
    if changes is None:
        return None
    changed, gone = changes
    pods = list(base.pods)
    bound = dict(base.index.bound)
    dropped: set[int] = set()  # ids of the base's pods taken out of the index
    leaving: dict[str, set[int]] = {}  # the same, by the node they were bound to
    added: dict[int, int] = {}  # id of a new pod: its place
    for key in changed:
        at = places.by_key[key]
        previous = pods[at]
        dropped.add(id(previous))
        node = _place(previous)
        if node:
            leaving.setdefault(node, set()).add(id(previous))
        if key in source:
            pods[at] = _as_viewed(source[key], key, target, None)
            added[id(pods[at])] = at
    _take_out(bound, leaving)

    def place(pod: Pod) -> int:
        at = added.get(id(pod))
        return places.by_object[id(pod)] if at is None else at

    pending = [p for p in base.index.pending if id(p) not in dropped]
    fresh_pending = False
    for at in added.values():
        pod = pods[at]
        node = _place(pod)
        if node:
            bound[node] = sorted([*bound.get(node, ()), pod], key=place)
        elif node is not None:
            pending.append(pod)
            fresh_pending = True
    if fresh_pending:
        pending.sort(key=place)
    for at in sorted((places.by_key[key] for key in gone), reverse=True):
        del pods[at]
    viewed = tuple(pods)
    return ViewPods(source, dict(target), viewed, PodIndex(viewed, bound, pending))


def _take_out(bound: dict[str, Sequence[Pod]], leaving: Mapping[str, set[int]]) -> None:
    """Take the pods ``leaving`` names (by id, per node) out of ``bound``'s lists."""
    for node, ids in leaving.items():
        kept = [p for p in bound[node] if id(p) not in ids]
        if kept:
            bound[node] = kept
        else:
            del bound[node]


def _changes(
    base: ViewPods,
    source: Mapping[str, Pod],
    target: Mapping[str, str],
    touched: Collection[str] | None,
) -> tuple[set[str], list[str]] | None:
    """The keys whose pod or nomination differs from ``base`` (the gone ones too), and the gone.

    None when ``source`` has a pod ``base`` does not.
    """
    old = base.source
    if touched is None:
        changed = {key for key, pod in source.items() if old.get(key) is not pod}
        if any(key not in old for key in changed):
            return None
        gone = [key for key in old if key not in source] if len(source) < len(old) else []
    else:
        changed = {key for key in touched if key in old or key in source}
        if any(key not in old for key in changed):
            return None
        gone = [key for key in changed if key not in source]
        if len(source) != len(old) - len(gone):
            return None  # ``touched`` missed a pod that came or went
    changed.update(gone)
    changed.update(
        key
        for key in {*target, *base.target}
        if key in source and target.get(key) != base.target.get(key)
    )
    return changed, gone
