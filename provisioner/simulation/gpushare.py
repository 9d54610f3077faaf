"""KAI's GPU sharing in the simulated cluster (``pod-groups.md`` §9).

A fractional pod (``gpu-fraction`` or ``gpu-memory``, no ``nvidia.com/gpu`` request) binds only to
a GPU node with room on ``gpu-fraction-num-devices`` devices: a device already shared whose
fractions leave room (fullest first, KAI's bin-packing), else a whole free device. Once bound it
carries the device in the label ``runai-gpu-group: <id>`` (``runai-gpu-group/<id>`` on each of
several devices) and ``received-resource-type: Fraction``.

Every device hosting fractions holds one **reservation pod**, as KAI creates them: namespace
``kai-resource-reservation``, name ``gpu-reservation-<node>-<5 chars>``, labels
``app: kai-resource-reservation`` and ``runai-gpu-group``, annotations
``karpenter.sh/do-not-disrupt: "true"`` and ``run.ai/reserve_for_gpu_index``, preset
``spec.nodeName``, ``nvidia.com/gpu: 1``, ``runtimeClassName: nvidia``. It is deleted when no
fraction is left on its device.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from provisioner.apis import labels as wk
from provisioner.apis.core import Pod
from provisioner.kube.protocol import JsonObject
from provisioner.podgroups import keys
from provisioner.podgroups.fractions import WHOLE_GPU_MILLI, FractionError, gpu_fraction_milli

__all__ = [
    "GPU_GROUP",
    "RECEIVED_RESOURCE_TYPE",
    "RESERVATION_NAMESPACE",
    "RESERVE_FOR_GPU_INDEX",
    "Devices",
    "asks_for_fraction",
    "device_groups",
    "fraction_on",
    "group_labels",
    "is_reservation",
    "reservation_body",
    "share_of",
]

GPU_GROUP: Final = "runai-gpu-group"
RECEIVED_RESOURCE_TYPE: Final = "received-resource-type"
RESERVATION_NAMESPACE: Final = "kai-resource-reservation"
RESERVE_FOR_GPU_INDEX: Final = "run.ai/reserve_for_gpu_index"
_MULTI_PREFIX: Final = f"{GPU_GROUP}/"
_SUFFIX_CHARS: Final = 5


def asks_for_fraction(pod: Mapping[str, Any]) -> bool:
    """Whether the pod carries KAI's ``gpu-fraction`` or ``gpu-memory`` annotation."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    return keys.KAI_GPU_FRACTION in annotations or keys.KAI_GPU_MEMORY in annotations


def fraction_on(model: Pod, node_labels: Mapping[str, str]) -> tuple[int, int] | None:
    """``(milli-GPU per device, devices)`` of a fractional pod on a node with these labels.

    ``gpu-memory`` is converted with the node's ``karpenter.k8s.aws/instance-gpu-memory``.

    Raises:
        FractionError: the annotations are invalid or ask for more memory than a device has.
    """
    value = node_labels.get(wk.LABEL_INSTANCE_GPU_MEMORY, "")
    memory = int(value) if value.isdigit() else None
    return gpu_fraction_milli(model, memory)


def device_groups(pod: Mapping[str, Any]) -> list[str]:
    """The device ids a bound fractional (or reservation) pod is on, from its labels."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    single = labels.get(GPU_GROUP)
    groups = [str(single)] if single else []
    groups += sorted(k.removeprefix(_MULTI_PREFIX) for k in labels if k.startswith(_MULTI_PREFIX))
    return groups


def group_labels(groups: Sequence[str]) -> dict[str, str]:
    """The labels KAI puts on a fractional pod bound to ``groups``."""
    if len(groups) == 1:
        return {GPU_GROUP: groups[0]}
    return {f"{_MULTI_PREFIX}{g}": g for g in groups}


def is_reservation(pod: Mapping[str, Any]) -> bool:
    """A KAI GPU reservation pod (by namespace or ``app`` label)."""
    metadata = pod.get("metadata") or {}
    return (
        metadata.get("namespace") in keys.KAI_RESERVATION_NAMESPACES
        or (metadata.get("labels") or {}).get(keys.APP) == keys.KAI_RESERVATION_APP
    )


def reservation_body(node: str, group: str, index: int) -> JsonObject:
    """The reservation pod KAI creates for device ``index`` (id ``group``) of ``node``."""
    suffix = hashlib.sha256(group.encode()).hexdigest()[:_SUFFIX_CHARS]
    gpu = {keys.NVIDIA_GPU: "1"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"gpu-reservation-{node}-{suffix}",
            "namespace": RESERVATION_NAMESPACE,
            "labels": {keys.APP: keys.KAI_RESERVATION_APP, GPU_GROUP: group},
            "annotations": {
                keys.DO_NOT_DISRUPT: "true",
                RESERVE_FOR_GPU_INDEX: str(index),
            },
        },
        "spec": {
            "nodeName": node,
            "runtimeClassName": "nvidia",
            "containers": [
                {
                    "name": "resource-reservation",
                    "image": "ghcr.io/nvidia/kai-scheduler/resource-reservation",
                    "resources": {"requests": dict(gpu), "limits": dict(gpu)},
                }
            ],
        },
    }


@dataclass(slots=True)
class Devices:
    """The shared devices of one node during a scheduling pass.

    ``used`` maps a device id to the milli-GPU its fractions take; ``whole_free`` counts the
    devices no pod uses.
    """

    node: str
    whole_free: int
    used: dict[str, int] = field(default_factory=dict)

    def copy(self) -> Devices:
        """An independent copy (to roll back a gang that does not fit)."""
        return Devices(self.node, self.whole_free, dict(self.used))

    def take(self, milli: int, count: int, *, seed: str) -> list[str] | None:
        """Place ``count`` shares of ``milli`` on distinct devices (None when they do not fit).

        Devices already shared come first, fullest first; a whole free device gets a new id
        derived from the node, ``seed`` (the pod's uid) and its position.
        """
        shared = sorted(
            (g for g, use in self.used.items() if use + milli <= WHOLE_GPU_MILLI),
            key=lambda g: (-self.used[g], g),
        )
        chosen = shared[:count]
        fresh = count - len(chosen)
        if fresh > self.whole_free:
            return None
        for position in range(fresh):
            group = hashlib.sha256(f"{self.node}/{seed}/{position}".encode()).hexdigest()[:12]
            self.used[group] = 0
            chosen.append(group)
        self.whole_free -= fresh
        for group in chosen:
            self.used[group] += milli
        return chosen


def share_of(model: Pod | None, labels: Mapping[str, str]) -> int:
    """The share a bound fractional pod takes on each of its devices (a whole one if invalid)."""
    if model is None:
        return WHOLE_GPU_MILLI
    try:
        fraction = fraction_on(model, labels)
    except FractionError:
        return WHOLE_GPU_MILLI
    return fraction[0] if fraction is not None else 0
