"""The ports every controller acts through, built once by the manager and shared."""

from __future__ import annotations

from dataclasses import dataclass

from structlog.typing import FilteringBoundLogger

from cloudprovider.protocol import CloudProvider
from provisioner.controllers.cloudmetrics import for_controller
from provisioner.controllers.events import EventRecorder
from provisioner.controllers.metrics import Metrics
from provisioner.kube.protocol import KubeClient
from provisioner.runtime.clock import Clock
from provisioner.state.cluster import ClusterState

__all__ = ["ControllerBase", "Ports"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Ports:
    """The cluster state cache, the Kubernetes and cloud ports, the clock, logs, metrics, events."""

    state: ClusterState
    kube: KubeClient
    cloud: CloudProvider
    clock: Clock
    logger: FilteringBoundLogger
    metrics: Metrics
    events: EventRecorder


class ControllerBase:
    """Keeps the ports under the names the controllers use.

    Binds the ``controller`` log field, and the ``controller`` label of the cloud provider's
    metrics when the provider is decorated (:mod:`provisioner.controllers.cloudmetrics`).
    """

    def __init__(self, ports: Ports, name: str) -> None:
        self._state = ports.state
        self._kube = ports.kube
        self._cloud = for_controller(ports.cloud, name)
        self._clock = ports.clock
        self._log = ports.logger.bind(controller=name)
        self._metrics = ports.metrics
        self._events = ports.events
