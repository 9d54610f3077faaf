"""Resource lists as integer milli-units, and the Kubernetes effective pod request.

A resource list is a ``Mapping[str, int]`` from resource name (``cpu``, ``memory``,
``nvidia.com/gpu``, ``pods``...) to milli-units. A missing key means zero. Every function here
returns a new ``dict`` and never mutates its arguments.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final, TypeAlias

from provisioner.apis.core import Container, Pod
from provisioner.scheduling.quantity import MILLI, QuantityError, format_quantity, parse_quantity

__all__ = [
    "BINARY_RESOURCES",
    "ResourceList",
    "ResourceListError",
    "add",
    "exceeded",
    "fits",
    "format_resource_list",
    "is_binary_resource",
    "is_equal",
    "is_zero",
    "limits_of",
    "max_of",
    "parse_resource_list",
    "pod_requests",
    "requests_of",
    "subtract",
    "with_pod_slot",
]

ResourceList: TypeAlias = Mapping[str, int]

#: Resources whose canonical quantities use binary suffixes (``Ki`` .. ``Ei``).
BINARY_RESOURCES: Final = frozenset({"memory", "ephemeral-storage", "storage"})
_HUGEPAGES_PREFIX: Final = "hugepages-"
_PODS: Final = "pods"
_RESTART_ALWAYS: Final = "Always"


class ResourceListError(QuantityError):
    """A resource list with a value that is not a Kubernetes quantity; names the resource."""


def is_binary_resource(name: str) -> bool:
    """Whether ``name`` is rendered with binary suffixes (memory, storage, hugepages)."""
    return name in BINARY_RESOURCES or name.startswith(_HUGEPAGES_PREFIX)


def parse_resource_list(
    mapping: Mapping[str, str | int | float], *, field: str = ""
) -> dict[str, int]:
    """Parse a Kubernetes ResourceList (``{"cpu": "500m", "memory": "1Gi"}``) into milli-units.

    Args:
        mapping: resource name to quantity string or number.
        field: path of the list in its object (``spec.containers[0].resources.requests``), used
            in error messages.

    Raises:
        ResourceListError: naming the field and resource when a value is not a quantity.
    """
    parsed: dict[str, int] = {}
    for name, value in mapping.items():
        try:
            parsed[name] = parse_quantity(value)
        except QuantityError as error:
            where = f"{field}.{name}" if field else name
            raise ResourceListError(f"resource {name!r} at {where}: {error}") from error
    return parsed


def format_resource_list(resources: ResourceList) -> dict[str, str]:
    """Render milli-units as canonical quantity strings, keys sorted.

    Memory, storage and hugepages use binary suffixes; cpu and everything else decimal ones or
    milli-units.
    """
    return {
        name: format_quantity(resources[name], binary=is_binary_resource(name))
        for name in sorted(resources)
    }


def add(*lists: ResourceList) -> dict[str, int]:
    """Sum resource lists key by key (missing keys are zero)."""
    total: dict[str, int] = {}
    for resources in lists:
        for name, milli in resources.items():
            total[name] = total.get(name, 0) + milli
    return total


def subtract(a: ResourceList, b: ResourceList) -> dict[str, int]:
    """``a - b`` key by key over the union of keys; results may be negative."""
    result = dict(a)
    for name, milli in b.items():
        result[name] = result.get(name, 0) - milli
    return result


def max_of(a: ResourceList, b: ResourceList) -> dict[str, int]:
    """The key-by-key maximum of two resource lists (missing keys are zero)."""
    result = dict(a)
    for name, milli in b.items():
        result[name] = max(result.get(name, 0), milli)
    return result


def is_zero(resources: ResourceList) -> bool:
    """Whether every quantity in ``resources`` is zero (an empty list is zero)."""
    return all(milli == 0 for milli in resources.values())


def is_equal(a: ResourceList, b: ResourceList) -> bool:
    """Whether two resource lists are equal, a missing key counting as zero."""
    return all(a.get(name, 0) == b.get(name, 0) for name in a.keys() | b.keys())


def exceeded(requests: ResourceList, available: ResourceList) -> list[str]:
    """Names (sorted) of the positive requests larger than what is available (missing = 0)."""
    return sorted(
        name for name, milli in requests.items() if milli > 0 and milli > available.get(name, 0)
    )


def fits(requests: ResourceList, available: ResourceList) -> bool:
    """Whether every positive request is at most what is available (missing = 0)."""
    # the same test as `exceeded`, without building and sorting the list
    return all(milli <= 0 or milli <= available.get(name, 0) for name, milli in requests.items())


def with_pod_slot(resources: ResourceList) -> dict[str, int]:
    """Add the one ``pods`` slot that every pod consumes, as Karpenter does for its requests."""
    return add(resources, {_PODS: MILLI})


def pod_requests(
    containers: Iterable[Mapping[str, object]],
    init_containers: Iterable[Mapping[str, object]] = (),
    overhead: Mapping[str, str | int | float] | None = None,
) -> dict[str, int]:
    """The effective request of a pod, as the scheduler and Karpenter compute it.

    Containers are plain Kubernetes JSON dicts; only ``resources.requests``,
    ``resources.limits``, ``restartPolicy`` and ``name`` are read. A container's request for a
    resource defaults to its limit when only the limit is set (API server defaulting).

    The result is the larger of (a) all app containers plus all restartable ("sidecar") init
    containers and (b) for each init container, in order, its own request plus the sidecars
    started before it (for a sidecar: all sidecars so far), then plus ``overhead``. The ``pods``
    slot is not included; see `with_pod_slot`.

    Raises:
        ResourceListError: naming the container and resource on a malformed quantity.
    """
    return _effective_requests(
        (_container_requests(c, f"containers[{i}]") for i, c in enumerate(containers)),
        (
            (_container_requests(c, f"initContainers[{i}]"), c.get("restartPolicy"))
            for i, c in enumerate(init_containers)
        ),
        overhead,
    )


def requests_of(pod: Pod) -> dict[str, int]:
    """`pod_requests` of a pod model (the one rule every layer counts a pod's requests by).

    Kubernetes' effective request: a limit stands in for a missing request, sidecar and other init
    containers count as the scheduler counts them, and the overhead is added.

    Raises:
        ResourceListError: naming the container and resource on a malformed quantity.
    """
    spec = pod.spec
    return _effective_requests(
        (_model_requests(c, f"containers[{i}]") for i, c in enumerate(spec.containers)),
        (
            (_model_requests(c, f"initContainers[{i}]"), c.restart_policy)
            for i, c in enumerate(spec.init_containers)
        ),
        spec.overhead,
    )


def limits_of(pod: Pod) -> dict[str, int]:
    """A pod model's effective limits, by the same rule as `requests_of` (no defaulting).

    The overhead counts only where the pod has limits at all, as Kubernetes adds it.

    Raises:
        ResourceListError: naming the container and resource on a malformed quantity.
    """
    spec = pod.spec
    limits = _effective_requests(
        (
            parse_resource_list(c.resources.limits, field=f"containers[{i}].limits")
            for i, c in enumerate(spec.containers)
        ),
        (
            (
                parse_resource_list(c.resources.limits, field=f"initContainers[{i}].limits"),
                c.restart_policy,
            )
            for i, c in enumerate(spec.init_containers)
        ),
        None,
    )
    if limits and spec.overhead:
        limits = add(limits, parse_resource_list(spec.overhead, field="overhead"))
    return limits


def _effective_requests(
    containers: Iterable[dict[str, int]],
    init_containers: Iterable[tuple[dict[str, int], object]],
    overhead: Mapping[str, str | int | float] | None,
) -> dict[str, int]:
    running: dict[str, int] = {}
    for own in containers:
        running = add(running, own)
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for own, restart_policy in init_containers:
        if restart_policy == _RESTART_ALWAYS:
            running = add(running, own)
            sidecars = add(sidecars, own)
            during = sidecars
        else:
            during = add(own, sidecars)
        init_peak = max_of(init_peak, during)
    effective = max_of(running, init_peak)
    if overhead:
        effective = add(effective, parse_resource_list(overhead, field="overhead"))
    return effective


def _model_requests(container: Container, field: str) -> dict[str, int]:
    resources = container.resources
    requests = parse_resource_list(resources.requests, field=f"{field}.resources.requests")
    limits = parse_resource_list(resources.limits, field=f"{field}.resources.limits")
    return {**limits, **requests}


def _container_requests(container: Mapping[str, object], field: str) -> dict[str, int]:
    resources = container.get("resources")
    if resources is None:
        return {}
    if not isinstance(resources, Mapping):
        raise ResourceListError(f"{field}.resources must be an object, got {resources!r}")
    requests = _resource_mapping(resources.get("requests"), f"{field}.resources.requests")
    limits = _resource_mapping(resources.get("limits"), f"{field}.resources.limits")
    return {**limits, **requests}


def _resource_mapping(value: object, field: str) -> dict[str, int]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ResourceListError(f"{field} must be an object, got {value!r}")
    for name, quantity in value.items():
        if not isinstance(name, str) or not isinstance(quantity, str | int | float):
            raise ResourceListError(f"resource {name!r} at {field}.{name}: not a quantity")
    return parse_resource_list(value, field=field)
