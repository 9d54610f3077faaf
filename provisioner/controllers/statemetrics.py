"""Karpenter's state metrics controllers: node, pod and offering gauges, refreshed periodically.

* ``metrics.node`` (every 5 s): for each registered state node (managed or not)
  ``karpenter_nodes_allocatable``, ``_total_pod_requests``, ``_total_pod_limits``,
  ``_total_daemon_requests``, ``_total_daemon_limits``, ``_system_overhead`` (per
  ``resource_type``) and ``_current_lifetime_seconds``, plus
  ``karpenter_cluster_utilization_percent``.
* ``metrics.pod`` (every 5 s, only when the cache changed): ``karpenter_pods_state`` = 1 for
  every pod, labelled with its node's well-known labels.
* :class:`OfferingGauges`: ``karpenter_cloudprovider_instance_type_offering_available`` /
  ``_price_estimate``, observed by the provisioner from the instance types it resolves.

Values are Karpenter's: CPU in cores, every other resource in whole units (rounded up);
``resource_type`` is the resource name lower-cased with ``-`` as ``_``. Series of objects that are
gone are removed (Karpenter's ``metrics.Store``).

The refresh is incremental with the same output: a pod's requests are computed once per pod
object and a node's series once per (Node, pods) state; only series whose value changed are
written.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from prometheus_client import Gauge

from cloudprovider.instancetype import InstanceType
from provisioner.apis import labels as wk
from provisioner.apis.core import Node, Pod
from provisioner.controllers.metrics import NODE_LABELS, Metrics
from provisioner.runtime.clock import Clock
from provisioner.runtime.reconciler import Request, Result
from provisioner.scheduling.resources import (
    ResourceListError,
    add,
    limits_of,
    parse_resource_list,
    requests_of,
    subtract,
)
from provisioner.state.cluster import ClusterState
from provisioner.state.statenode import StateNode

__all__ = [
    "NODE_METRICS_INTERVAL",
    "POD_METRICS_INTERVAL",
    "GaugeStore",
    "NodeMetricsController",
    "OfferingGauges",
    "PodMetricsController",
]

NODE_METRICS_INTERVAL: Final = timedelta(seconds=5)
POD_METRICS_INTERVAL: Final = timedelta(seconds=5)

_CPU: Final = "cpu"
_MILLI: Final = 1000
_WELL_KNOWN: Final = {
    "nodepool": wk.LABEL_NODEPOOL,
    "zone": wk.LABEL_ZONE,
    "region": wk.LABEL_REGION,
    "instance_type": wk.LABEL_INSTANCE_TYPE,
    "arch": wk.LABEL_ARCH,
    "os": wk.LABEL_OS,
    "capacity_type": wk.LABEL_CAPACITY_TYPE,
    "windows_build": wk.LABEL_WINDOWS_BUILD,
}

_Series = tuple[Gauge, tuple[tuple[str, str], ...]]


@dataclass(frozen=True, slots=True)
class _Sample:
    gauge: Gauge
    labels: Mapping[str, str]
    value: float

    @property
    def series(self) -> _Series:
        return (self.gauge, tuple(sorted(self.labels.items())))


class GaugeStore:
    """Karpenter's ``metrics.Store``: gauge series per object key, stale ones removed.

    A series is written only when its value changed since this store last wrote it.
    """

    def __init__(self) -> None:
        self._store: dict[str, dict[_Series, float]] = {}

    def update(self, key: str, samples: Iterable[_Sample]) -> None:
        """Set ``key``'s series; remove those it had before and has no more."""
        before = self._store.get(key, {})
        current: dict[_Series, float] = {}
        for sample in samples:
            series = sample.series
            if before.get(series) != sample.value or series in current:
                sample.gauge.labels(**sample.labels).set(sample.value)
            current[series] = sample.value
        for gauge, labels in before.keys() - current.keys():
            gauge.remove(*(value for _, value in _ordered(gauge, labels)))
        self._store[key] = current

    def replace_all(self, samples: Mapping[str, Iterable[_Sample]]) -> None:
        """Update every key given; delete every other key."""
        for key, items in samples.items():
            self.update(key, items)
        for key in set(self._store) - set(samples):
            self.delete(key)

    def delete(self, key: str) -> None:
        """Remove every series of ``key``."""
        for gauge, labels in self._store.pop(key, set()):
            gauge.remove(*(value for _, value in _ordered(gauge, labels)))


