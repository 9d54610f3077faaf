"""Builders of pods and pod-group objects as raw manifests (dicts) and as parsed pods."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from provisioner.apis.core import Pod
from provisioner.podgroups import ProvisioningContext, build_context

Manifest = dict[str, Any]

UNSCHEDULABLE = "Unschedulable"
NO_STATUS = None


def pod_manifest(
    name: str = "p",
    namespace: str = "default",
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    scheduler_name: str = "",
    gates: Iterable[str] = (),
    node_name: str = "",
    nominated: str = "",
    owner: tuple[str, str, str] | None = None,
    reason: str | None = UNSCHEDULABLE,
    message: str = "",
    phase: str = "Pending",
    requests: Mapping[str, str] | None = None,
    priority_class: str = "",
    priority: int | None = None,
    start_time: str | None = None,
    spec: Mapping[str, Any] | None = None,
) -> Manifest:
    """A pod manifest; ``reason=None`` leaves out ``status`` (as in a plan input).

    ``owner`` is ``(apiVersion, kind, name)``, a controller reference with uid ``<name>-uid``.
    """
    metadata: Manifest = {
        "name": name,
        "namespace": namespace,
        "uid": f"{name}-uid",
        "labels": dict(labels or {}),
        "annotations": dict(annotations or {}),
    }
    if owner is not None:
        api_version, kind, owner_name = owner
        metadata["ownerReferences"] = [
            {
                "apiVersion": api_version,
                "kind": kind,
                "name": owner_name,
                "uid": f"{owner_name}-uid",
                "controller": True,
            }
        ]
    pod_spec: Manifest = {
        "containers": [{"name": "main", "resources": {"requests": dict(requests or {})}}],
    }
    if scheduler_name:
        pod_spec["schedulerName"] = scheduler_name
    if gates:
        pod_spec["schedulingGates"] = [{"name": g} for g in gates]
    if node_name:
        pod_spec["nodeName"] = node_name
    if priority_class:
        pod_spec["priorityClassName"] = priority_class
    if priority is not None:
        pod_spec["priority"] = priority
    pod_spec.update(spec or {})
    manifest: Manifest = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec}
    if reason is not None or nominated or start_time or phase != "Pending":
        status: Manifest = {"phase": phase}
        if reason is not None:
            status["conditions"] = [
                {"type": "PodScheduled", "status": "False", "reason": reason, "message": message}
            ]
        if nominated:
            status["nominatedNodeName"] = nominated
        if start_time:
            status["startTime"] = start_time
        manifest["status"] = status
    return manifest


def pod(name: str = "p", namespace: str = "default", **kwargs: Any) -> Pod:
    """A parsed pod (see ``pod_manifest``)."""
    return Pod.model_validate(pod_manifest(name, namespace, **kwargs))


def pods(prefix: str, count: int, namespace: str = "default", **kwargs: Any) -> list[Manifest]:
    """``count`` pod manifests named ``<prefix>-<i>``."""
    return [pod_manifest(f"{prefix}-{i}", namespace, **kwargs) for i in range(count)]


def parse(manifest: Manifest) -> Pod:
    """Parse one pod manifest."""
    return Pod.model_validate(manifest)


def context(*objects: Manifest | Iterable[Manifest]) -> ProvisioningContext:
    """``build_context`` over manifests and lists of manifests."""
    flat: list[Manifest] = []
    for obj in objects:
        if isinstance(obj, dict):
            flat.append(obj)
        else:
            flat.extend(obj)
    return build_context(flat)


def _object(  # noqa: PLR0917 - a private helper mirroring the manifest layout
    api_version: str,
    kind: str,
    name: str,
    namespace: str | None,
    spec: Mapping[str, Any] | None = None,
    status: Mapping[str, Any] | None = None,
    annotations: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
) -> Manifest:
    metadata: Manifest = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    if annotations:
        metadata["annotations"] = dict(annotations)
    if labels:
        metadata["labels"] = dict(labels)
    obj: Manifest = {"apiVersion": api_version, "kind": kind, "metadata": metadata}
    if spec is not None:
        obj["spec"] = dict(spec)
    if status is not None:
        obj["status"] = dict(status)
    return obj


def kai_pod_group(
    name: str,
    namespace: str = "default",
    *,
    min_member: int | None = None,
    queue: str = "",
    reasons: Iterable[tuple[str, str]] = (),
    **spec: Any,
) -> Manifest:
    """A KAI PodGroup; ``reasons`` are ``(reason, message)`` of one scheduling condition."""
    body: Manifest = dict(spec)
    if min_member is not None:
        body["minMember"] = min_member
    if queue:
        body["queue"] = queue
    reason_list = [{"reason": r, "message": m} for r, m in reasons]
    status = (
        {
            "schedulingConditions": [
                {
                    "type": "UnschedulableOnNodePool",
                    "status": "True",
                    "nodePool": "default",
                    "reason": "Unschedulable",
                    "reasons": reason_list,
                }
            ]
        }
        if reason_list
        else None
    )
    annotations = body.pop("annotations", None)
    return _object(
        "scheduling.run.ai/v2alpha2", "PodGroup", name, namespace, body, status, annotations
    )


def kai_queue(
    name: str,
    *,
    gpu_quota: float | None = None,
    gpu_limit: float | None = None,
    parent: str = "",
    allocated_gpu: str | None = None,
    allocated_non_preemptible_gpu: str | None = None,
) -> Manifest:
    """A KAI Queue with GPU quota and limit."""
    gpu: Manifest = {}
    if gpu_quota is not None:
        gpu["quota"] = gpu_quota
    if gpu_limit is not None:
        gpu["limit"] = gpu_limit
    spec: Manifest = {"resources": {"gpu": gpu}}
    if parent:
        spec["parentQueue"] = parent
    status: Manifest = {}
    if allocated_gpu is not None:
        status["allocated"] = {"nvidia.com/gpu": allocated_gpu}
    if allocated_non_preemptible_gpu is not None:
        status["allocatedNonPreemptible"] = {"nvidia.com/gpu": allocated_non_preemptible_gpu}
    return _object("scheduling.run.ai/v2", "Queue", name, None, spec, status)


def volcano_pod_group(
    name: str,
    namespace: str = "default",
    *,
    min_member: int = 1,
    phase: str | None = None,
    queue: str = "default",
    annotations: Mapping[str, str] | None = None,
) -> Manifest:
    """A Volcano PodGroup."""
    status = {"phase": phase} if phase is not None else None
    return _object(
        "scheduling.volcano.sh/v1beta1",
        "PodGroup",
        name,
        namespace,
        {"minMember": min_member, "queue": queue},
        status,
        annotations,
    )


def volcano_queue(name: str, state: str = "Open") -> Manifest:
    """A Volcano Queue."""
    return _object("scheduling.volcano.sh/v1beta1", "Queue", name, None, {}, {"state": state})


def coscheduling_pod_group(name: str, namespace: str = "default", *, min_member: int) -> Manifest:
    """A scheduler-plugins PodGroup."""
    return _object(
        "scheduling.x-k8s.io/v1alpha1", "PodGroup", name, namespace, {"minMember": min_member}
    )


def elastic_quota(
    name: str, namespace: str, *, max_: Mapping[str, str], used: Mapping[str, str]
) -> Manifest:
    """A scheduler-plugins ElasticQuota."""
    return _object(
        "scheduling.x-k8s.io/v1alpha1",
        "ElasticQuota",
        name,
        namespace,
        {"max": dict(max_)},
        {"used": dict(used)},
    )


def kueue_workload(
    name: str,
    namespace: str = "default",
    *,
    pod_sets: Iterable[Mapping[str, Any]] = (),
    conditions: Iterable[tuple[str, str, str]] = (),
) -> Manifest:
    """A Kueue Workload; ``conditions`` are ``(type, status, reason)``."""
    return _object(
        "kueue.x-k8s.io/v1beta2",
        "Workload",
        name,
        namespace,
        {"podSets": [dict(p) for p in pod_sets]},
        {"conditions": [{"type": t, "status": s, "reason": r} for t, s, r in conditions]},
    )


def kube_pod_group(
    name: str,
    namespace: str = "default",
    *,
    min_count: int | None = None,
    disruption_mode: str = "",
) -> Manifest:
    """A Kubernetes v1alpha2 PodGroup (``gang`` when ``min_count`` is set, else ``basic``)."""
    policy: Manifest = {"gang": {"minCount": min_count}} if min_count else {"basic": {}}
    spec: Manifest = {"schedulingPolicy": policy}
    if disruption_mode:
        spec["disruptionMode"] = disruption_mode
    return _object("scheduling.k8s.io/v1alpha2", "PodGroup", name, namespace, spec)


def kube_workload(name: str, namespace: str = "default", *, groups: Mapping[str, int]) -> Manifest:
    """A Kubernetes v1alpha1 Workload with gang pod groups ``{name: minCount}``."""
    return _object(
        "scheduling.k8s.io/v1alpha1",
        "Workload",
        name,
        namespace,
        {
            "podGroups": [
                {"name": n, "policy": {"gang": {"minCount": c}}} for n, c in groups.items()
            ]
        },
    )


def provisioning_request(
    name: str,
    namespace: str = "default",
    *,
    counts: Iterable[int] = (1,),
    conditions: Iterable[tuple[str, str]] = (),
) -> Manifest:
    """A ProvisioningRequest; ``conditions`` are ``(type, status)``."""
    return _object(
        "autoscaling.x-k8s.io/v1",
        "ProvisioningRequest",
        name,
        namespace,
        {
            "provisioningClassName": "best-effort-atomic-scale-up.autoscaling.x-k8s.io",
            "podSets": [{"podTemplateRef": {"name": "t"}, "count": c} for c in counts],
        },
        {"conditions": [{"type": t, "status": s} for t, s in conditions]},
    )


def jobset(
    name: str,
    namespace: str = "default",
    *,
    replicated_jobs: Mapping[str, tuple[int, int]],
    suspend: bool = False,
) -> Manifest:
    """A JobSet with ``{replicatedJob: (replicas, parallelism)}``."""
    return _object(
        "jobset.x-k8s.io/v1alpha2",
        "JobSet",
        name,
        namespace,
        {
            "suspend": suspend,
            "replicatedJobs": [
                {"name": n, "replicas": r, "template": {"spec": {"parallelism": p}}}
                for n, (r, p) in replicated_jobs.items()
            ],
        },
    )


def priority_class(name: str, value: int) -> Manifest:
    """A PriorityClass."""
    obj = _object("scheduling.k8s.io/v1", "PriorityClass", name, None)
    obj["value"] = value
    return obj
