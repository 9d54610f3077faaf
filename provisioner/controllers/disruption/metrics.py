"""Disruption and drain metrics not in :class:`~provisioner.controllers.metrics.Metrics`.

Registered on the same injected registry, once per manager (Karpenter's names, §13). The
voluntary-disruption counters of ``Metrics`` (``decisions_total``, ``eligible_nodes``,
``allowed_disruptions``, ``nodeclaims_disrupted_total``, ``pods_eviction_requests_total``) are
used as they are.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["DisruptionMetrics"]

_EVALUATION_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 180)


class DisruptionMetrics:
    """Counters and gauges of disruption, the command queue and drain."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.evaluation_duration = Histogram(
            "karpenter_voluntary_disruption_decision_evaluation_duration_seconds",
            "Duration of the disruption decision evaluation process in seconds.",
            ["reason", "consolidation_type"],
            buckets=_EVALUATION_BUCKETS,
            registry=registry,
        )
        self.decisions_by_nodepool = Counter(
            "karpenter_voluntary_disruption_decisions_by_nodepool_total",
            "Number of disruption decisions performed, by NodePool.",
            ["nodepool", "decision", "reason", "consolidation_type"],
            registry=registry,
        )
        self.queue_failures = Counter(
            "karpenter_voluntary_disruption_queue_failures_total",
            "The number of times that an enqueued disruption decision failed.",
            ["decision", "reason", "consolidation_type"],
            registry=registry,
        )
        self.failed_validations = Counter(
            "karpenter_voluntary_disruption_failed_validations_total",
            "Number of candidates that were selected for disruption but failed validation.",
            ["consolidation_type"],
            registry=registry,
        )
        self.consolidation_timeouts = Counter(
            "karpenter_voluntary_disruption_consolidation_timeouts_total",
            "Number of times the consolidation algorithm has reached a timeout.",
            ["consolidation_type"],
            registry=registry,
        )
        self.nodes_consuming_budgets = Gauge(
            "karpenter_nodepools_nodes_consuming_budgets",
            "The number of nodes of a NodePool disrupting now (they consume its budgets).",
            ["nodepool", "reason"],
            registry=registry,
        )
        self.pods_drained = Counter(
            "karpenter_pods_drained_total",
            "The number of pods drained during node termination.",
            ["reason"],
            registry=registry,
        )
        self.nodes_drained = Counter(
            "karpenter_nodes_drained_total",
            "The number of nodes drained by Karpenter.",
            ["nodepool"],
            registry=registry,
        )
        self.pods_disruption_initiated = Counter(
            "karpenter_pods_disruption_initiated_total",
            "The number of pods whose node Karpenter started disrupting.",
            ["reason", "nodepool", "capacity_type", "consolidation_policy", "termination_mode"],
            registry=registry,
        )