def _ordered(gauge: Gauge, labels: tuple[tuple[str, str], ...]) -> list[tuple[str, str]]:
    by_name = dict(labels)
    return [(name, by_name[name]) for name in gauge._labelnames]  # noqa: SLF001


def resource_type(name: str) -> str:
    """Karpenter's ``resource_type`` label value."""
    return name.lower().replace("-", "_")


def _value(name: str, milli: int) -> float:
    """CPU in cores; any other resource in whole units, rounded up (``Quantity.Value()``)."""
    return milli / _MILLI if name == _CPU else float(math.ceil(milli / _MILLI))


def _lifetime_key(node_name: str) -> str:
    """The store key of a node's lifetime series (``:`` is in no node name)."""
    return f"lifetime:{node_name}"


def _is_daemon(pod: Pod) -> bool:
    return any(ref.kind == "DaemonSet" for ref in pod.metadata.owner_references)


def _milli(values: Mapping[str, str | int | float]) -> dict[str, int]:
    try:
        return parse_resource_list(values, field="status")
    except ResourceListError:
        return {}


def node_labels(node: Node, managed: bool) -> dict[str, str]:
    """The labels of a node's ``karpenter_nodes_*`` series."""
    labels = {name: node.metadata.labels.get(key, "") for name, key in _WELL_KNOWN.items()}
    labels.update(node_name=node.metadata.name, phase="", managed=str(managed).lower())
    return {name: labels[name] for name in NODE_LABELS}


_Totals = tuple[dict[str, int], dict[str, int], dict[str, int], dict[str, int]]


@dataclass(frozen=True, slots=True)
class _PodTotals:
    """One pod object's requests and limits (None: its resources do not parse)."""

    pod: Pod
    requests: dict[str, int] | None
    limits: dict[str, int]
    daemon: bool


@dataclass(frozen=True, slots=True)
class _NodeSeries:
    """A node's series but its lifetime, for one (Node, managed, pods) state."""

    node: Node
    managed: bool
    pods: tuple[Pod, ...]
    samples: tuple[_Sample, ...]
    labels: Mapping[str, str]
    allocatable: dict[str, int]
    requests: dict[str, int]

    def serves(self, state: StateNode) -> bool:
        """Whether ``state`` has the same Node, managed flag and pod objects."""
        return (
            self.node is state.node
            and self.managed == state.managed
            and len(self.pods) == len(state.pods)
            and all(a is b for a, b in zip(self.pods, state.pods, strict=True))
        )


