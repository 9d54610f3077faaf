"""KAI fractional GPUs (``pod-groups.md`` §9): annotations to milli-GPU demand, scaling pods.

A fractional pod asks for ``gpu-fraction`` of one device (``"0.5"``) or ``gpu-memory`` MiB of one
device, on each of ``gpu-fraction-num-devices`` devices (default 1), and has no ``nvidia.com/gpu``
request. Jointer's demand is the fraction in milli-units of one GPU (1..1000) times the devices;
fractions assigned to one physical GPU sum to at most 1000 (``plan.md`` rule 8).

``gpu-memory`` is converted with the device memory of the candidate instance type (for example
its ``karpenter.k8s.aws/instance-gpu-memory``). When the device memory is unknown the pod is
counted as a **whole device** (1000): the choice that never packs two memory-sized requests onto
a GPU that might not hold them.
"""

from __future__ import annotations

import math
from decimal import Decimal, InvalidOperation
from typing import Final

from provisioner.apis.core import Pod
from provisioner.podgroups import keys
from provisioner.scheduling.quantity import QuantityError, parse_quantity

__all__ = [
    "WHOLE_GPU_MILLI",
    "FractionError",
    "gpu_fraction_milli",
    "gpu_memory_mib",
    "is_scaling_pod",
    "scaling_pod_original",
]

WHOLE_GPU_MILLI: Final = 1000
_MIB: Final = 2**20
_MILLI_PER_UNIT: Final = 1000


class FractionError(ValueError):
    """A pod whose GPU-sharing annotations are invalid (names the pod and the annotation)."""

    def __init__(self, pod: str, annotation: str, value: str, problem: str) -> None:
        self.pod = pod
        self.annotation = annotation
        self.value = value
        self.problem = problem
        super().__init__(str(self))

    def __str__(self) -> str:
        return f"pod {self.pod}: annotation {self.annotation}={self.value!r}: {self.problem}"


def _decimal(pod: Pod, annotation: str, value: str) -> Decimal:
    try:
        number = Decimal(value.strip())
    except InvalidOperation as exc:
        raise FractionError(pod.key, annotation, value, "not a number") from exc
    if not number.is_finite():
        raise FractionError(pod.key, annotation, value, "not a number")
    return number


def _from_fraction(pod: Pod, value: str) -> int:
    fraction = _decimal(pod, keys.KAI_GPU_FRACTION, value)
    if fraction <= 0 or fraction > 1:
        raise FractionError(pod.key, keys.KAI_GPU_FRACTION, value, "must be > 0 and <= 1")
    return max(1, math.ceil(fraction * WHOLE_GPU_MILLI))


def _memory_mib(pod: Pod, value: str) -> Decimal:
    text = value.strip()
    try:
        number = Decimal(text)
    except InvalidOperation:
        # A quantity with a unit ("4Gi", "2000Mi") is in bytes.
        try:
            milli_bytes = parse_quantity(text)
        except QuantityError as exc:
            raise FractionError(pod.key, keys.KAI_GPU_MEMORY, value, "not a number") from exc
        number = Decimal(milli_bytes) / _MILLI_PER_UNIT / _MIB
    if not number.is_finite():
        raise FractionError(pod.key, keys.KAI_GPU_MEMORY, value, "not a number")
    if number <= 0:
        raise FractionError(pod.key, keys.KAI_GPU_MEMORY, value, "must be > 0 MiB")
    return number


def _from_memory(pod: Pod, value: str, device_memory_mib: int | None) -> int:
    memory = _memory_mib(pod, value)
    if device_memory_mib is None or device_memory_mib <= 0:
        return WHOLE_GPU_MILLI
    if memory > device_memory_mib:
        raise FractionError(
            pod.key,
            keys.KAI_GPU_MEMORY,
            value,
            f"exceeds the device memory of {device_memory_mib} MiB",
        )
    return max(1, math.ceil(memory * WHOLE_GPU_MILLI / device_memory_mib))


def _num_devices(pod: Pod) -> int:
    value = pod.metadata.annotations.get(keys.KAI_GPU_FRACTION_NUM_DEVICES)
    if value is None:
        return 1
    try:
        devices = int(value.strip())
    except ValueError as exc:
        raise FractionError(
            pod.key, keys.KAI_GPU_FRACTION_NUM_DEVICES, value, "not a whole number"
        ) from exc
    if devices < 1:
        raise FractionError(pod.key, keys.KAI_GPU_FRACTION_NUM_DEVICES, value, "must be >= 1")
    return devices


def gpu_fraction_milli(pod: Pod, device_memory_mib: int | None) -> tuple[int, int] | None:
    """Return ``(milli-GPU per device, number of devices)`` for a KAI fractional pod.

    Args:
        pod: the pod.
        device_memory_mib: memory of one GPU of the candidate instance type, or ``None`` when
            unknown (a ``gpu-memory`` pod then counts as a whole device).

    Returns:
        ``None`` when the pod asks for no fraction (neither ``gpu-fraction`` nor ``gpu-memory``).
        Fractions are rounded up to the next milli-GPU.

    Raises:
        FractionError: a value is not a number, a fraction is not in (0, 1], ``gpu-memory`` is not
            positive or exceeds the device memory, the device count is not a positive integer, or
            both ``gpu-fraction`` and ``gpu-memory`` are set.
    """
    annotations = pod.metadata.annotations
    fraction = annotations.get(keys.KAI_GPU_FRACTION)
    memory = annotations.get(keys.KAI_GPU_MEMORY)
    if fraction is None and memory is None:
        return None
    if fraction is not None and memory is not None:
        raise FractionError(
            pod.key, keys.KAI_GPU_MEMORY, memory, f"cannot be combined with {keys.KAI_GPU_FRACTION}"
        )
    milli = (
        _from_fraction(pod, fraction)
        if fraction is not None
        else _from_memory(pod, memory or "", device_memory_mib)
    )
    return milli, _num_devices(pod)


def gpu_memory_mib(pod: Pod) -> int | None:
    """The device memory a ``gpu-memory`` pod asks for, in whole MiB (rounded up), else None.

    Raises:
        FractionError: the value is not a positive number or quantity.
    """
    value = pod.metadata.annotations.get(keys.KAI_GPU_MEMORY)
    if value is None or keys.KAI_GPU_FRACTION in pod.metadata.annotations:
        return None
    return math.ceil(_memory_mib(pod, value))


def is_scaling_pod(pod: Pod) -> bool:
    """Whether the pod is a KAI node-scale-adjuster scaling pod (a stand-in for a fraction)."""
    return (
        pod.metadata.namespace == keys.KAI_SCALE_ADJUST_NAMESPACE
        and pod.metadata.labels.get(keys.APP) == keys.KAI_SCALING_POD_APP
    )


def scaling_pod_original(pod: Pod) -> str | None:
    """Return ``namespace/name`` of the fractional pod a scaling pod stands for, else ``None``.

    The planner drops a scaling pod whose original is among the pending pods (its demand is
    counted once, from the original's fraction), and keeps it otherwise.
    """
    if not is_scaling_pod(pod):
        return None
    labels = pod.metadata.labels
    name = labels.get(keys.KAI_SHARED_GPU_POD_NAME)
    namespace = labels.get(keys.KAI_SHARED_GPU_POD_NAMESPACE)
    if not name or not namespace:
        return None
    return f"{namespace}/{name}"
