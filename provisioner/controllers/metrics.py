"""Prometheus metrics with Karpenter's names and labels (`karpenter-behaviour.md` §13).

One :class:`Metrics` is built per process (or per simulation) on an injected
``CollectorRegistry``; nothing is registered at import time. Jointer-only metrics use the
``jointer_`` prefix.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["Metrics"]

_SCHEDULING_BUCKETS = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    2.5,
    5,
    10,
    30,
    60,
    120,
    300,
    600,
)
_DURATION_BUCKETS = tuple(float(2**i) for i in range(12))
_QUEUE_BUCKETS = (
    *(0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5),
    *(0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5),
    *(5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60),
)
"""Karpenter's ``metrics.DurationBuckets()`` (controller-runtime's)."""


class Metrics:
    """The controller's metrics, registered on ``registry``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.nodeclaims_created = Counter(
            "karpenter_nodeclaims_created_total",
            "Number of nodeclaims created in total by Karpenter.",
            ["reason", "nodepool", "min_values_relaxed"],
            registry=registry,
        )
        self.nodeclaims_terminated = Counter(
            "karpenter_nodeclaims_terminated_total",
            "Number of nodeclaims terminated in total by Karpenter.",
            ["nodepool", "capacity_type", "zone"],
            registry=registry,
        )
        self.nodeclaims_disrupted = Counter(
            "karpenter_nodeclaims_disrupted_total",
            "Number of nodeclaims disrupted in total by Karpenter.",
            ["reason", "nodepool", "capacity_type", "consolidation_policy", "termination_mode"],
            registry=registry,
        )
        self.nodes_created = Counter(
            "karpenter_nodes_created_total",
            "Number of nodes created in total by Karpenter.",
            ["nodepool", "zone"],
            registry=registry,
        )
        self.nodes_terminated = Counter(
            "karpenter_nodes_terminated_total",
            "Number of nodes terminated in total by Karpenter.",
            ["nodepool", "zone"],
            registry=registry,
        )
        self.nodepool_usage = Gauge(
            "karpenter_nodepools_usage",
            "The amount of resources that have been provisioned for a nodepool.",
            ["nodepool", "resource_type"],
            registry=registry,
        )
        self.nodepool_limit = Gauge(
            "karpenter_nodepools_limit",
            "Limits specified on the nodepool that restrict the quantity of resources provisioned.",
            ["nodepool", "resource_type"],
            registry=registry,
        )
        self.scheduling_duration = Histogram(
            "karpenter_scheduler_scheduling_duration_seconds",
            "Duration of scheduling simulations used for deprovisioning and provisioning.",
            ["controller"],
            buckets=_SCHEDULING_BUCKETS,
            registry=registry,
        )
        self.ignored_pods = Gauge(
            "karpenter_scheduler_ignored_pods_count",
            "Number of pods ignored during scheduling by Karpenter.",
            registry=registry,
        )
        self.unschedulable_pods = Gauge(
            "karpenter_scheduler_unschedulable_pods_count",
            "The number of unschedulable Pods.",
            ["controller"],
            registry=registry,
        )
        self.queue_depth = Gauge(
            "karpenter_scheduler_queue_depth",
            "The number of pods that Karpenter has yet to schedule.",
            ["controller", "scheduling_id"],
            registry=registry,
        )
        self.cloudprovider_duration = Histogram(
            "karpenter_cloudprovider_duration_seconds",
            "Duration of cloud provider method calls. Labeled by the controller, method name "
            "and provider.",
            ["controller", "method", "provider"],
            registry=registry,
        )
        self.cloudprovider_errors = Counter(
            "karpenter_cloudprovider_errors_total",
            "Total number of errors returned from CloudProvider calls.",
            ["controller", "method", "provider", "error"],
            registry=registry,
        )
        self.nodeclaim_termination_duration = Histogram(
            "karpenter_nodeclaims_termination_duration_seconds",
            "Duration of NodeClaim termination in seconds.",
            ["nodepool"],
            buckets=_DURATION_BUCKETS,
            registry=registry,
        )
        self.pods_evictions = Counter(
            "karpenter_pods_eviction_requests_total",
            "The number of pod eviction requests.",
            ["code"],
            registry=registry,
        )
        self.disruption_decisions = Counter(
            "karpenter_voluntary_disruption_decisions_total",
            "Number of disruption decisions performed.",
            ["decision", "reason", "consolidation_type"],
            registry=registry,
        )
        self.eligible_nodes = Gauge(
            "karpenter_voluntary_disruption_eligible_nodes",
            "Number of nodes eligible for disruption by Karpenter.",
            ["reason"],
            registry=registry,
        )
        self.allowed_disruptions = Gauge(
            "karpenter_nodepools_allowed_disruptions",
            "The number of nodes for a given NodePool that can be concurrently disrupting.",
            ["nodepool", "reason"],
            registry=registry,
        )
        self.cluster_state_synced = Gauge(
            "karpenter_cluster_state_synced",
            "Returns 1 if cluster state is synced and 0 otherwise.",
            registry=registry,
        )
        self.cluster_state_node_count = Gauge(
            "karpenter_cluster_state_node_count",
            "Current count of nodes in cluster state.",
            registry=registry,
        )
        self.interruption_received = Counter(
            "karpenter_interruption_received_messages_total",
            "Count of messages received from the SQS queue. Broken down by message type and "
            "whether the message was actionable.",
            ["message_type"],
            registry=registry,
        )
        self.interruption_deleted = Counter(
            "karpenter_interruption_deleted_messages_total",
            "Count of messages deleted from the SQS queue.",
            registry=registry,
        )
        self.interruption_queue_duration = Histogram(
            "karpenter_interruption_message_queue_duration_seconds",
            "Amount of time an interruption message is on the queue before it is processed by "
            "karpenter.",
            buckets=_QUEUE_BUCKETS,
            registry=registry,
        )
        self.plan_cost = Gauge(
            "jointer_plan_cost_per_hour",
            "Hourly price of the NodeClaims of the last provisioning plan (USD).",
            registry=registry,
        )
        self.plan_lower_bound = Gauge(
            "jointer_plan_lower_bound_per_hour",
            "Proven lower bound on the hourly price of the last provisioning plan (USD).",
            registry=registry,
        )
        self.build_info = Gauge(
            "karpenter_build_info",
            "A metric with a constant '1' value labeled by version from which karpenter was built.",
            ["version", "goversion", "goarch", "commit"],
            registry=registry,
        )