class NodeMetricsController:
    """``metrics.node``: the node gauges of every registered state node, every 5 s."""

    def __init__(self, *, state: ClusterState, metrics: Metrics, clock: Clock) -> None:
        self._state = state
        self._metrics = metrics
        self._clock = clock
        self._store = GaugeStore()
        self._nodes: dict[str, _NodeSeries] = {}
        # by id(pod): each entry holds its pod object, so an id is not reused while it is here
        self._pods: dict[int, _PodTotals] = {}
        # the state nodes last built from (held, so their ids are not reused)
        self._last: tuple[StateNode, ...] = ()

    @property
    def name(self) -> str:
        """``metrics.node``."""
        return "metrics.node"

    def reconcile(self, request: Request) -> Result:
        """Rebuild every node's gauges; drop those of gone nodes."""
        del request
        now = self._clock.now()
        nodes = [n for n in self._state.state_nodes(now) if n.node is not None]
        if len(nodes) == len(self._last) and all(
            a is b for a, b in zip(nodes, self._last, strict=True)
        ):
            # the same state node objects: only the lifetimes moved
            for name, item in self._nodes.items():
                self._store.update(_lifetime_key(name), [self._lifetime(item, now)])
            return Result.after(NODE_METRICS_INTERVAL)
        self._last = tuple(nodes)
        pods: dict[int, _PodTotals] = {}
        series: dict[str, _NodeSeries] = {}
        for state in nodes:
            known = self._nodes.get(state.name)
            if known is None or not known.serves(state):
                series[state.name] = self._node(state, pods)
                continue
            series[state.name] = known
            for pod in state.pods:  # an unchanged node's pods keep their totals
                cached = self._pods.get(id(pod))
                if cached is not None:
                    pods[id(pod)] = cached
        self._nodes, self._pods = series, pods
        samples: dict[str, Iterable[_Sample]] = {}
        for name, item in series.items():
            samples[name] = item.samples
            samples[_lifetime_key(name)] = [self._lifetime(item, now)]
        samples["clusterUtilization"] = self._utilization(series.values())
        self._store.replace_all(samples)
        return Result.after(NODE_METRICS_INTERVAL)

    def _lifetime(self, item: _NodeSeries, now: datetime) -> _Sample:
        created = item.node.metadata.creation_timestamp
        lifetime = (now - created).total_seconds() if created is not None else 0.0
        return _Sample(self._metrics.nodes_lifetime, item.labels, lifetime)

    def _node(self, state: StateNode, pods: dict[int, _PodTotals]) -> _NodeSeries:
        node = state.node
        assert node is not None  # noqa: S101 - filtered by the caller
        m = self._metrics
        requests, limits, daemon_requests, daemon_limits = self._pod_totals(state.pods, pods)
        allocatable = _milli(node.status.allocatable)
        by_gauge = (
            (m.nodes_system_overhead, subtract(_milli(node.status.capacity), allocatable)),
            (m.nodes_total_pod_requests, requests),
            (m.nodes_total_pod_limits, limits),
            (m.nodes_total_daemon_requests, daemon_requests),
            (m.nodes_total_daemon_limits, daemon_limits),
            (m.nodes_allocatable, allocatable),
        )
        labels = node_labels(node, state.managed)
        samples = tuple(
            _Sample(gauge, {**labels, "resource_type": resource_type(name)}, _value(name, milli))
            for gauge, resources in by_gauge
            for name, milli in sorted(resources.items())
        )
        return _NodeSeries(
            node=node,
            managed=state.managed,
            pods=state.pods,
            samples=samples,
            labels=labels,
            allocatable=allocatable,
            requests=requests,
        )

    def _pod_totals(self, node_pods: Iterable[Pod], pods: dict[int, _PodTotals]) -> _Totals:
        """The totals of ``node_pods``, each pod object's computed once (kept in ``pods``)."""
        totals = []
        for pod in node_pods:
            cached = self._pods.get(id(pod))
            if cached is None or cached.pod is not pod:
                cached = _totals_of(pod)
            pods[id(pod)] = cached
            totals.append(cached)
        return _sum_totals(totals)

    def _utilization(self, nodes: Iterable[_NodeSeries]) -> list[_Sample]:
        allocatable: dict[str, int] = {}
        used: dict[str, int] = {}
        for item in nodes:
            allocatable = add(allocatable, item.allocatable)
            used = add(used, item.requests)
        samples = []
        for name, total in sorted(allocatable.items()):
            whole = _value(name, total)
            if whole == 0:
                continue
            percent = 100 * _value(name, used.get(name, 0)) / whole
            gauge = self._metrics.cluster_utilization
            samples.append(_Sample(gauge, {"resource_type": resource_type(name)}, percent))
        return samples


def _totals_of(pod: Pod) -> _PodTotals:
    try:
        own, own_limits = requests_of(pod), limits_of(pod)
    except ResourceListError:
        return _PodTotals(pod, None, {}, daemon=False)
    return _PodTotals(pod, own, own_limits, daemon=_is_daemon(pod))


def _sum_totals(pods: Iterable[_PodTotals]) -> _Totals:
    """Requests, limits, DaemonSet requests and DaemonSet limits of a node's live pods."""
    requests: dict[str, int] = {}
    limits: dict[str, int] = {}
    daemon_requests: dict[str, int] = {}
    daemon_limits: dict[str, int] = {}
    for item in pods:
        if item.requests is None:
            continue
        requests, limits = add(requests, item.requests), add(limits, item.limits)
        if item.daemon:
            daemon_requests = add(daemon_requests, item.requests)
            daemon_limits = add(daemon_limits, item.limits)
    return requests, limits, daemon_requests, daemon_limits


def _owner(pod: Pod) -> str:
    """The first owner's self link, as Karpenter renders it."""
    if not pod.metadata.owner_references:
        return ""
    ref = pod.metadata.owner_references[0]
    namespace = pod.metadata.namespace or "default"
    return f"/apis/{ref.api_version}/namespaces/{namespace}/{ref.kind.lower()}s/{ref.name}"


