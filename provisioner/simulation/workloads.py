"""Simulated workload controllers: Deployments, ReplicaSets, Jobs and DaemonSets.

Just enough of kube-controller-manager for scenarios to be written the way clusters are used:

* **Deployment** -> one ReplicaSet per pod template (``<name>-<hash>``, label
  ``pod-template-hash``) with the Deployment's replicas; older ReplicaSets are scaled to zero
  (the ``Recreate`` strategy).
* **ReplicaSet** -> keeps ``replicas`` live pods: creates ``<name>-<5 chars>`` pods, and on scale
  down deletes unbound pods first, then the newest.
* **Job** -> runs up to ``parallelism`` pods until ``completions`` pods have Succeeded (without
  ``completions``, until one has); a suspended Job runs none; a finished Job gets ``Complete``.
* **DaemonSet** -> one pod per node whose labels and taints admit it (with the tolerations the
  DaemonSet controller adds), created already bound to the node.
* **Garbage collection**: objects whose controlling owner (one of these kinds) is gone are
  deleted.

Names come from a seeded random source, so a run is reproducible.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import random
from collections.abc import Mapping, Sequence
from typing import Any, Final

from provisioner.apis.core import is_terminal
from provisioner.kube.errors import AlreadyExistsError, NotFoundError
from provisioner.kube.event import format_time
from provisioner.kube.memory import InMemoryKube
from provisioner.kube.protocol import JsonObject, WatchEvent
from provisioner.kube.resource import (
    DAEMON_SETS,
    DEPLOYMENTS,
    JOBS,
    NODES,
    PODS,
    REPLICA_SETS,
    Resource,
)
from provisioner.scheduling.affinity import AffinityError, NodeAffinity, node_selector_matches
from provisioner.scheduling.taints import TaintError, Toleration, parse_taint, untolerated
from provisioner.simulation.objects import (
    condition_true,
    is_deleting,
    labels_of,
    name_of,
    namespace_of,
    set_condition,
    uid_of,
)
from provisioner.simulation.timeline import Timeline

__all__ = ["LABEL_JOB_NAME", "LABEL_POD_TEMPLATE_HASH", "Workloads"]

LABEL_POD_TEMPLATE_HASH: Final = "pod-template-hash"
LABEL_JOB_NAME: Final = "batch.kubernetes.io/job-name"
LABEL_JOB_NAME_LEGACY: Final = "job-name"
_ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"
_OWNED_KINDS: Final = frozenset({"Deployment", "ReplicaSet", "Job", "DaemonSet"})
_WORKLOADS: Final = (DEPLOYMENTS, REPLICA_SETS, JOBS, DAEMON_SETS)
# Tolerations the DaemonSet controller adds to every daemon pod.
_DAEMON_TOLERATIONS: Final = (
    Toleration("node.kubernetes.io/not-ready", "Exists", "", "NoExecute"),
    Toleration("node.kubernetes.io/unreachable", "Exists", "", "NoExecute"),
    Toleration("node.kubernetes.io/disk-pressure", "Exists", "", "NoSchedule"),
    Toleration("node.kubernetes.io/memory-pressure", "Exists", "", "NoSchedule"),
    Toleration("node.kubernetes.io/pid-pressure", "Exists", "", "NoSchedule"),
    Toleration("node.kubernetes.io/unschedulable", "Exists", "", "NoSchedule"),
    Toleration("node.kubernetes.io/network-unavailable", "Exists", "", "NoSchedule"),
)


def _owner(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    refs: list[Mapping[str, Any]] = (obj.get("metadata") or {}).get("ownerReferences") or []
    return next((ref for ref in refs if ref.get("controller")), None)


def _owner_ref(owner: Mapping[str, Any]) -> JsonObject:
    return {
        "apiVersion": owner.get("apiVersion", ""),
        "kind": owner.get("kind", ""),
        "name": name_of(owner),
        "uid": uid_of(owner),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _template_hash(template: Mapping[str, Any]) -> str:
    digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).digest()
    return "".join(_ALPHABET[b % len(_ALPHABET)] for b in digest[:10])


def _int(value: object, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


class Workloads:
    """The workload controllers, one reconcile pass per virtual instant with changes.

    Args:
        timeline: virtual time and the action queue.
        kube: the in-memory API.
        rng: the seeded random source for generated names.
    """

    def __init__(self, *, timeline: Timeline, kube: InMemoryKube, rng: random.Random) -> None:
        self._timeline = timeline
        self._kube = kube
        self._rng = rng
        self._index: tuple[Sequence[JsonObject], dict[str | None, list[JsonObject]]] | None = None
        self.pods_created = 0

    def observe(self, resource: Resource, event: WatchEvent) -> None:
        """Schedule a pass when a workload, an owned pod or (for DaemonSets) a node changes."""
        owner = _owner(event.object)
        if (
            resource in _WORKLOADS
            or (resource == PODS and owner is not None and owner.get("kind") in _OWNED_KINDS)
            or resource == NODES
        ):
            self._timeline.after(0, self.run_pass, key=("workloads",))

    def run_pass(self) -> None:
        """Reconcile every workload once."""
        pods = self._kube.view(PODS)
        if self._collect_garbage(pods):
            pods = self._kube.view(PODS)
        for deployment in self._kube.view(DEPLOYMENTS):
            if not is_deleting(deployment):
                self._deployment(deployment)  # writes ReplicaSets only: the pods stay as seen
        for replica_set in self._kube.view(REPLICA_SETS):
            if not is_deleting(replica_set):
                self._replica_set(replica_set, pods)
        for job in self._kube.view(JOBS):
            if not is_deleting(job):
                self._job(job, pods)
        daemon_sets = [d for d in self._kube.view(DAEMON_SETS) if not is_deleting(d)]
        if daemon_sets:
            nodes = self._kube.view(NODES)
            for daemon_set in daemon_sets:
                self._daemon_set(daemon_set, nodes, pods)

    # -- garbage collection ------------------------------------------------------------------

    def _collect_garbage(self, pods: Sequence[JsonObject]) -> bool:
        """Delete what a gone workload owned; whether a pod was deleted."""
        alive = {uid_of(obj) for resource in _WORKLOADS for obj in self._kube.view(resource)}
        orphans = [
            (REPLICA_SETS, obj)
            for obj in self._kube.view(REPLICA_SETS)
            if (_owner(obj) or {}).get("uid") not in alive
        ]
        for uid, owned in self._by_owner(pods).items():
            if uid is not None and uid not in alive:
                orphans.extend((PODS, pod) for pod in owned)
        deleted_pods = False
        for resource, obj in orphans:
            owner = _owner(obj)
            if owner is None or owner.get("kind") not in _OWNED_KINDS or is_deleting(obj):
                continue
            self._delete(resource, obj)
            deleted_pods = deleted_pods or resource == PODS
        return deleted_pods

    def _delete(self, resource: Resource, obj: Mapping[str, Any]) -> None:
        with contextlib.suppress(NotFoundError):
            self._kube.delete(
                resource,
                name_of(obj),
                namespace=namespace_of(obj) or None,
                grace_period_seconds=0 if resource == PODS else None,
            )

    # -- pods --------------------------------------------------------------------------------

    def _name(self, prefix: str, namespace: str) -> str:
        while True:
            suffix = "".join(self._rng.choice(_ALPHABET) for _ in range(5))
            name = f"{prefix}-{suffix}"
            try:
                self._kube.get(PODS, name, namespace=namespace)
            except NotFoundError:
                return name

    def _create_pod(
        self,
        owner: Mapping[str, Any],
        template: Mapping[str, Any],
        *,
        extra_labels: Mapping[str, str] | None = None,
        node: str | None = None,
        restart_policy: str = "Always",
    ) -> None:
        namespace = namespace_of(owner) or "default"
        metadata = template.get("metadata") or {}
        spec = copy.deepcopy(dict(template.get("spec") or {}))
        spec.setdefault("restartPolicy", restart_policy)
        spec.setdefault("schedulerName", "default-scheduler")
        status: JsonObject = {"phase": "Pending"}
        if node is not None:
            spec["nodeName"] = node
            status["conditions"] = set_condition(
                None, "PodScheduled", "True", now=self._timeline.clock.now()
            )
        body: JsonObject = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": self._name(name_of(owner), namespace),
                "namespace": namespace,
                "labels": {**(metadata.get("labels") or {}), **(extra_labels or {})},
                "annotations": dict(metadata.get("annotations") or {}),
                "ownerReferences": [_owner_ref(owner)],
            },
            "spec": spec,
            "status": status,
        }
        try:
            self._kube.create(PODS, body, namespace=namespace)
        except AlreadyExistsError:
            return
        self.pods_created += 1

    def _owned(self, owner: Mapping[str, Any], pods: Sequence[JsonObject]) -> list[JsonObject]:
        """The pods ``owner`` controls, in ``pods``' order."""
        return list(self._by_owner(pods).get(uid_of(owner), ()))

    def _by_owner(self, pods: Sequence[JsonObject]) -> dict[str | None, list[JsonObject]]:
        """``pods`` by their controller's uid (indexed once per list of pods)."""
        if self._index is None or self._index[0] is not pods:
            index: dict[str | None, list[JsonObject]] = {}
            for pod in pods:
                uid = (_owner(pod) or {}).get("uid")
                index.setdefault(uid if isinstance(uid, str) else None, []).append(pod)
            self._index = (pods, index)
        return self._index[1]

    # -- controllers -------------------------------------------------------------------------

    def _deployment(self, deployment: JsonObject) -> None:
        spec = deployment.get("spec") or {}
        template = spec.get("template") or {}
        replicas = _int(spec.get("replicas"), 1)
        namespace = namespace_of(deployment) or "default"
        name = f"{name_of(deployment)}-{_template_hash(template)}"
        owned = [
            rs
            for rs in self._kube.view(REPLICA_SETS, namespace=namespace)
            if (_owner(rs) or {}).get("uid") == uid_of(deployment)
        ]
        if not any(name_of(rs) == name for rs in owned):
            template_hash = name.rpartition("-")[2]
            labels = {**((template.get("metadata") or {}).get("labels") or {})}
            labels[LABEL_POD_TEMPLATE_HASH] = template_hash
            rs_template = copy.deepcopy(dict(template))
            rs_template.setdefault("metadata", {})["labels"] = labels
            with contextlib.suppress(AlreadyExistsError):
                self._kube.create(
                    REPLICA_SETS,
                    {
                        "apiVersion": "apps/v1",
                        "kind": "ReplicaSet",
                        "metadata": {
                            "name": name,
                            "namespace": namespace,
                            "labels": labels,
                            "ownerReferences": [_owner_ref(deployment)],
                        },
                        "spec": {
                            "replicas": replicas,
                            "selector": spec.get("selector") or {"matchLabels": labels},
                            "template": rs_template,
                        },
                    },
                    namespace=namespace,
                )
        for rs in owned:
            wanted = replicas if name_of(rs) == name else 0
            if _int((rs.get("spec") or {}).get("replicas"), 1) != wanted:
                self._kube.merge_patch(
                    REPLICA_SETS, name_of(rs), {"spec": {"replicas": wanted}}, namespace=namespace
                )

    def _replica_set(self, replica_set: JsonObject, pods: Sequence[JsonObject]) -> None:
        spec = replica_set.get("spec") or {}
        wanted = _int(spec.get("replicas"), 1)
        live = [
            p for p in self._owned(replica_set, pods) if not is_terminal(p) and not is_deleting(p)
        ]
        for _ in range(wanted - len(live)):
            self._create_pod(replica_set, spec.get("template") or {})
        if len(live) > wanted:
            doomed = sorted(
                live,
                key=lambda p: (
                    bool((p.get("spec") or {}).get("nodeName")),
                    _negated((p.get("metadata") or {}).get("creationTimestamp") or ""),
                    _negated(name_of(p)),
                ),
            )[: len(live) - wanted]
            for pod in doomed:
                self._delete(PODS, pod)

    def _job(self, job: JsonObject, pods: Sequence[JsonObject]) -> None:
        if condition_true(job, "Complete") or condition_true(job, "Failed"):
            return
        spec = job.get("spec") or {}
        parallelism = _int(spec.get("parallelism"), 1)
        completions = spec.get("completions")
        owned = self._owned(job, pods)
        succeeded = sum(1 for p in owned if (p.get("status") or {}).get("phase") == "Succeeded")
        failed = sum(1 for p in owned if (p.get("status") or {}).get("phase") == "Failed")
        active = [p for p in owned if not is_terminal(p) and not is_deleting(p)]
        if isinstance(completions, int):
            wanted = min(parallelism, max(completions - succeeded, 0))
            finished = succeeded >= completions
        else:
            wanted = parallelism if succeeded == 0 else 0
            finished = succeeded > 0 and not active
        if spec.get("suspend"):
            wanted = 0
        labels = {
            LABEL_JOB_NAME: name_of(job),
            LABEL_JOB_NAME_LEGACY: name_of(job),
        }
        if not finished:
            for _ in range(wanted - len(active)):
                self._create_pod(
                    job, spec.get("template") or {}, extra_labels=labels, restart_policy="Never"
                )
            for pod in active[wanted:] if len(active) > wanted else []:
                self._delete(PODS, pod)
        now = self._timeline.clock.now()
        status: JsonObject = {
            "active": min(len(active), wanted) if not finished else 0,
            "succeeded": succeeded,
            "failed": failed,
        }
        if finished:
            status["conditions"] = set_condition(
                (job.get("status") or {}).get("conditions"), "Complete", "True", now=now
            )
            status["completionTime"] = format_time(now)
        current = job.get("status") or {}
        if any(current.get(k) != v for k, v in status.items()):
            self._kube.patch_status(
                JOBS, name_of(job), {"status": status}, namespace=namespace_of(job)
            )

    def _daemon_set(
        self, daemon_set: JsonObject, nodes: Sequence[JsonObject], pods: Sequence[JsonObject]
    ) -> None:
        template = (daemon_set.get("spec") or {}).get("template") or {}
        pod_spec = template.get("spec") or {}
        try:
            tolerations = (
                *(Toleration.from_dict(t) for t in pod_spec.get("tolerations") or []),
                *_DAEMON_TOLERATIONS,
            )
            raw_affinity = (pod_spec.get("affinity") or {}).get("nodeAffinity")
            affinity = NodeAffinity.from_dict(raw_affinity) if raw_affinity else None
        except (TaintError, AffinityError):
            return
        owned = self._owned(daemon_set, pods)
        covered = {
            (p.get("spec") or {}).get("nodeName")
            for p in owned
            if not is_terminal(p) and not is_deleting(p)
        }
        for node in nodes:
            name = name_of(node)
            if name in covered or is_deleting(node):
                continue
            try:
                taints = [parse_taint(t) for t in (node.get("spec") or {}).get("taints") or []]
            except TaintError:
                continue
            if untolerated(tolerations, taints, ("NoSchedule", "NoExecute")) is not None:
                continue
            if not node_selector_matches(
                pod_spec.get("nodeSelector") or {}, affinity, labels_of(node), name
            ):
                continue
            self._create_pod(daemon_set, template, node=name)


def _negated(text: str) -> str:
    """A sort key that orders strings in reverse."""
    return "".join(chr(0x10FFFF - ord(c)) for c in text)
