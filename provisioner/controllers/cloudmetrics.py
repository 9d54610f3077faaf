"""The CloudProvider metrics decorator (Karpenter's ``pkg/cloudprovider/metrics``).

:class:`MetricsCloudProvider` wraps any :class:`~cloudprovider.protocol.CloudProvider` and
observes, for every call, ``karpenter_cloudprovider_duration_seconds{controller,method,provider}``
and, when the call raises, ``karpenter_cloudprovider_errors_total{controller,method,provider,
error}``. Method names are Karpenter's (``Create``, ``Delete``, ``Get``, ``List``,
``GetInstanceTypes``, ``IsDrifted``); ``error`` is the well-known error type or ``""``.

Karpenter takes the ``controller`` label from the call's context; here each controller binds its
own view once (:func:`for_controller`, done by ``ControllerBase``). The assembly decorates the
provider once, so ``jointer run`` and ``jointer simulate`` both observe it. Durations come from
the injected clock (virtual in simulations).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Final, TypeVar

from cloudprovider.errors import (
    InsufficientCapacityError,
    NodeClaimNotFoundError,
    NodeClassNotReadyError,
)
from cloudprovider.instancetype import InstanceType
from cloudprovider.protocol import CloudNodeClaim, CloudProvider, LaunchRequest, NodePoolRef
from provisioner.controllers.metrics import Metrics
from provisioner.runtime.clock import Clock

__all__ = ["MetricsCloudProvider", "error_type_label", "for_controller"]

_T = TypeVar("_T")

INSUFFICIENT_CAPACITY: Final = "InsufficientCapacityError"
NODECLAIM_NOT_FOUND: Final = "NodeClaimNotFoundError"
NODECLASS_NOT_READY: Final = "NodeClassNotReadyError"


def error_type_label(error: BaseException) -> str:
    """Karpenter's ``error`` label value: the well-known error type, else ``""``."""
    if isinstance(error, InsufficientCapacityError):
        return INSUFFICIENT_CAPACITY
    if isinstance(error, NodeClaimNotFoundError):
        return NODECLAIM_NOT_FOUND
    if isinstance(error, NodeClassNotReadyError):
        return NODECLASS_NOT_READY
    return ""


class MetricsCloudProvider:
    """A CloudProvider that observes Karpenter's cloudprovider metrics around each call.

    Args:
        cloud: the provider to delegate to (never itself a ``MetricsCloudProvider``).
        metrics: where to observe.
        clock: the injected clock (its monotonic time measures durations).
        controller: the ``controller`` label value ("" until a controller binds it).
    """

    def __init__(
        self, cloud: CloudProvider, *, metrics: Metrics, clock: Clock, controller: str = ""
    ) -> None:
        if isinstance(cloud, MetricsCloudProvider):
            cloud = cloud.inner  # decorating twice would count every call twice
        self.inner: CloudProvider = cloud
        self.controller = controller
        self._metrics = metrics
        self._clock = clock

    def for_controller(self, controller: str) -> MetricsCloudProvider:
        """The same provider, observed under ``controller``."""
        return MetricsCloudProvider(
            self.inner, metrics=self._metrics, clock=self._clock, controller=controller
        )

    @property
    def name(self) -> str:
        """The decorated provider's name (the ``provider`` label)."""
        return self.inner.name

    def _measure(self, method: str, call: Callable[[], _T]) -> _T:
        labels = {"controller": self.controller, "method": method, "provider": self.inner.name}
        started = self._clock.monotonic()
        try:
            return call()
        except Exception as error:
            self._metrics.cloudprovider_errors.labels(**labels, error=error_type_label(error)).inc()
            raise
        finally:
            elapsed = max(self._clock.monotonic() - started, 0.0)
            self._metrics.cloudprovider_duration.labels(**labels).observe(elapsed)

    def create(self, request: LaunchRequest) -> CloudNodeClaim:
        """``Create``."""
        return self._measure("Create", lambda: self.inner.create(request))

    def delete(self, provider_id: str) -> None:
        """``Delete``."""
        self._measure("Delete", lambda: self.inner.delete(provider_id))

    def get(self, provider_id: str) -> CloudNodeClaim:
        """``Get``."""
        return self._measure("Get", lambda: self.inner.get(provider_id))

    def list_claims(self) -> list[CloudNodeClaim]:
        """``List``."""
        return self._measure("List", self.inner.list_claims)

    def get_instance_types(self, nodepool: NodePoolRef) -> Sequence[InstanceType]:
        """``GetInstanceTypes``."""
        return self._measure("GetInstanceTypes", lambda: self.inner.get_instance_types(nodepool))

    def is_drifted(self, claim: CloudNodeClaim) -> str | None:
        """``IsDrifted``."""
        return self._measure("IsDrifted", lambda: self.inner.is_drifted(claim))

    def restamp(self, claim: CloudNodeClaim, *, drifted: bool) -> Mapping[str, str]:
        """The provider's re-stamp (a local computation: not measured, as in Karpenter)."""
        return self.inner.restamp(claim, drifted=drifted)


def for_controller(cloud: CloudProvider, controller: str) -> CloudProvider:
    """``cloud`` bound to ``controller`` when it is decorated, else ``cloud`` itself."""
    if isinstance(cloud, MetricsCloudProvider):
        return cloud.for_controller(controller)
    return cloud