def pod_state_labels(pod: Pod, node: Node | None) -> dict[str, str]:
    """The labels of a pod's ``karpenter_pods_state`` series."""
    status = pod.status
    conditions = status.conditions if status is not None else ()
    ready = any(c.type == "Ready" and c.status == "True" for c in conditions)
    node_labels_ = node.metadata.labels if node is not None else {}
    pool = node_labels_.get(wk.LABEL_NODEPOOL, "")
    return {
        "name": pod.metadata.name,
        "namespace": pod.metadata.namespace or "default",
        "owner": _owner(pod),
        "node": pod.spec.node_name,
        "scheduled": str(bool(pod.spec.node_name)).lower(),
        "nodepool": pool,
        "zone": node_labels_.get(wk.LABEL_ZONE, ""),
        "arch": node_labels_.get(wk.LABEL_ARCH, ""),
        "capacity_type": node_labels_.get(wk.LABEL_CAPACITY_TYPE, ""),
        "instance_type": node_labels_.get(wk.LABEL_INSTANCE_TYPE, ""),
        "phase": status.phase if status is not None else "",
        "ready": str(ready).lower(),
        "managed": str(bool(pool)).lower(),
    }


class PodMetricsController:
    """``metrics.pod``: ``karpenter_pods_state`` for every pod, refreshed when the cache moves."""

    def __init__(self, *, state: ClusterState, metrics: Metrics) -> None:
        self._state = state
        self._metrics = metrics
        self._store = GaugeStore()
        self._seen: int | None = None
        self._labels: dict[str, tuple[Pod, Node | None, dict[str, str]]] = {}

    @property
    def name(self) -> str:
        """``metrics.pod``."""
        return "metrics.pod"

    def reconcile(self, request: Request) -> Result:
        """Set every pod's state series; drop those of deleted pods."""
        del request
        generation = self._state.generation
        if generation != self._seen:
            self._seen = generation
            nodes = {n.metadata.name: n for n in self._state.nodes()}
            gauge = self._metrics.pods_state
            labels: dict[str, tuple[Pod, Node | None, dict[str, str]]] = {}
            for pod in self._state.pods():
                node = nodes.get(pod.spec.node_name)
                known = self._labels.get(pod.key)
                if known is None or known[0] is not pod or known[1] is not node:
                    known = (pod, node, pod_state_labels(pod, node))
                    # only a pod or node object that changed can change a pod's series
                    self._store.update(pod.key, [_Sample(gauge, known[2], 1)])
                labels[pod.key] = known
            for key in self._labels.keys() - labels.keys():
                self._store.delete(key)
            self._labels = labels
        return Result.after(POD_METRICS_INTERVAL)


class OfferingGauges:
    """``karpenter_cloudprovider_instance_type_offering_available`` / ``_price_estimate``.

    Observed from the instance types the provisioner resolves for its NodePools on each batch
    (Karpenter's AWS provider sets them from the same ``GetInstanceTypes`` answers). An offering
    is available when it is available for any NodePool; offerings no NodePool has any more are
    removed. Only changed series are written (a region has thousands of offerings).
    """

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics
        self._last: dict[tuple[str, str, str], tuple[bool, float]] = {}
        # the instance type objects last observed: frozen, so the same objects in the same
        # order set the same gauges (the provider keeps its objects while nothing changes)
        self._seen: tuple[InstanceType, ...] = ()

    def observe(self, types: Iterable[Sequence[InstanceType]]) -> None:
        """Set the gauges from every NodePool's instance types."""
        pools = [tuple(pool_types) for pool_types in types]
        observed = tuple(it for pool_types in pools for it in pool_types)
        if len(observed) == len(self._seen) and all(
            a is b for a, b in zip(observed, self._seen, strict=True)
        ):
            return
        self._seen = observed
        current: dict[tuple[str, str, str], tuple[bool, float]] = {}
        for pool_types in pools:
            for instance_type in pool_types:
                for offering in instance_type.offerings:
                    key = (instance_type.name, offering.capacity_type, offering.zone)
                    seen = current.get(key)
                    available = offering.available or (seen is not None and seen[0])
                    current[key] = (available, offering.price)
        available_gauge, price_gauge = (
            self._metrics.offering_available,
            self._metrics.offering_price,
        )
        for key, value in current.items():
            if self._last.get(key) != value:
                available_gauge.labels(*key).set(float(value[0]))
                price_gauge.labels(*key).set(value[1])
        for key in self._last.keys() - current.keys():
            available_gauge.remove(*key)
            price_gauge.remove(*key)
        self._last = current
