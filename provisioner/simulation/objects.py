"""Small readers of wire-shape objects shared by the simulated cluster components."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from provisioner.kube.event import format_time
from provisioner.kube.protocol import JsonObject

__all__ = [
    "condition",
    "condition_true",
    "is_deleting",
    "labels_of",
    "name_of",
    "namespace_of",
    "nodepool_manifest",
    "pod_key",
    "requirement",
    "set_condition",
    "uid_of",
]


def name_of(obj: Mapping[str, Any]) -> str:
    """``metadata.name``."""
    return str((obj.get("metadata") or {}).get("name") or "")


def namespace_of(obj: Mapping[str, Any]) -> str:
    """``metadata.namespace`` ("" for cluster-scoped objects)."""
    return str((obj.get("metadata") or {}).get("namespace") or "")


def uid_of(obj: Mapping[str, Any]) -> str:
    """``metadata.uid``."""
    return str((obj.get("metadata") or {}).get("uid") or "")


def labels_of(obj: Mapping[str, Any]) -> dict[str, str]:
    """``metadata.labels`` (a copy; empty when absent)."""
    return dict((obj.get("metadata") or {}).get("labels") or {})


def pod_key(obj: Mapping[str, Any]) -> str:
    """``namespace/name``."""
    return f"{namespace_of(obj) or 'default'}/{name_of(obj)}"


def is_deleting(obj: Mapping[str, Any]) -> bool:
    """Whether ``metadata.deletionTimestamp`` is set."""
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    """The ``status.conditions`` entry of type ``kind``."""
    for entry in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(entry, Mapping) and entry.get("type") == kind:
            return entry
    return None


def condition_true(obj: Mapping[str, Any], kind: str) -> bool:
    """Whether the condition ``kind`` has status ``True``."""
    found = condition(obj, kind)
    return found is not None and found.get("status") == "True"


def set_condition(
    conditions: list[JsonObject] | None,
    kind: str,
    status: str,
    *,
    now: Any,
    reason: str = "",
    message: str = "",
) -> list[JsonObject]:
    """``conditions`` with ``kind`` set (its transition time kept when the status is unchanged)."""
    result = [dict(c) for c in conditions or [] if c.get("type") != kind]
    previous = next((c for c in conditions or [] if c.get("type") == kind), None)
    entry: JsonObject = {"type": kind, "status": status}
    if previous is not None and previous.get("status") == status:
        entry["lastTransitionTime"] = previous.get("lastTransitionTime") or format_time(now)
    else:
        entry["lastTransitionTime"] = format_time(now)
    if reason:
        entry["reason"] = reason
    if message:
        entry["message"] = message
    result.append(entry)
    return result


def requirement(key: str, operator: str, *values: str) -> dict[str, Any]:
    """One NodeSelectorRequirement of a NodePool (``key In values``)."""
    return {"key": key, "operator": operator, "values": list(values)}


def nodepool_manifest(
    name: str,
    requirements: list[dict[str, Any]] | None = None,
    *,
    template_spec: Mapping[str, Any] | None = None,
    metadata: Mapping[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A ``karpenter.sh/v1`` NodePool on the ``default`` EC2NodeClass.

    ``template_spec`` adds to ``spec.template.spec`` (taints, ...), ``metadata`` to the
    NodePool's metadata; other keywords are ``spec`` fields (``limits``, ``disruption``, ...).
    """
    template: dict[str, Any] = {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        "requirements": requirements or [],
        **(template_spec or {}),
    }
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name, **(metadata or {})},
        "spec": {"template": {"spec": template}, **spec},
    }
