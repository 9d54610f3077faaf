"""Prometheus metrics with Karpenter's names and labels (`karpenter-behaviour.md` §13).

One :class:`Metrics` is built per process (or per simulation) on an injected
``CollectorRegistry``; nothing is registered at import time. Jointer-only metrics use the
``jointer_`` prefix.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["NODE_LABELS", "POD_STATE_LABELS", "Metrics"]

_GO_DEFAULT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
"""Prometheus' Go client ``DefBuckets`` (what Karpenter's histograms use without buckets)."""

NODE_LABELS = (
    "nodepool",
    "zone",
    "region",
    "instance_type",
    "arch",
    "os",
    "capacity_type",
    "windows_build",
    "node_name",
    "phase",
    "managed",
)
"""The labels of Karpenter's ``karpenter_nodes_*`` state gauges (its well-known node labels in
snake case, then ``node_name``, ``phase``, ``managed``)."""

POD_STATE_LABELS = (
    "name",
    "namespace",
    "owner",
    "node",
    "scheduled",
    "nodepool",
    "zone",
    "arch",
    "capacity_type",
    "instance_type",
    "phase",
    "ready",
    "managed",
)
"""The labels of ``karpenter_pods_state``."""

_RESOURCE_TYPE = "resource_type"
_OFFERING_LABELS = ("instance_type", "capacity_type", "zone")

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
            "The number of pods currently waiting to be scheduled.",
            ["controller", "scheduling_id"],
            registry=registry,
        )
        self.cloudprovider_duration = Histogram(
            "karpenter_cloudprovider_duration_seconds",
            "Duration of cloud provider method calls. Labeled by the controller, method name "
            "and provider.",
            ["controller", "method", "provider"],
            buckets=_GO_DEFAULT_BUCKETS,
            registry=registry,
        )
        self.cloudprovider_errors = Counter(
            "karpenter_cloudprovider_errors_total",
            "Total number of errors returned from CloudProvider calls.",
            ["controller", "method", "provider", "error"],
            registry=registry,
        )
        self.offering_available = Gauge(
            "karpenter_cloudprovider_instance_type_offering_available",
            "Instance type offering availability, based on instance type, capacity type, and zone",
            _OFFERING_LABELS,
            registry=registry,
        )
        self.offering_price = Gauge(
            "karpenter_cloudprovider_instance_type_offering_price_estimate",
            "Instance type offering estimated hourly price used when making informed decisions "
            "on node cost calculation, based on instance type, capacity type, and zone.",
            _OFFERING_LABELS,
            registry=registry,
        )
        node_resource = (*NODE_LABELS, _RESOURCE_TYPE)
        self.nodes_allocatable = Gauge(
            "karpenter_nodes_allocatable",
            "Node allocatable are the resources allocatable by nodes.",
            node_resource,
            registry=registry,
        )
        self.nodes_total_pod_requests = Gauge(
            "karpenter_nodes_total_pod_requests",
            "Node total pod requests are the resources requested by pods bound to nodes, "
            "including the DaemonSet pods.",
            node_resource,
            registry=registry,
        )
        self.nodes_total_pod_limits = Gauge(
            "karpenter_nodes_total_pod_limits",
            "Node total pod limits are the resources specified by pod limits, including the "
            "DaemonSet pods.",
            node_resource,
            registry=registry,
        )
        self.nodes_total_daemon_requests = Gauge(
            "karpenter_nodes_total_daemon_requests",
            "Node total daemon requests are the resource requested by DaemonSet pods bound to "
            "nodes.",
            node_resource,
            registry=registry,
        )
        self.nodes_total_daemon_limits = Gauge(
            "karpenter_nodes_total_daemon_limits",
            "Node total daemon limits are the resources specified by DaemonSet pod limits.",
            node_resource,
            registry=registry,
        )
        self.nodes_system_overhead = Gauge(
            "karpenter_nodes_system_overhead",
            "Node system daemon overhead are the resources reserved for system overhead, the "
            "difference between the node's capacity and allocatable values are reported by the "
            "status.",
            node_resource,
            registry=registry,
        )
        self.nodes_lifetime = Gauge(
            "karpenter_nodes_current_lifetime_seconds",
            "Node age in seconds",
            NODE_LABELS,
            registry=registry,
        )
        self.cluster_utilization = Gauge(
            "karpenter_cluster_utilization_percent",
            "Utilization of allocatable resources by pod requests",
            [_RESOURCE_TYPE],
            registry=registry,
        )
        self.pods_state = Gauge(
            "karpenter_pods_state",
            "Pod state is the current state of pods. This metric can be used several ways as it "
            "is labeled by the pod name, namespace, owner, node, nodepool name, zone, "
            "architecture, capacity type, instance type, pod phase, and pod readiness.",
            POD_STATE_LABELS,
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
