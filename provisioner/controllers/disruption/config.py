"""How disruption behaves: Karpenter's timings and the operator's protections.

:class:`DisruptionConfig` is built in the composition root (``DisruptionConfig.from_settings``
reads ``JOINTER_NON_PREEMPTIBLE_PRIORITY_CLASSES`` and the ``SpotToSpotConsolidation`` feature gate
when the settings object offers them) and injected into every disruption controller.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Final, Protocol, runtime_checkable

__all__ = ["SPOT_TO_SPOT_GATE", "DisruptionConfig", "DisruptionSettings"]

SPOT_TO_SPOT_GATE: Final = "SpotToSpotConsolidation"


@runtime_checkable
class DisruptionSettings(Protocol):
    """The settings disruption reads, when the process settings provide them."""

    def non_preemptible_classes(self) -> frozenset[str]:
        """``JOINTER_NON_PREEMPTIBLE_PRIORITY_CLASSES``."""
        ...

    def gates(self) -> dict[str, bool]:
        """``FEATURE_GATES``."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class DisruptionConfig:
    """Disruption settings (Karpenter's defaults).

    Attributes:
        non_preemptible_priority_classes: PriorityClasses whose pods are never disrupted.
        spot_to_spot: the ``SpotToSpotConsolidation`` feature gate.
        poll_interval: how often the disruption loop runs when idle (10 s).
        validation_delay: how long a consolidation command waits before its re-check (15 s).
        recheck_interval: a method that found nothing runs again on an unchanged cluster only
            after this long (5 min).
        drift_interval: how often a NodeClaim's drift is re-evaluated (5 min).
        multi_node_max_candidates: candidates multi-node consolidation considers with the
            ``greedy`` (Karpenter-style) policy (100, Karpenter's cap); Jointer's policy takes
            every candidate the budgets allow and stops on ``multi_node_timeout``.
        simulation_time_limit_seconds: the optimiser's wall-clock budget per rescheduling
            simulation (a reproducible run, with a deterministic planner budget, keeps the
            planner's own limit instead).
        catalog_ttl: how long the NodePools' instance types are reused between passes.
        multi_node_timeout: multi-node consolidation stops searching after this long (1 min).
        single_node_timeout: single-node consolidation gives up after this long (3 min).
        queue_poll: how often the command queue looks at replacements while waiting.
        min_queue_timeout: the shortest time a command waits for its replacements (10 min).
        max_queue_timeout: the longest (1 h); Karpenter's ``clamp(80 ms x queued, 10 min, 1 h)``.
        interruption_poll: how often the interruption queue is polled.
        interruption_window: how long after a spot interruption warning the instance goes (2 min).
        interruption_drain_margin: the NodeClaim is deleted at the latest this long before the
            instance goes, so its pods drain inside the window.
    """

    non_preemptible_priority_classes: frozenset[str] = frozenset()
    spot_to_spot: bool = False
    poll_interval: timedelta = timedelta(seconds=10)
    validation_delay: timedelta = timedelta(seconds=15)
    recheck_interval: timedelta = timedelta(minutes=5)
    drift_interval: timedelta = timedelta(minutes=5)
    multi_node_max_candidates: int = 100
    simulation_time_limit_seconds: float = 1.0
    catalog_ttl: timedelta = timedelta(minutes=1)
    multi_node_timeout: timedelta = timedelta(minutes=1)
    single_node_timeout: timedelta = timedelta(minutes=3)
    queue_poll: timedelta = timedelta(seconds=1)
    min_queue_timeout: timedelta = timedelta(minutes=10)
    max_queue_timeout: timedelta = timedelta(hours=1)
    interruption_poll: timedelta = timedelta(seconds=2)
    interruption_window: timedelta = timedelta(minutes=2)
    interruption_drain_margin: timedelta = timedelta(seconds=45)

    @classmethod
    def from_settings(cls, settings: object) -> DisruptionConfig:
        """The defaults, with the protections and gates of ``settings`` when it has them."""
        if not isinstance(settings, DisruptionSettings):
            return cls()
        return cls(
            non_preemptible_priority_classes=settings.non_preemptible_classes(),
            spot_to_spot=settings.gates().get(SPOT_TO_SPOT_GATE, False),
        )
