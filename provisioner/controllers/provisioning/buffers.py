"""CapacityBuffers (``autoscaling.x-k8s.io/v1beta1``) as virtual pods — pure.

A buffer keeps room for ``n`` chunks of one pod shape. :func:`resolve` reads one buffer
against the objects it names (a PodTemplate, or a Deployment/ReplicaSet/StatefulSet whose
``spec.replicas`` is what its scale subresource reports) and says how many chunks it wants,
with the status conditions of the reference (``ReadyForProvisioning``, ``LimitedByQuotas``);
:func:`buffer_pods` turns every buffer into virtual pods, annotated as Karpenter's fake pods
(``karpenter.sh/capacity-buffer-fake-pod``). They never reach the API server: the provisioner
plans them with the real pods (so the room is bought), disruption counts them as pods needing
room (so the room is not consolidated away), and the real scheduler, which does not see them,
puts real pods into the room at once.

Chunks: ``replicas``; with a ``scalableRef``, ``percentage`` of its replicas rounded up (at
least 1), the larger of the two when both are set; ``limits`` caps their total requests (and
alone sets how many fit).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from provisioner.apis import labels as wk
from provisioner.apis.base import parse_object
from provisioner.apis.core import Pod
from provisioner.apis.errors import ApiValidationError
from provisioner.scheduling.quantity import QuantityError
from provisioner.scheduling.resources import parse_resource_list, requests_of

__all__ = [
    "ACTIVE_CAPACITY",
    "BUFFER_KIND",
    "CONDITION_LIMITED_BY_QUOTAS",
    "CONDITION_PROVISIONING",
    "CONDITION_READY_FOR_PROVISIONING",
    "SCALABLE_KINDS",
    "BufferCondition",
    "Resolution",
    "buffer_pods",
    "is_buffer_pod",
    "resolve",
    "resolve_all",
]

BUFFER_KIND: Final = "CapacityBuffer"
ACTIVE_CAPACITY: Final = "buffer.x-k8s.io/active-capacity"
"""The only provisioning strategy (the default): keep the room with placeholder pods."""
SCALABLE_KINDS: Final = frozenset({"Deployment", "ReplicaSet", "StatefulSet"})
CONDITION_READY_FOR_PROVISIONING: Final = "ReadyForProvisioning"
CONDITION_LIMITED_BY_QUOTAS: Final = "LimitedByQuotas"
CONDITION_PROVISIONING: Final = "Provisioning"

_Lookup = Mapping[tuple[str, str, str], Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class BufferCondition:
    """One status condition (``type``, ``status``, ``reason``, ``message``)."""

    type: str
    status: str
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Resolution:
    """What one CapacityBuffer asks for.

    Attributes:
        namespace: the buffer's namespace.
        name: the buffer's name.
        generation: its ``metadata.generation``.
        template_name: the PodTemplate (or workload) the chunks are shaped by.
        template_generation: that object's ``metadata.generation``.
        strategy: ``spec.provisioningStrategy``.
        chunks: how many virtual pods to keep room for (0 when not ready).
        template: the chunk's pod (``metadata`` and ``spec``), None when not ready.
        conditions: ``ReadyForProvisioning`` and ``LimitedByQuotas``.
    """

    namespace: str
    name: str
    generation: int
    template_name: str
    template_generation: int
    strategy: str
    chunks: int
    template: Mapping[str, Any] | None
    conditions: tuple[BufferCondition, ...] = field(default=())

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _index(objects: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str, str], Mapping[str, Any]]:
    """PodTemplates and scalable workloads by ``(kind, namespace, name)``."""
    found: dict[tuple[str, str, str], Mapping[str, Any]] = {}
    for obj in objects:
        kind = str(obj.get("kind") or "")
        if kind == "PodTemplate" or kind in SCALABLE_KINDS:
            meta = _meta(obj)
            found[(kind, str(meta.get("namespace") or "default"), str(meta.get("name") or ""))] = (
                obj
            )
    return found


def _not_ready(base: Resolution, reason: str, message: str) -> Resolution:
    cond = BufferCondition(CONDITION_READY_FOR_PROVISIONING, "False", reason, message)
    return Resolution(
        namespace=base.namespace,
        name=base.name,
        generation=base.generation,
        template_name=base.template_name,
        template_generation=base.template_generation,
        strategy=base.strategy,
        chunks=0,
        template=None,
        conditions=(cond,),
    )


def _int_field(spec: Mapping[str, Any], name: str) -> int | None:
    value = spec.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"spec.{name}: must be a non-negative integer, got {value!r}")
    return value


def resolve(buffer: Mapping[str, Any], objects: _Lookup) -> Resolution:  # noqa: C901, PLR0911, PLR0912, PLR0915
    """How many chunks of which pod ``buffer`` asks for, with its conditions.

    ``objects`` holds the PodTemplates and workloads by ``(kind, namespace, name)``. A buffer
    that cannot be read gets ``ReadyForProvisioning=False`` naming the field; it asks for
    nothing.
    """
    meta = _meta(buffer)
    namespace = str(meta.get("namespace") or "default")
    raw_spec = buffer.get("spec")
    spec: Mapping[str, Any] = raw_spec if isinstance(raw_spec, Mapping) else {}
    base = Resolution(
        namespace=namespace,
        name=str(meta.get("name") or ""),
        generation=int(meta.get("generation") or 1),
        template_name="",
        template_generation=0,
        strategy=str(spec.get("provisioningStrategy") or ACTIVE_CAPACITY),
        chunks=0,
        template=None,
    )
    if base.strategy != ACTIVE_CAPACITY:
        return _not_ready(
            base,
            "UnsupportedProvisioningStrategy",
            f"spec.provisioningStrategy: {base.strategy!r} is not supported "
            f"(only {ACTIVE_CAPACITY!r})",
        )
    template_ref = spec.get("podTemplateRef")
    scalable_ref = spec.get("scalableRef")
    if (template_ref is None) == (scalable_ref is None):
        return _not_ready(
            base,
            "InvalidBufferSpec",
            "spec: exactly one of podTemplateRef and scalableRef must be set",
        )
    try:
        replicas = _int_field(spec, "replicas")
        percentage = _int_field(spec, "percentage")
        limits = parse_resource_list(spec.get("limits") or {}, field="spec.limits")
    except (ValueError, QuantityError) as error:
        return _not_ready(base, "InvalidBufferSpec", str(error))
    scale: int | None = None
    if isinstance(template_ref, Mapping):
        name = str(template_ref.get("name") or "")
        obj = objects.get(("PodTemplate", namespace, name))
        if obj is None:
            return _not_ready(
                base, "PodTemplateNotFound", f"spec.podTemplateRef: PodTemplate {name!r} not found"
            )
        raw_template = obj.get("template")
    elif isinstance(scalable_ref, Mapping):
        kind = str(scalable_ref.get("kind") or "")
        name = str(scalable_ref.get("name") or "")
        group = str(scalable_ref.get("apiGroup") or "apps")
        if kind not in SCALABLE_KINDS or group != "apps":
            return _not_ready(
                base,
                "UnsupportedScalableRef",
                f"spec.scalableRef: {group}/{kind} is not supported "
                "(apps Deployment, ReplicaSet or StatefulSet)",
            )
        obj = objects.get((kind, namespace, name))
        if obj is None:
            return _not_ready(
                base, "ScalableObjectNotFound", f"spec.scalableRef: {kind} {name!r} not found"
            )
        workload_spec = obj.get("spec") or {}
        raw_template = workload_spec.get("template")
        scale = int(workload_spec.get("replicas", 1) or 0)
    else:
        return _not_ready(
            base, "InvalidBufferSpec", "spec: podTemplateRef/scalableRef is not an object"
        )
    base = Resolution(
        namespace=namespace,
        name=base.name,
        generation=base.generation,
        template_name=name,
        template_generation=int(_meta(obj).get("generation") or 1),
        strategy=base.strategy,
        chunks=0,
        template=None,
    )
    if not isinstance(raw_template, Mapping):
        return _not_ready(base, "InvalidPodTemplate", f"{name}: the object has no pod template")
    try:
        pod = parse_object(
            Pod,
            {
                "metadata": raw_template.get("metadata") or {},
                "spec": raw_template.get("spec") or {},
            },
            kind="Pod",
        )
        per_chunk = requests_of(pod)
    except (ApiValidationError, QuantityError) as error:
        return _not_ready(base, "InvalidPodTemplate", f"{name}: {error}")
    wanted: list[int] = []
    if replicas is not None:
        wanted.append(replicas)
    if percentage is not None and scale is not None:
        wanted.append(max(1, math.ceil(percentage * scale / 100)))
    if not wanted and not limits:
        return _not_ready(
            base, "InvalidBufferSpec", "spec: replicas, percentage or limits must be set"
        )
    chunks = max(wanted) if wanted else None
    by_limits: int | None = None
    for key, limit in sorted(limits.items()):
        need = per_chunk.get(key, 0)
        if need > 0:
            fit = limit // need
            by_limits = fit if by_limits is None else min(by_limits, fit)
    conditions = [
        BufferCondition(
            CONDITION_READY_FOR_PROVISIONING,
            "True",
            "AttributesSetSuccessfully",
            "buffer is ready for provisioning",
        )
    ]
    if by_limits is not None and chunks is not None and by_limits < chunks:
        conditions.append(
            BufferCondition(
                CONDITION_LIMITED_BY_QUOTAS,
                "True",
                "LimitsExceeded",
                f"spec.limits allow {by_limits} of {chunks} chunks",
            )
        )
    else:
        conditions.append(BufferCondition(CONDITION_LIMITED_BY_QUOTAS, "False", "WithinLimits", ""))
    if by_limits is not None:
        chunks = by_limits if chunks is None else min(chunks, by_limits)
    return Resolution(
        namespace=namespace,
        name=base.name,
        generation=base.generation,
        template_name=name,
        template_generation=base.template_generation,
        strategy=base.strategy,
        chunks=chunks or 0,
        template={
            "metadata": raw_template.get("metadata") or {},
            "spec": raw_template.get("spec") or {},
        },
        conditions=tuple(conditions),
    )


def resolve_all(objects: Iterable[Mapping[str, Any]]) -> list[Resolution]:
    """Every CapacityBuffer among ``objects``, resolved against the others, by key."""
    items = list(objects)
    index = _index(items)
    buffers = [o for o in items if o.get("kind") == BUFFER_KIND]
    resolved = [resolve(b, index) for b in buffers]
    return sorted(resolved, key=lambda r: r.key)


def is_buffer_pod(pod: Pod) -> bool:
    """Whether ``pod`` is a virtual CapacityBuffer pod (never in the API)."""
    return pod.metadata.annotations.get(wk.ANNOTATION_CAPACITY_BUFFER_FAKE_POD) == "true"


def _virtual(resolution: Resolution, index: int) -> Pod:
    template = resolution.template or {}
    meta = dict(template.get("metadata") or {})
    spec = {k: v for k, v in dict(template.get("spec") or {}).items() if k != "nodeName"}
    annotations = dict(meta.get("annotations") or {})
    annotations.update(
        {
            wk.ANNOTATION_CAPACITY_BUFFER_FAKE_POD: "true",
            wk.ANNOTATION_CAPACITY_BUFFER_NAME: resolution.name,
            wk.ANNOTATION_CAPACITY_BUFFER_NAMESPACE: resolution.namespace,
        }
    )
    name = f"capacitybuffer-{resolution.name}-{index}"
    body = {
        "metadata": {
            "name": name,
            "namespace": resolution.namespace,
            "uid": f"capacitybuffer-{resolution.namespace}-{resolution.name}-{index}",
            "labels": dict(meta.get("labels") or {}),
            "annotations": annotations,
        },
        "spec": spec,
    }
    return parse_object(Pod, body, kind="Pod")


def buffer_pods(resolutions: Iterable[Resolution]) -> list[Pod]:
    """The virtual pods of every ready buffer, ``capacitybuffer-<buffer>-<i>``."""
    return [_virtual(r, i) for r in resolutions if r.template is not None for i in range(r.chunks)]
