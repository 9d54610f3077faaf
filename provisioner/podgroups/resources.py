"""Effective pod requests in milli-units, the way the scheduler sums them."""

from __future__ import annotations

from collections.abc import Mapping

from provisioner.apis.core import Pod, QuantityValue
from provisioner.scheduling.quantity import QuantityError, parse_quantity

__all__ = ["pod_requests"]


def _add(total: dict[str, int], requests: Mapping[str, QuantityValue]) -> None:
    for name, value in requests.items():
        total[name] = total.get(name, 0) + _parse(value)


def _parse(value: QuantityValue) -> int:
    try:
        return parse_quantity(value)
    except QuantityError:
        # Malformed quantities are reported by the planner's own validation; count nothing here.
        return 0


def pod_requests(pod: Pod) -> dict[str, int]:
    """Sum of container requests, at least every init container's, plus the pod overhead.

    Sidecar init containers (``restartPolicy: Always``) run beside the containers and are summed
    with them, as kube-scheduler does.
    """
    total: dict[str, int] = {}
    for container in pod.spec.containers:
        _add(total, container.resources.requests)
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for init in pod.spec.init_containers:
        if init.restart_policy == "Always":
            _add(sidecars, init.resources.requests)
            continue
        single = dict(sidecars)
        _add(single, init.resources.requests)
        for name, value in single.items():
            init_peak[name] = max(init_peak.get(name, 0), value)
    for name, value in sidecars.items():
        total[name] = total.get(name, 0) + value
    for name, value in init_peak.items():
        total[name] = max(total.get(name, 0), value)
    _add(total, pod.spec.overhead)
    return total
