"""The production controller set, built from a simulation's ports.

:func:`manager_factory` is the default :data:`~provisioner.simulation.runner.ControllersFactory`
of ``jointer simulate``: the one :func:`~provisioner.controllers.assembly.assemble` that
``jointer run`` calls too (the same manager, the same replacement-first ``interruption``
reconciler), on the in-memory API, the AWS cloud provider on moto and the virtual clock, with the
planner made deterministic (one CP-SAT worker, a deterministic-time budget and the run's seed),
and the interruption queue consumer on moto's SQS.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from provisioner.controllers.assembly import ControllerSet, assemble
from provisioner.controllers.metrics import Metrics
from provisioner.simulation.ports import Ports

__all__ = ["SimulationSettings", "manager_factory"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SimulationSettings:
    """The controller settings of a simulation (``ControllerSettings``)."""

    policy: str
    aws_region: str
    idle: timedelta
    max: timedelta
    budget: timedelta

    def batch_idle(self) -> timedelta:
        """``BATCH_IDLE_DURATION``."""
        return self.idle

    def batch_max(self) -> timedelta:
        """``BATCH_MAX_DURATION``."""
        return self.max

    def solver_budget(self) -> timedelta:
        """The optimiser's budget per batch."""
        return self.budget

    def ignore_preferences(self) -> bool:
        """``PREFERENCE_POLICY``: simulations take it from their planner config."""
        return False

    def best_effort_min_values(self) -> bool:
        """``MIN_VALUES_POLICY``: simulations take it from their planner config."""
        return False


def manager_factory(ports: Ports) -> ControllerSet:
    """The production controllers on the simulation's ports."""
    settings = SimulationSettings(
        policy=ports.planner.policy,
        aws_region=ports.region,
        idle=ports.batch_idle,
        max=ports.batch_max,
        budget=timedelta(seconds=ports.planner.time_limit_seconds),
    )
    return assemble(
        kube=ports.kube,
        cloud=ports.cloud,
        clock=ports.clock,
        settings=settings,
        logger=ports.logger,
        metrics=Metrics(ports.registry),
        planner=ports.planner,
        interruption=ports.interruption,
        nodeclasses=ports.nodeclasses,
        state=ports.state,
    )
