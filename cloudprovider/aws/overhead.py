"""What a node keeps for itself: kube-reserved, system-reserved and eviction thresholds.

Karpenter's overhead model (karpenter-aws.md §2.3), so that Jointer's allocatable equals the
kubelet's on the node:

- kube-reserved (each key overridable by ``kubelet.kubeReserved``): memory ``11 x pods + 255``
  MiB, where pods is the ENI limit ignoring ``maxPods`` on AL2/AL2023/Custom (the node's
  bootstrap computes it that way) and the pod capacity elsewhere; cpu 6 % of the first core,
  1 % of the second, 0.5 % of cores 3-4, 0.25 % above (each band truncated to whole
  millicores); ephemeral-storage 1Gi.
- system-reserved: only what ``kubelet.systemReserved`` says.
- eviction: memory 100Mi, ephemeral-storage ``ceil(10 %)`` of capacity; ``evictionHard``
  ``memory.available``/``nodefs.available`` override them (a percentage of capacity, ``100%``
  meaning disabled = 0). ``evictionSoft`` is not counted (Karpenter's families leave it off).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Final

from cloudprovider.aws.capacity import (
    CPU,
    EPHEMERAL_STORAGE,
    MEMORY,
    MI,
    MILLI,
    PODS,
    NodeClassView,
    family_flags,
)
from cloudprovider.instancetype import Overhead
from provisioner.scheduling.quantity import parse_quantity

__all__ = ["allocatable", "eviction_threshold", "kube_reserved", "overhead", "system_reserved"]

MEMORY_AVAILABLE: Final = "memory.available"
NODEFS_AVAILABLE: Final = "nodefs.available"
DEFAULT_EVICTION_MEMORY_MIB: Final = 100
DEFAULT_EVICTION_NODEFS_PERCENT: Final = 10
KUBE_RESERVED_EPHEMERAL_GI: Final = 1
# (start millicores, end millicores, share) -- kube-reserved CPU bands
_CPU_BANDS: Final = (
    (0, 1000, 0.06),
    (1000, 2000, 0.01),
    (2000, 4000, 0.005),
    (4000, 1 << 31, 0.0025),
)


def _reserved_cpu_millicores(cpu_millicores: int) -> int:
    total = 0
    for start, end, share in _CPU_BANDS:
        if cpu_millicores >= start:
            span = min(cpu_millicores, end) - start
            total += int(span * share)
    return total


def _user_quantities(values: Mapping[str, str] | None) -> dict[str, int]:
    # "pid" is not a node resource the scheduler sees.
    return {k: parse_quantity(v) for k, v in (values or {}).items() if k != "pid"}


def kube_reserved(
    node_capacity: Mapping[str, int],
    view: NodeClassView,
    *,
    eni_pods: int | None = None,
) -> dict[str, int]:
    """kube-reserved in milli-units (Karpenter's formulas, overridden per key by the user).

    Args:
        node_capacity: the node's capacity in milli-units.
        view: the nodeclass settings in force.
        eni_pods: the type's ENI pod limit (ignoring maxPods and reserved ENIs); when unknown,
            the pod capacity stands in for it.
    """
    if family_flags(view.family).uses_eni_limited_memory_overhead and eni_pods is not None:
        pod_count = eni_pods
    else:
        pod_count = node_capacity.get(PODS, 0) // MILLI
    reserved = {
        CPU: _reserved_cpu_millicores(node_capacity.get(CPU, 0)),
        MEMORY: (11 * pod_count + 255) * MI * MILLI,
        EPHEMERAL_STORAGE: KUBE_RESERVED_EPHEMERAL_GI * 2**30 * MILLI,
    }
    if view.kubelet is not None:
        reserved.update(_user_quantities(view.kubelet.kube_reserved))
    return reserved


def system_reserved(view: NodeClassView) -> dict[str, int]:
    """system-reserved in milli-units: only what the user sets."""
    return _user_quantities(view.kubelet.system_reserved if view.kubelet else None)


def _signal(capacity_milli: int, value: str) -> int:
    if value.endswith("%"):
        percent = float(value[:-1])
        if percent == 100:  # noqa: PLR2004 -- 100% disables the threshold (kubelet docs)
            percent = 0
        return math.ceil(capacity_milli / MILLI / 100 * percent) * MILLI
    return parse_quantity(value)


def eviction_threshold(node_capacity: Mapping[str, int], view: NodeClassView) -> dict[str, int]:
    """Hard eviction thresholds in milli-units (defaults, overridden by ``evictionHard``)."""
    storage = node_capacity.get(EPHEMERAL_STORAGE, 0)
    threshold = {
        MEMORY: DEFAULT_EVICTION_MEMORY_MIB * MI * MILLI,
        EPHEMERAL_STORAGE: math.ceil(storage / MILLI / 100 * DEFAULT_EVICTION_NODEFS_PERCENT)
        * MILLI,
    }
    hard = view.kubelet.eviction_hard if view.kubelet else None
    if hard:
        if MEMORY_AVAILABLE in hard:
            threshold[MEMORY] = _signal(node_capacity.get(MEMORY, 0), hard[MEMORY_AVAILABLE])
        if NODEFS_AVAILABLE in hard:
            threshold[EPHEMERAL_STORAGE] = _signal(storage, hard[NODEFS_AVAILABLE])
    return threshold


def overhead(
    node_capacity: Mapping[str, int],
    view: NodeClassView | None = None,
    *,
    eni_pods: int | None = None,
) -> Overhead:
    """The node overhead for ``node_capacity`` under ``view`` (see :func:`kube_reserved`)."""
    view = view or NodeClassView()
    return Overhead(
        kube_reserved=kube_reserved(node_capacity, view, eni_pods=eni_pods),
        system_reserved=system_reserved(view),
        eviction_threshold=eviction_threshold(node_capacity, view),
    )


def allocatable(node_capacity: Mapping[str, int], node_overhead: Overhead) -> dict[str, int]:
    """Capacity minus overhead per resource, floored at zero."""
    total = node_overhead.total()
    return {name: max(amount - total.get(name, 0), 0) for name, amount in node_capacity.items()}
