"""PodDisruptionBudget arithmetic for evictions (pure; the `policy/v1` eviction rules).

The API server checks a PDB's `status.disruptionsAllowed`, which the disruption controller
keeps up to date; without that controller, the budget is computed live from the pods: pods
matching the selector are expected, those Ready and not terminating are healthy.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, Final

from provisioner.kube.errors import ServerError, TooManyRequestsError
from provisioner.kube.selector import from_label_selector

PDB_VIOLATION_MESSAGE: Final = "Cannot evict pod as it would violate the pod's disruption budget."


def is_pod_healthy(pod: Mapping[str, Any]) -> bool:
    """Whether a pod counts as healthy for a budget: Ready and not terminating."""
    if pod.get("metadata", {}).get("deletionTimestamp"):
        return False
    conditions = pod.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _scaled(value: int | str, total: int) -> int:
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(int(value[:-1]) * total / 100)
    return int(value)


def matching_pods(
    pdb: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]
) -> list[Mapping[str, Any]]:
    """The pods of the PDB's namespace its selector selects."""
    namespace = pdb.get("metadata", {}).get("namespace")
    selector = from_label_selector(pdb.get("spec", {}).get("selector"))
    return [
        pod
        for pod in pods
        if pod.get("metadata", {}).get("namespace") == namespace
        and selector.matches(pod.get("metadata", {}).get("labels"))
    ]


def desired_healthy(pdb: Mapping[str, Any], expected: int) -> int:
    """How many matching pods must stay healthy (`minAvailable` or `maxUnavailable`)."""
    spec = pdb.get("spec", {})
    if spec.get("minAvailable") is not None:
        return _scaled(spec["minAvailable"], expected)
    if spec.get("maxUnavailable") is not None:
        return max(0, expected - _scaled(spec["maxUnavailable"], expected))
    return expected


def disruptions_allowed(pdb: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> int:
    """`status.disruptionsAllowed` computed from the pods."""
    selected = matching_pods(pdb, pods)
    healthy = sum(1 for pod in selected if is_pod_healthy(pod))
    return max(0, healthy - desired_healthy(pdb, len(selected)))


def check_eviction(
    pod: Mapping[str, Any],
    pdbs: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
) -> None:
    """Raise if the API would refuse to evict `pod` now.

    A terminating pod may always be evicted; an unhealthy pod may be evicted while its budget
    is met (`unhealthyPodEvictionPolicy: IfHealthyBudget`); a healthy one only when the
    budget allows a disruption.

    Raises:
        TooManyRequestsError: the eviction would violate a budget (HTTP 429).
        ServerError: more than one budget selects the pod (HTTP 500, as the API answers).
    """
    if pod.get("metadata", {}).get("deletionTimestamp"):
        return
    labels = pod.get("metadata", {}).get("labels")
    namespace = pod.get("metadata", {}).get("namespace")
    covering = [
        pdb
        for pdb in pdbs
        if pdb.get("metadata", {}).get("namespace") == namespace
        and from_label_selector(pdb.get("spec", {}).get("selector")).matches(labels)
    ]
    if not covering:
        return
    all_pods = list(pods)  # read only when a budget covers the pod
    if len(covering) > 1:
        raise ServerError(
            "This pod has more than one PodDisruptionBudget, which the eviction subresource "
            "does not support.",
            code=500,
            reason="InternalError",
        )
    pdb = covering[0]
    selected = matching_pods(pdb, all_pods)
    healthy = sum(1 for candidate in selected if is_pod_healthy(candidate))
    desired = desired_healthy(pdb, len(selected))
    allowed = healthy >= desired if not is_pod_healthy(pod) else healthy - desired >= 1
    if not allowed:
        name = pdb.get("metadata", {}).get("name", "")
        raise TooManyRequestsError(
            PDB_VIOLATION_MESSAGE,
            reason="TooManyRequests",
            details={"causes": [{"reason": "DisruptionBudget", "message": name}]},
        )
