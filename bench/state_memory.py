"""Memory of the cluster state cache at scale (issue 21: controller memory <= 350 MB at 5,000
nodes and 50,000 pods).

Builds realistic Node and Pod objects (labels, taints, containers with requests, owner
references, conditions), feeds them through ``ClusterState.apply_object`` as the informers do,
and reports the Python heap the cache holds (``tracemalloc``, objects kept alive by the cache
only: the input dicts are dropped as they are applied) and the process's peak RSS. Runs in a
forked child so the numbers are its own.

The informer path (:func:`measure_informer`) starts from the bytes of the list responses, with
pods as a real API server returns them (managed fields, a per-pod service-account volume, env,
probes, container statuses, timestamped conditions): decoding, the informers (as the controller's
driver sets them up) and the cache, reporting CPU time and the RSS of informers and cache.

Usage: ``python -m bench.state_memory [--nodes 5000] [--pods 50000]``.
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing
import resource
import sys
import time
import tracemalloc
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, cast

import orjson

from provisioner.kube.informer import (
    LIST_PAGE_SIZE,
    Informer,
    last_state,
    strip_managed_fields,
)
from provisioner.kube.protocol import (
    JsonObject,
    KubeClient,
    ObjectList,
    WatchEvent,
    WatchEventType,
)
from provisioner.kube.resource import NODES, PODS, Resource
from provisioner.runtime.clock import FakeClock
from provisioner.state.cluster import ClusterState

ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")


def _node(index: int) -> dict[str, Any]:
    zone = ZONES[index % len(ZONES)]
    name = f"ip-10-{index // 250}-{index % 250}-1.ec2.internal"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"node-uid-{index}",
            "resourceVersion": str(index),
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": "m6i.2xlarge",
                "topology.kubernetes.io/zone": zone,
                "topology.kubernetes.io/region": "us-east-1",
                "karpenter.sh/nodepool": "default",
                "karpenter.sh/capacity-type": "on-demand",
                "karpenter.sh/registered": "true",
                "karpenter.sh/initialized": "true",
                "karpenter.k8s.aws/instance-family": "m6i",
                "karpenter.k8s.aws/instance-size": "2xlarge",
            },
            "annotations": {"karpenter.sh/nodepool-hash": "1234567890"},
        },
        "spec": {"providerID": f"aws:///{zone}/i-{index:017x}"},
        "status": {
            "capacity": {"cpu": "8", "memory": "32Gi", "pods": "58"},
            "allocatable": {"cpu": "7910m", "memory": "29317Mi", "pods": "58"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


def _pod(index: int, nodes: int) -> dict[str, Any]:
    app = f"app-{index % 200}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{app}-{index:06d}",
            "namespace": f"team-{index % 20}",
            "uid": f"pod-uid-{index}",
            "resourceVersion": str(index),
            "labels": {"app": app, "pod-template-hash": "5d8f7c9b6"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": f"{app}-5d8f7c9b6",
                    "uid": f"rs-{index % 200}",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "nodeName": f"ip-10-{(index % nodes) // 250}-{(index % nodes) % 250}-1.ec2.internal",
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example/app:1",
                    "resources": {
                        "requests": {"cpu": "250m", "memory": "512Mi"},
                        "limits": {"memory": "1Gi"},
                    },
                }
            ],
            "tolerations": [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                }
            ],
        },
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": "Ready", "status": "True"},
            ],
            "startTime": "2026-11-01T00:00:00Z",
        },
    }


def _full_pod(index: int, nodes: int) -> dict[str, Any]:
    """``_pod`` with what a real API server adds (the informers receive all of it)."""
    pod = _pod(index, nodes)
    token = f"kube-api-access-{index:05x}"
    pod["metadata"]["generateName"] = pod["metadata"]["name"][:-6]
    pod["metadata"]["creationTimestamp"] = "2026-11-01T00:00:00Z"
    pod["metadata"]["managedFields"] = [
        {
            "manager": "kube-controller-manager",
            "operation": "Update",
            "apiVersion": "v1",
            "time": "2026-11-01T00:00:00Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {"f:generateName": {}, "f:labels": {".": {}, "f:app": {}}},
                "f:spec": {"f:containers": {'k:{"name":"main"}': {".": {}, "f:image": {}}}},
            },
        },
        {
            "manager": "kubelet",
            "operation": "Update",
            "apiVersion": "v1",
            "time": "2026-11-01T00:00:05Z",
            "fieldsType": "FieldsV1",
            "subresource": "status",
            "fieldsV1": {"f:status": {"f:conditions": {}, "f:podIP": {}, "f:startTime": {}}},
        },
    ]
    container = pod["spec"]["containers"][0]
    container.update(
        {
            "env": [{"name": "LOG_LEVEL", "value": "info"}, {"name": "PORT", "value": "8080"}],
            "ports": [{"containerPort": 8080, "protocol": "TCP"}],
            "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}, "periodSeconds": 10},
            "volumeMounts": [
                {
                    "name": token,
                    "readOnly": True,
                    "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                }
            ],
            "terminationMessagePath": "/dev/termination-log",
            "imagePullPolicy": "IfNotPresent",
        }
    )
    pod["spec"].update(
        {
            "volumes": [{"name": token, "projected": {"defaultMode": 420, "sources": []}}],
            "restartPolicy": "Always",
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "schedulerName": "default-scheduler",
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
        }
    )
    second = f"{index % 60:02d}"
    pod["status"].update(
        {
            "conditions": [
                {
                    "type": kind,
                    "status": "True",
                    "lastTransitionTime": f"2026-11-01T00:00:{second}Z",
                }
                for kind in ("PodReadyToStartContainers", "Initialized", "Ready", "PodScheduled")
            ],
            "hostIP": f"10.0.{(index % nodes) // 250}.{(index % nodes) % 250}",
            "podIP": f"10.1.{index // 250 % 250}.{index % 250}",
            "qosClass": "Burstable",
            "containerStatuses": [
                {
                    "name": "main",
                    "ready": True,
                    "restartCount": 0,
                    "image": "registry.example/app:1",
                    "containerID": f"containerd://{index:064x}",
                    "state": {"running": {"startedAt": "2026-11-01T00:00:03Z"}},
                }
            ],
        }
    )
    return pod


def _objects(nodes: int, pods: int) -> Iterator[dict[str, Any]]:
    for index in range(nodes):
        yield _node(index)
    for index in range(pods):
        yield _pod(index, nodes)


def measure(nodes: int, pods: int, *, trace: bool) -> dict[str, float]:
    """Fill a cache; return its heap (with ``trace``) or the RSS it added, in MiB."""
    gc.collect()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if trace:
        tracemalloc.start()
    state = ClusterState(clock=FakeClock(datetime(2026, 11, 1, tzinfo=UTC)))
    for obj in _objects(nodes, pods):
        state.apply_object(obj)
    gc.collect()
    heap = tracemalloc.get_traced_memory()[0] / 2**20 if trace else 0.0
    if trace:
        tracemalloc.stop()
    counts = state.counts()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "nodes": float(counts["nodes"]),
        "pods": float(counts["pods"]),
        "heap_mib": heap,
        "peak_rss_mib": peak,
        "rss_growth_mib": peak - before,
    }


class _Lists:
    """A list-only API answering with decoded response bodies, whole or chunk by chunk."""

    def __init__(self, pages: Mapping[Resource, Sequence[bytes]]) -> None:
        self._pages = pages

    def list(self, resource: Resource, **_: Any) -> ObjectList:
        items = [item for page in self._pages[resource] for item in orjson.loads(page)]
        return ObjectList(items, resource_version="1")

    def list_pages(self, resource: Resource, **_: Any) -> Iterator[ObjectList]:
        for page in self._pages[resource]:
            yield ObjectList(orjson.loads(page), resource_version="1")


def _pages(objects: Sequence[JsonObject]) -> list[bytes]:
    return [
        orjson.dumps(objects[start : start + LIST_PAGE_SIZE])
        for start in range(0, len(objects), LIST_PAGE_SIZE)
    ]


def measure_informer(nodes: int, pods: int, *, trace: bool, paged: bool) -> dict[str, float]:
    """Relist full objects through the informers into the cache.

    Returns the CPU seconds (untraced), or with ``trace`` the heap informers and cache hold
    afterwards and the traced peak during the relist (the decoded list bodies included), MiB.
    ``paged``: the informers list in chunks of ``LIST_PAGE_SIZE`` (as the controller's do
    against a real API server), else in one list.
    """
    bodies = {
        NODES: _pages([_node(i) for i in range(nodes)]),
        PODS: _pages([_full_pod(i, nodes) for i in range(pods)]),
    }
    gc.collect()
    if trace:
        tracemalloc.start()
    state = ClusterState(clock=FakeClock(datetime(2026, 11, 1, tzinfo=UTC)))
    informers = []
    began = time.process_time()
    for kind in (NODES, PODS):

        def deliver(obj: JsonObject, kind: Resource = kind) -> None:
            state.apply(kind, WatchEvent(WatchEventType.ADDED, obj))

        # as the controller's driver sets its informers up
        informer = Informer(
            cast("KubeClient", _Lists(bodies)),
            kind,
            on_add=deliver,
            transform=strip_managed_fields,
            copies=False,
            keep=last_state(kind),
            page_size=LIST_PAGE_SIZE if paged else None,
        )
        informer.sync_once()
        informers.append(informer)
    cpu = time.process_time() - began
    gc.collect()
    held, peak = tracemalloc.get_traced_memory() if trace else (0, 0)
    if trace:
        tracemalloc.stop()
    return {
        "pods": float(state.counts()["pods"]),
        "cpu_seconds": cpu,
        "held_mib": held / 2**20,
        "peak_mib": peak / 2**20,
        "body_mib": sum(len(page) for page in bodies[PODS]) / 2**20,
    }


def _child(queue: Any, nodes: int, pods: int, trace: bool, informer: str) -> None:
    if informer:
        queue.put(measure_informer(nodes, pods, trace=trace, paged=informer == "paged"))
    else:
        queue.put(measure(nodes, pods, trace=trace))


def run(nodes: int, pods: int, *, trace: bool = False, informer: str = "") -> dict[str, float]:
    """:func:`measure`, or :func:`measure_informer` (``informer``: "paged" or "whole"), in a
    forked child process."""
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    process = context.Process(target=_child, args=(queue, nodes, pods, trace, informer))
    process.start()
    result: dict[str, float] = queue.get()
    process.join()
    return result


def main(argv: Sequence[str] | None = None) -> int:
    """Print the cache's memory for the given cluster size."""
    parser = argparse.ArgumentParser(prog="bench.state_memory")
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=50000)
    args = parser.parse_args(argv)
    heap = run(args.nodes, args.pods, trace=True)
    rss = run(args.nodes, args.pods)
    path = run(args.nodes, args.pods, informer="paged")
    path_heap = run(args.nodes, args.pods, informer="paged", trace=True)
    whole = run(args.nodes, args.pods, informer="whole", trace=True)
    sys.stdout.write(
        f"state cache with {rss['nodes']:.0f} nodes and {rss['pods']:.0f} pods: "
        f"Python heap held {heap['heap_mib']:.0f} MiB (tracemalloc); process RSS grew "
        f"{rss['rss_growth_mib']:.0f} MiB to {rss['peak_rss_mib']:.0f} MiB (no tracing)\n"
        f"informer path (list bodies of full objects, {path_heap['body_mib']:.0f} MiB of pods, "
        f"decoded, informed and cached): {path['cpu_seconds']:.2f} s CPU; informers and cache "
        f"hold {path_heap['held_mib']:.0f} MiB afterwards, peak {path_heap['peak_mib']:.0f} MiB "
        f"(tracemalloc; listed in chunks of {LIST_PAGE_SIZE}; in one list the peak is "
        f"{whole['peak_mib']:.0f} MiB)\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
