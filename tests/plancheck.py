"""An independent checker of a `jointer plan` document against its inputs (`spec/plan.md`).

`check_plan(objects, catalog, plan_json)` re-derives every field rule and placement rule of
`plan.md` from the raw input objects (decoded YAML/JSON dicts) and a catalog, and returns the
violations as human-readable strings (empty when the plan is valid). It deliberately does not
use the planner's problem builder: it reads pods, nodes and NodePools itself and uses only the
scheduling algebra (`provisioner.scheduling`), pod-group detection (`provisioner.podgroups`)
and the catalog types.

Rules that need the planner's private knowledge are checked in a weaker, sound form:

* NodePool weights: a pod on a lower-weight pool is a violation only if a higher-weight pool
  can still take it once the plan is made: the pool has an available offering whose labels
  satisfy the pool and the pod, whose taints the pod tolerates, on which the pod alone fits and
  one more node of which stays within the pool's limits (its existing nodes and the plan's
  NodeClaims counted), or one of the plan's NodeClaims of that pool has room for the pod on its
  `instanceType` (labels and taints accepted). Only pods without gang, topology constraints,
  volumes (and, for the room, GPU fractions) are judged.
* Zone spread: the eligible zones are those of the available offerings (and existing nodes)
  compatible with the carrier pod.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from cloudprovider.aws.catalog import Catalog
from cloudprovider.instancetype import InstanceType
from provisioner.apis.base import parse_object
from provisioner.apis.core import Pod, Taint
from provisioner.podgroups import (
    build_context,
    detect_group,
    gpu_fraction_milli,
    group_info,
    is_gpu_reservation_pod,
)
from provisioner.podgroups.fractions import FractionError
from provisioner.scheduling.affinity import NodeAffinity, NodeSelectorTerm
from provisioner.scheduling.quantity import parse_quantity
from provisioner.scheduling.requirements import Requirements
from provisioner.scheduling.resources import pod_requests
from provisioner.scheduling.taints import Toleration, parse_taint, untolerated

__all__ = ["CatalogInput", "catalogs_for", "check_plan"]

ZONE: Final = "topology.kubernetes.io/zone"
REGION: Final = "topology.kubernetes.io/region"
HOSTNAME: Final = "kubernetes.io/hostname"
NODEPOOL: Final = "karpenter.sh/nodepool"
CAPACITY_TYPE: Final = "karpenter.sh/capacity-type"
INSTANCE_TYPE: Final = "node.kubernetes.io/instance-type"
GPU: Final = "nvidia.com/gpu"
EFFECTS: Final = ("NoSchedule", "NoExecute")
TOPOLOGY_KEYS: Final = (ZONE, HOSTNAME)
BETA_ALIASES: Final = {
    "failure-domain.beta.kubernetes.io/zone": ZONE,
    "failure-domain.beta.kubernetes.io/region": REGION,
    "beta.kubernetes.io/arch": "kubernetes.io/arch",
    "beta.kubernetes.io/os": "kubernetes.io/os",
    "beta.kubernetes.io/instance-type": INSTANCE_TYPE,
}
PRICE_EPSILON: Final = 1e-5
STATUSES: Final = frozenset({"OPTIMAL", "FEASIBLE", "GREEDY"})

CatalogInput = Catalog | Mapping[str, Sequence[InstanceType]]
"""One catalog for every NodePool, or instance types by NodePool name."""


# --- reading the inputs ------------------------------------------------------------------------


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata") or {}
    return meta if isinstance(meta, Mapping) else {}


def _key(obj: Mapping[str, Any]) -> str:
    meta = _meta(obj)
    return f"{meta.get('namespace') or 'default'}/{meta.get('name')}"


def _resources(values: Mapping[str, Any] | None) -> dict[str, int]:
    return {k: parse_quantity(str(v)) for k, v in (values or {}).items()}


def _fits(requests: Mapping[str, int], allocatable: Mapping[str, int]) -> list[str]:
    return [
        f"{name} {amount} > {allocatable.get(name, 0)}"
        for name, amount in sorted(requests.items())
        if amount > allocatable.get(name, 0)
    ]


def _add(*lists: Mapping[str, int]) -> dict[str, int]:
    total: dict[str, int] = defaultdict(int)
    for values in lists:
        for k, v in values.items():
            total[k] += v
    return dict(total)


def _with_aliases(labels: Mapping[str, str]) -> dict[str, str]:
    result = dict(labels)
    for beta, ga in BETA_ALIASES.items():
        if ga in result:
            result.setdefault(beta, result[ga])
    return result


@dataclass
class _PodInfo:
    key: str
    raw: Mapping[str, Any]
    model: Pod
    namespace: str
    labels: Mapping[str, str]
    requests: dict[str, int]
    fraction: tuple[int, int] | None
    node_selector: Mapping[str, str]
    affinity: NodeAffinity
    tolerations: tuple[Toleration, ...]
    claims: tuple[str, ...]

    def accepts(self, labels: Mapping[str, str], node_name: str | None = None) -> bool:
        """Whether nodeSelector and required node affinity hold for ``labels``."""
        full = _with_aliases(labels)
        if any(full.get(k) != v for k, v in self.node_selector.items()):
            return False
        return self.affinity.matches(full, node_name)

    def tolerates(self, taints: Iterable[Taint]) -> bool:
        """Whether every NoSchedule/NoExecute taint is tolerated."""
        return untolerated(self.tolerations, taints, EFFECTS) is None

    @property
    def spec(self) -> Mapping[str, Any]:
        """The raw pod spec."""
        spec = self.raw.get("spec") or {}
        return spec if isinstance(spec, Mapping) else {}


def _offering(
    inputs: _Inputs, pool: _Pool, instance_type: InstanceType, zone: str, capacity_type: str
) -> _Offering:
    key = (pool.name, instance_type.name, zone, capacity_type)
    known = inputs.offerings.get(key)
    if known is None:
        labels = _new_node_labels(pool, instance_type, zone, capacity_type, inputs.region)
        known = _Offering(
            price=_cheapest(instance_type, capacity_type, zone),
            labels=labels,
            in_pool=pool.requirements.matches(labels),
            overhead=_daemon_requests(inputs.daemons, labels, pool.taints),
        )
        inputs.offerings[key] = known
    return known


def _node_signature(pod: _PodInfo) -> tuple[object, str]:
    """What ``accepts`` reads of a pod: its nodeSelector and its node affinity."""
    node_affinity = (pod.spec.get("affinity") or {}).get("nodeAffinity")
    return tuple(sorted(pod.node_selector.items())), repr(node_affinity)


def _pod_info(raw: Mapping[str, Any]) -> _PodInfo:
    model = parse_object(Pod, raw, kind="Pod")
    spec = raw.get("spec") or {}
    requests = pod_requests(
        spec.get("containers") or [], spec.get("initContainers") or [], spec.get("overhead")
    )
    requests["pods"] = requests.get("pods", 0) + 1000
    fraction = gpu_fraction_milli(model, None)
    affinity = (spec.get("affinity") or {}).get("nodeAffinity")
    return _PodInfo(
        key=_key(raw),
        raw=raw,
        model=model,
        namespace=_meta(raw).get("namespace") or "default",
        labels=_meta(raw).get("labels") or {},
        requests=requests,
        fraction=fraction,
        node_selector=spec.get("nodeSelector") or {},
        affinity=NodeAffinity.from_dict(affinity),
        tolerations=tuple(Toleration.from_dict(t) for t in spec.get("tolerations") or []),
        claims=tuple(
            v["persistentVolumeClaim"]["claimName"]
            for v in spec.get("volumes") or []
            if v.get("persistentVolumeClaim")
        ),
    )


def _is_terminal(raw: Mapping[str, Any]) -> bool:
    return ((raw.get("status") or {}).get("phase")) in ("Succeeded", "Failed")


@dataclass
class _Pool:
    name: str
    weight: int
    requirements: Requirements
    labels: dict[str, str]
    taints: tuple[Taint, ...]
    limits: dict[str, int] | None
    instance_types: Mapping[str, InstanceType]


def _pool(raw: Mapping[str, Any], types: Sequence[InstanceType]) -> _Pool:
    spec = raw.get("spec") or {}
    template = spec.get("template") or {}
    tspec = template.get("spec") or {}
    name = str(_meta(raw).get("name"))
    labels = {**((template.get("metadata") or {}).get("labels") or {}), NODEPOOL: name}
    requirements = Requirements.from_terms(tspec.get("requirements") or [])
    limits = spec.get("limits")
    return _Pool(
        name=name,
        weight=int(spec.get("weight") or 0),
        requirements=requirements,
        labels=labels,
        taints=tuple(parse_taint(t) for t in tspec.get("taints") or []),
        limits=_resources(limits) if limits is not None else None,
        instance_types={t.name: t for t in types},
    )


@dataclass
class _Daemon:
    info: _PodInfo


@dataclass
class _Node:
    """An existing node or in-flight NodeClaim as capacity."""

    name: str
    labels: dict[str, str]
    taints: tuple[Taint, ...]
    allocatable: dict[str, int]
    pool: str
    bound: list[_PodInfo] = field(default_factory=list)


@dataclass
class _Inputs:
    pods: dict[str, _PodInfo]
    pending: dict[str, _PodInfo]
    bound_node: dict[str, str]
    pools: dict[str, _Pool]
    daemons: list[_PodInfo]
    nodes: dict[str, _Node]
    claims: dict[str, Mapping[str, Any]]
    volumes: dict[str, Mapping[str, Any]]
    classes: dict[str, Mapping[str, Any]]
    raw: list[Mapping[str, Any]]
    region: str
    node_capacity: dict[str, dict[str, int]]
    offerings: dict[tuple[str, str, str, str], _Offering] = field(default_factory=dict)
    """What a claim's instance type is in a zone and capacity type, judged once per offering."""


@dataclass(frozen=True)
class _Offering:
    """A pool's instance type in a zone and capacity type as a new node (no pod changes it)."""

    price: float | None
    labels: dict[str, str]
    in_pool: bool
    """Whether the labels satisfy the NodePool's requirements."""
    overhead: dict[str, int]
    """The DaemonSet pods such a node runs."""


def _types_for(catalog: CatalogInput, pool: str) -> Sequence[InstanceType]:
    if isinstance(catalog, Catalog):
        return catalog.instance_types
    return catalog.get(pool, ())


_REQUEST_CLASSES: Final = (
    "best-effort-atomic-scale-up.autoscaling.x-k8s.io",
    "check-capacity.autoscaling.x-k8s.io",
)


def _request_pods(
    requests: Sequence[Mapping[str, Any]], templates: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The pods an unprovisioned atomic ProvisioningRequest asks for: ``count`` of each
    pod set's PodTemplate, named ``<request>-<podSet>-<i>``, consuming the request."""
    by_name = {(_meta(t).get("namespace") or "default", _meta(t).get("name")): t for t in templates}
    pods: list[dict[str, Any]] = []
    for request in requests:
        spec = request.get("spec") or {}
        conditions = (request.get("status") or {}).get("conditions") or []
        done = {c.get("type") for c in conditions if c.get("status") == "True"}
        if spec.get("provisioningClassName") != _REQUEST_CLASSES[0]:
            continue
        if done & {"Provisioned", "Failed", "BookingExpired", "CapacityRevoked"}:
            continue
        namespace = _meta(request).get("namespace") or "default"
        name = str(_meta(request).get("name"))
        for index, pod_set in enumerate(spec.get("podSets") or []):
            template = by_name.get((namespace, (pod_set.get("podTemplateRef") or {}).get("name")))
            if template is None:
                continue
            body = template.get("template") or {}
            metadata = body.get("metadata") or {}
            for replica in range(int(pod_set.get("count") or 0)):
                annotations = {
                    **(metadata.get("annotations") or {}),
                    "autoscaling.x-k8s.io/consume-provisioning-request": name,
                    "autoscaling.x-k8s.io/provisioning-class-name": _REQUEST_CLASSES[0],
                }
                pods.append(
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "metadata": {
                            "name": f"{name}-{index}-{replica}",
                            "namespace": namespace,
                            "labels": dict(metadata.get("labels") or {}),
                            "annotations": annotations,
                        },
                        "spec": body.get("spec") or {},
                    }
                )
    return pods


def _read(objects: Sequence[Mapping[str, Any]], catalog: CatalogInput, region: str) -> _Inputs:
    by_kind: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for obj in objects:
        by_kind[str(obj.get("kind"))].append(obj)
    requested = _request_pods(by_kind["ProvisioningRequest"], by_kind["PodTemplate"])
    by_kind["Pod"].extend(requested)
    pods = {_key(p): _pod_info(p) for p in by_kind["Pod"] if not _is_terminal(p)}
    claim_names = {str(_meta(c).get("name")) for c in by_kind["NodeClaim"]}
    nominated = {
        k: f"nodeclaim/{target}"
        for k, p in pods.items()
        if not p.spec.get("nodeName")
        and (target := (p.raw.get("status") or {}).get("nominatedNodeName")) in claim_names
    }
    pending = {
        k: p
        for k, p in pods.items()
        if not p.spec.get("nodeName")
        and not _meta(p.raw).get("deletionTimestamp")
        and k not in nominated
    }
    bound_node = {k: str(p.spec["nodeName"]) for k, p in pods.items() if p.spec.get("nodeName")}
    # a pod nominated to an in-flight NodeClaim holds room there (the provisioner's nomination)
    bound_node.update(nominated)
    pools = {
        str(_meta(np).get("name")): _pool(np, _types_for(catalog, str(_meta(np).get("name"))))
        for np in by_kind["NodePool"]
        if (np.get("apiVersion") or "").startswith("karpenter.sh/")
    }
    daemons = []
    for ds in by_kind["DaemonSet"]:
        template = (ds.get("spec") or {}).get("template") or {}
        daemons.append(_pod_info({"metadata": template.get("metadata") or {}, **template}))
    nodes: dict[str, _Node] = {}
    node_capacity: dict[str, dict[str, int]] = {}
    for raw in by_kind["Node"]:
        meta = _meta(raw)
        name = str(meta.get("name"))
        labels = dict(meta.get("labels") or {})
        labels.setdefault(HOSTNAME, name)
        status = raw.get("status") or {}
        node_capacity[name] = _resources(status.get("capacity"))
        if meta.get("deletionTimestamp") or (raw.get("spec") or {}).get("unschedulable"):
            continue
        nodes[name] = _Node(
            name=name,
            labels=labels,
            taints=tuple(
                parse_taint(t)
                for t in (raw.get("spec") or {}).get("taints") or []
                if t.get("effect") in EFFECTS
            ),
            allocatable=_resources(status.get("allocatable")),
            pool=labels.get(NODEPOOL, ""),
        )
    registered = {str((n.get("spec") or {}).get("providerID") or "") for n in by_kind["Node"]}
    for raw in by_kind["NodeClaim"]:
        node = _claim_node(raw, pools, registered, daemons)
        if node is not None:
            nodes[node.name] = node
            node_capacity[node.name] = _resources((raw.get("status") or {}).get("capacity"))
    for key, node_name in bound_node.items():
        if node_name in nodes:
            nodes[node_name].bound.append(pods[key])
    return _Inputs(
        pods=pods,
        pending=pending,
        bound_node=bound_node,
        pools=pools,
        daemons=daemons,
        nodes=nodes,
        claims={_key(c): c for c in by_kind["PersistentVolumeClaim"]},
        volumes={str(_meta(v).get("name")): v for v in by_kind["PersistentVolume"]},
        classes={str(_meta(s).get("name")): s for s in by_kind["StorageClass"]},
        raw=[*objects, *(p for p in requested if p not in objects)],
        region=region,
        node_capacity=node_capacity,
    )


def _claim_node(
    raw: Mapping[str, Any],
    pools: Mapping[str, _Pool],
    registered: set[str],
    daemons: Sequence[_PodInfo],
) -> _Node | None:
    meta = _meta(raw)
    status = raw.get("status") or {}
    if meta.get("deletionTimestamp") or (
        status.get("providerID") and status["providerID"] in registered
    ):
        return None
    spec = raw.get("spec") or {}
    labels: dict[str, str] = {}
    for term in spec.get("requirements") or []:
        if term.get("operator") == "In" and len(term.get("values") or []) == 1:
            labels[term["key"]] = term["values"][0]
    labels.update(meta.get("labels") or {})
    taints = tuple(parse_taint(t) for t in spec.get("taints") or [])
    pool = pools.get(labels.get(NODEPOOL, ""))
    allocatable = _resources(status.get("allocatable")) if status.get("allocatable") else None
    if allocatable is None and pool is not None:
        # not launched: it may become any listed type, so it holds what the smallest holds
        listed = next(
            (
                t.get("values") or []
                for t in spec.get("requirements") or []
                if t.get("key") == INSTANCE_TYPE
            ),
            [],
        )
        types = [pool.instance_types[n] for n in listed if n in pool.instance_types]
        if types:
            if len(types) == 1:
                labels = {**types[0].labels, **labels}
            overhead = _daemon_requests(daemons, labels, taints)
            allocatable = {
                k: min(t.allocatable.get(k, 0) for t in types) - overhead.get(k, 0)
                for k in types[0].allocatable
            }
    if allocatable is None:
        return None
    return _Node(
        name=f"nodeclaim/{meta.get('name')}",
        labels=labels,
        taints=taints,
        allocatable=allocatable,
        pool=labels.get(NODEPOOL, ""),
    )


def _daemon_requests(
    daemons: Sequence[_PodInfo], labels: Mapping[str, str], taints: Sequence[Taint]
) -> dict[str, int]:
    return _add(*(d.requests for d in daemons if d.tolerates(taints) and d.accepts(labels)))


def _new_node_labels(
    pool: _Pool, instance_type: InstanceType, zone: str, capacity_type: str, region: str
) -> dict[str, str]:
    labels = {**instance_type.labels, **pool.labels}
    labels[INSTANCE_TYPE] = instance_type.name
    labels[ZONE] = zone
    labels[CAPACITY_TYPE] = capacity_type
    if region:
        labels.setdefault(REGION, region)
    return labels


def _cheapest(instance_type: InstanceType, capacity_type: str, zone: str) -> float | None:
    prices = [
        o.price
        for o in instance_type.offerings
        if o.available and o.capacity_type == capacity_type and o.zone == zone
    ]
    return min(prices) if prices else None


GPU_MEMORY_LABEL = "karpenter.k8s.aws/instance-gpu-memory"

# --- GPU fractions -----------------------------------------------------------------------------


def _device_memory(labels: Mapping[str, str]) -> int | None:
    value = labels.get(GPU_MEMORY_LABEL, "")
    return int(value) if value.isdigit() else None


def _fraction_on(pod: _PodInfo, device_memory: int | None) -> tuple[int, int] | None:
    """The pod's share of a device of ``device_memory`` MiB (gpu-memory pods depend on it).

    Raises:
        FractionError: the pod asks for more memory than one device has.
    """
    if "gpu-memory" not in pod.model.metadata.annotations:
        return pod.fraction
    return gpu_fraction_milli(pod.model, device_memory)


def _whole_and_fractions(
    pods: Iterable[_PodInfo], device_memory: int | None = None
) -> tuple[int, list[tuple[int, int]]]:
    """Whole GPUs requested (milli) and (milli, devices) fractional demands.

    Raises:
        FractionError: a ``gpu-memory`` pod asks for more than one device holds.
    """
    whole = 0
    fractions = []
    for pod in pods:
        if is_gpu_reservation_pod(pod.model):
            continue  # it holds a device the fractions bound there are packed onto
        whole += pod.requests.get(GPU, 0)
        fraction = _fraction_on(pod, device_memory)
        if fraction is not None:
            milli, devices = fraction
            if milli >= 1000:
                whole += 1000 * devices
            else:
                fractions.append((milli, devices))
    return whole, fractions


def _fractions_pack(devices: int, fractions: Sequence[tuple[int, int]]) -> bool:
    """First-fit decreasing of fractional demands onto ``devices`` physical GPUs."""
    free = [1000] * max(devices, 0)
    for milli, count in sorted(fractions, reverse=True):
        chosen = [i for i, f in enumerate(free) if f >= milli][:count]
        if len(chosen) < count:
            return False
        for i in chosen:
            free[i] -= milli
    return True


def _gpu_violations(
    where: str,
    gpu_allocatable: int,
    pods: Sequence[_PodInfo],
    bound: Sequence[_PodInfo] = (),
    labels: Mapping[str, str] | None = None,
) -> list[str]:
    try:
        whole, fractions = _whole_and_fractions([*pods, *bound], _device_memory(labels or {}))
    except FractionError as error:
        return [f"{where}: {error}"]
    if not fractions:
        return []
    devices = (gpu_allocatable - whole) // 1000
    if not _fractions_pack(devices, fractions):
        return [f"{where}: GPU fractions {fractions} do not pack onto {devices} free GPU(s)"]
    return []


# --- the checker -------------------------------------------------------------------------------


@dataclass
class _Placement:
    """Where each placed pending pod went."""

    node: dict[str, str] = field(default_factory=dict)
    zone: dict[str, str] = field(default_factory=dict)
    pool: dict[str, str] = field(default_factory=dict)
    new: set[str] = field(default_factory=set)
    labels: dict[str, dict[str, str]] = field(default_factory=dict)


def check_plan(
    objects: Sequence[Mapping[str, Any]],
    catalog: CatalogInput,
    plan_json: Mapping[str, Any],
    *,
    region: str = "us-east-1",
) -> list[str]:
    """Every violation of `plan.md` by ``plan_json`` for the inputs ``objects``.

    Args:
        objects: the input objects (decoded YAML/JSON), in file order.
        catalog: the instance types, one catalog for all NodePools or a list per NodePool.
        plan_json: the plan document (`-o json`).
        region: the region (for the region label of new nodes).
    """
    inputs = _read(objects, catalog, region)
    errors: list[str] = []
    errors.extend(_check_document(plan_json))
    errors.extend(_check_exactly_once(inputs, plan_json))
    placement = _Placement()
    for claim in plan_json.get("nodeClaims", []):
        errors.extend(_check_claim(inputs, claim, placement))
    for entry in plan_json.get("existingNodes", []):
        errors.extend(_check_existing(inputs, entry, placement))
    errors.extend(_check_topology(inputs, placement))
    errors.extend(_check_limits(inputs, plan_json))
    errors.extend(_check_gangs(inputs, plan_json, placement))
    errors.extend(_check_volumes(inputs, plan_json, placement))
    errors.extend(_check_weights(inputs, plan_json, placement))
    return errors


def _check_document(plan: Mapping[str, Any]) -> list[str]:
    errors = []
    if plan.get("apiVersion") != "jointer.dev/v1alpha1" or plan.get("kind") != "Plan":
        errors.append("document: apiVersion/kind must be jointer.dev/v1alpha1 Plan")
    claims = plan.get("nodeClaims", [])
    total = sum(float(c["pricePerHour"]) for c in claims)
    cost = float(plan.get("costPerHour", -1))
    if abs(total - cost) > PRICE_EPSILON * max(1, len(claims)):
        errors.append(f"costPerHour {cost} != sum of pricePerHour {total}")
    lower = float(plan.get("lowerBoundPerHour", -1))
    if lower < 0 or lower > cost + PRICE_EPSILON:
        errors.append(f"lowerBoundPerHour {lower} not in [0, costPerHour {cost}]")
    solver = plan.get("solver") or {}
    if solver.get("status") not in STATUSES:
        errors.append(f"solver.status {solver.get('status')!r} not one of {sorted(STATUSES)}")
    names = [c["name"] for c in claims]
    if len(set(names)) != len(names):
        errors.append("nodeClaims: duplicate names")
    return errors


def _check_exactly_once(inputs: _Inputs, plan: Mapping[str, Any]) -> list[str]:
    seen: dict[str, int] = defaultdict(int)
    for claim in plan.get("nodeClaims", []):
        for pod in claim["pods"]:
            seen[pod] += 1
        if not claim["pods"]:
            seen["<empty NodeClaim " + claim["name"] + ">"] += 1
    for node in plan.get("existingNodes", []):
        for pod in node["pods"]:
            seen[pod] += 1
    for entry in [*plan.get("unschedulable", []), *plan.get("ignored", [])]:
        seen[entry["pod"]] += 1
        if not entry.get("reason"):
            errors_reason = f"{entry['pod']}: empty reason"
            seen[errors_reason] += 1
    errors = [
        f"pod {key} appears {count} times" for key, count in sorted(seen.items()) if count > 1
    ]
    errors.extend(
        f"{key} is not a pending input pod" for key in sorted(seen) if key not in inputs.pending
    )
    errors.extend(
        f"pending pod {key} is missing from the plan"
        for key in sorted(inputs.pending)
        if key not in seen
    )
    return errors


def _check_claim(  # noqa: PLR0912 - one rule after another, kept in plan.md order
    inputs: _Inputs, claim: Mapping[str, Any], placement: _Placement
) -> list[str]:
    name = claim["name"]
    where = f"nodeClaim {name}"
    pool = inputs.pools.get(claim["nodePool"])
    if pool is None:
        return [f"{where}: unknown NodePool {claim['nodePool']}"]
    pods = [inputs.pending[k] for k in claim["pods"] if k in inputs.pending]
    zone, capacity_type = claim["zone"], claim["capacityType"]
    errors: list[str] = []
    types = list(claim["instanceTypes"])
    if not types:
        return [f"{where}: no instanceTypes"]
    if len(set(types)) != len(types):
        errors.append(f"{where}: duplicate instanceTypes")
    prices: dict[str, float] = {}
    labels_of: dict[str, dict[str, str]] = {}
    pod_total = _add(*(p.requests for p in pods))
    # pods with the same nodeSelector and node affinity accept the same types: judge them once
    signatures = [_node_signature(p) for p in pods]
    # pods without GPUs, fractions or gpu-memory add nothing to the GPU rule
    gpu_pods = [
        p
        for p in pods
        if p.requests.get(GPU, 0)
        or p.fraction is not None
        or "gpu-memory" in p.model.metadata.annotations
    ]
    for type_name in types:
        instance_type = pool.instance_types.get(type_name)
        if instance_type is None:
            errors.append(f"{where}: {type_name} is not an instance type of NodePool {pool.name}")
            continue
        offering = _offering(inputs, pool, instance_type, zone, capacity_type)
        if offering.price is None:
            errors.append(
                f"{where}: {type_name} has no available {capacity_type} offering in {zone}"
            )
            continue
        prices[type_name] = offering.price
        labels = offering.labels
        labels_of[type_name] = labels
        if not offering.in_pool:
            errors.append(f"{where}: {type_name} violates NodePool {pool.name} requirements")
        short = _fits(_add(pod_total, offering.overhead), instance_type.allocatable)
        if short:
            errors.append(f"{where}: {type_name} too small: {', '.join(short)}")
        if gpu_pods:
            errors.extend(
                _gpu_violations(
                    f"{where} ({type_name})",
                    instance_type.allocatable.get(GPU, 0),
                    gpu_pods,
                    labels=instance_type.labels,
                )
            )
        accepted: dict[tuple[object, str], bool] = {}
        for pod, signature in zip(pods, signatures, strict=True):
            if signature not in accepted:
                accepted[signature] = pod.accepts(labels)
            if not accepted[signature]:
                errors.append(f"{where}: {pod.key} node requirements reject {type_name}")
    if pool.requirements.has_min_values() and not pool.requirements.min_values_ok(
        list(labels_of.values())
    ):
        errors.append(f"{where}: instanceTypes do not meet NodePool minValues")
    errors.extend(
        f"{where}: {pod.key} does not tolerate NodePool {pool.name} taints"
        for pod in pods
        if not pod.tolerates(pool.taints)
    )
    if prices:
        cheapest = min(prices.values())
        ordered = [prices[t] for t in types if t in prices]
        if ordered != sorted(ordered):
            errors.append(f"{where}: instanceTypes not sorted cheapest first")
        if claim["instanceType"] not in prices or prices[claim["instanceType"]] > cheapest + 1e-9:
            errors.append(
                f"{where}: instanceType {claim['instanceType']} is not the cheapest listed"
            )
        if abs(float(claim["pricePerHour"]) - cheapest) > PRICE_EPSILON:
            errors.append(f"{where}: pricePerHour {claim['pricePerHour']} != {cheapest}")
        chosen = pool.instance_types.get(claim["instanceType"])
        if chosen is not None and claim["instanceType"] in labels_of:
            overhead = _daemon_requests(
                inputs.daemons, labels_of[claim["instanceType"]], pool.taints
            )
            expected = _add(pod_total, overhead)
            declared = _resources(claim.get("requests"))
            for resource, amount in expected.items():
                got = declared.get(resource, 0)
                if got < amount or (resource != GPU and got != amount):
                    errors.append(
                        f"{where}: requests.{resource} {got} != pods + DaemonSets {amount}"
                    )
    node_labels = labels_of.get(claim["instanceType"], {**pool.labels, ZONE: zone})
    for pod in pods:
        placement.node[pod.key] = name
        placement.zone[pod.key] = zone
        placement.pool[pod.key] = pool.name
        placement.new.add(pod.key)
        placement.labels[pod.key] = node_labels
    return errors


def _check_existing(inputs: _Inputs, entry: Mapping[str, Any], placement: _Placement) -> list[str]:
    name = entry["name"]
    node = inputs.nodes.get(name)
    if node is None:
        return [f"existingNodes: {name} is not a schedulable existing node or in-flight NodeClaim"]
    where = f"existing node {name}"
    pods = [inputs.pending[k] for k in entry["pods"] if k in inputs.pending]
    errors = []
    total = _add(*(p.requests for p in [*node.bound, *pods]))
    short = _fits(total, node.allocatable)
    if short:
        errors.append(f"{where}: over allocatable: {', '.join(short)}")
    errors.extend(
        _gpu_violations(where, node.allocatable.get(GPU, 0), pods, node.bound, node.labels)
    )
    for pod in pods:
        if not pod.accepts(node.labels, name):
            errors.append(f"{where}: {pod.key} node requirements reject it")
        if not pod.tolerates(node.taints):
            errors.append(f"{where}: {pod.key} does not tolerate its taints")
        placement.node[pod.key] = name
        placement.zone[pod.key] = node.labels.get(ZONE, "")
        placement.pool[pod.key] = node.pool
        placement.labels[pod.key] = node.labels
    return errors


# --- topology ----------------------------------------------------------------------------------


def _selector_matches(  # noqa: PLR0911 - one return per operator
    selector: Mapping[str, Any] | None, labels: Mapping[str, str]
) -> bool:
    if selector is None:
        return False
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression["key"], expression["operator"]
        values = expression.get("values") or []
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


def _domains(inputs: _Inputs, placement: _Placement) -> dict[str, tuple[str, str]]:
    """(zone, hostname) of every pod that is or will be on a node."""
    result = {}
    for key, node_name in inputs.bound_node.items():
        node = inputs.nodes.get(node_name)
        zone = node.labels.get(ZONE, "") if node is not None else ""
        if node is None:
            raw = next(
                (
                    o
                    for o in inputs.raw
                    if o.get("kind") == "Node" and _meta(o).get("name") == node_name
                ),
                None,
            )
            zone = ((_meta(raw).get("labels") or {}).get(ZONE, "")) if raw else ""
        result[key] = (zone, node_name)
    for key, node_name in placement.node.items():
        result[key] = (placement.zone[key], node_name)
    return result


def _eligible_zones(inputs: _Inputs, pod: _PodInfo) -> set[str]:
    zones = set()
    for pool in inputs.pools.values():
        if not pod.tolerates(pool.taints):
            continue
        for instance_type in pool.instance_types.values():
            for offering in instance_type.offerings:
                if not offering.available or offering.zone in zones:
                    continue
                labels = _new_node_labels(
                    pool, instance_type, offering.zone, offering.capacity_type, inputs.region
                )
                if pool.requirements.matches(labels) and pod.accepts(labels):
                    zones.add(offering.zone)
    for node in inputs.nodes.values():
        if pod.accepts(node.labels, node.name) and pod.tolerates(node.taints):
            zones.add(node.labels.get(ZONE, ""))
    zones.discard("")
    return zones


def _check_topology(inputs: _Inputs, placement: _Placement) -> list[str]:  # noqa: PLR0912
    errors: list[str] = []
    domains = _domains(inputs, placement)
    everyone = inputs.pods
    carriers: dict[tuple[str, frozenset[str], str], list[tuple[str, Any]]] = defaultdict(list)
    # pods of one Deployment carry the same constraints: count and match each selector once
    spread_counts: dict[tuple[str, str, int], dict[str, int]] = {}
    matches: dict[tuple[frozenset[str], str, int], dict[str, list[str]]] = {}
    for key in sorted(placement.node):
        pod = inputs.pending[key]
        zone, host = domains[key]
        for spread in pod.spec.get("topologySpreadConstraints") or []:
            if spread.get("whenUnsatisfiable", "DoNotSchedule") != "DoNotSchedule":
                continue
            topology = spread.get("topologyKey")
            if topology not in TOPOLOGY_KEYS:
                continue
            index = 0 if topology == ZONE else 1
            selector = spread.get("labelSelector")
            counted = (pod.namespace, repr(selector), index)
            counts = spread_counts.get(counted)
            if counts is None:
                counts = defaultdict(int)
                for other, where in domains.items():
                    info = everyone[other]
                    if info.namespace == pod.namespace and _selector_matches(selector, info.labels):
                        counts[where[index]] += 1
                spread_counts[counted] = counts
            mine = zone if index == 0 else host
            if topology == ZONE:
                eligible = _eligible_zones(inputs, pod)
                minimum = min((counts.get(z, 0) for z in eligible), default=0)
                if len(eligible) < int(spread.get("minDomains") or 1):
                    minimum = 0
            else:
                minimum = 0
            skew = counts.get(mine, 0) - minimum
            if skew > int(spread.get("maxSkew", 1)):
                errors.append(
                    f"pod {key}: {topology} spread skew {skew} > maxSkew "
                    f"{spread.get('maxSkew')} in {mine} (counts {dict(counts)})"
                )
        affinity = pod.spec.get("affinity") or {}
        for anti, source in ((True, "podAntiAffinity"), (False, "podAffinity")):
            terms = (affinity.get(source) or {}).get(
                "requiredDuringSchedulingIgnoredDuringExecution"
            ) or []
            for term in terms:
                topology = term.get("topologyKey")
                if topology not in TOPOLOGY_KEYS:
                    continue
                index = 0 if topology == ZONE else 1
                spaces = set(term.get("namespaces") or [pod.namespace])
                mine = zone if index == 0 else host
                selector = term.get("labelSelector")
                matched = (frozenset(spaces), repr(selector), index)
                by_domain = matches.get(matched)
                if by_domain is None:
                    by_domain = defaultdict(list)
                    for other, where in domains.items():
                        if everyone[other].namespace in spaces and _selector_matches(
                            selector, everyone[other].labels
                        ):
                            by_domain[where[index]].append(other)
                    matches[matched] = by_domain
                matching = [other for other in by_domain.get(mine, ()) if other != key]
                if anti and matching:
                    errors.append(
                        f"pod {key}: anti-affinity on {topology} violated in {mine} by {matching}"
                    )
                if not anti:
                    carriers[(topology, frozenset(spaces), repr(term.get("labelSelector")))].append(
                        (key, term.get("labelSelector"))
                    )
    errors.extend(_check_first_pod(inputs, placement, domains, carriers))
    return errors


def _check_first_pod(
    inputs: _Inputs,
    placement: _Placement,
    domains: Mapping[str, tuple[str, str]],
    carriers: Mapping[tuple[str, frozenset[str], str], list[tuple[str, Any]]],
) -> list[str]:
    """Required pod affinity as kube-scheduler applies it, pod after pod.

    A carrier needs a matching pod in its domain when it is scheduled; only while no matching
    pod exists anywhere may a pod that matches its own term go anywhere (the first pod). So a
    plan is valid when some order works: every domain hosting carriers holds a running match
    or a planned match that does not carry the term (placed first), except at most one domain
    seeded by a self-matching carrier, and that only when no match runs anywhere.
    """
    errors: list[str] = []
    for (topology, spaces, _), members in sorted(carriers.items()):
        selector = members[0][1]
        index = 0 if topology == ZONE else 1
        carrying = {key for key, _ in members}
        matches = [
            other
            for other in domains
            if inputs.pods[other].namespace in spaces
            and _selector_matches(selector, inputs.pods[other].labels)
        ]
        running = [m for m in matches if m not in placement.node]
        support = {domains[m][index] for m in matches if m not in carrying}
        unsupported: dict[str, list[str]] = defaultdict(list)
        for key in sorted(carrying):
            if domains[key][index] not in support:
                unsupported[domains[key][index]].append(key)
        seeds = [d for d, pods in unsupported.items() if any(p in matches for p in pods)]
        allowed = set() if running or not seeds else {min(seeds)}
        for domain, pods in sorted(unsupported.items()):
            if domain in allowed:
                continue
            errors.append(
                f"pods {pods}: affinity on {topology} unmet in {domain}: no matching pod "
                f"there{' (one runs elsewhere)' if running else ''} and only the first pod of "
                f"a self-matching group may go anywhere (carriers in {len(unsupported)} "
                "unsupported domains)"
            )
    return errors


# --- limits, gangs, volumes, weights -----------------------------------------------------------


def _check_limits(inputs: _Inputs, plan: Mapping[str, Any]) -> list[str]:
    errors: list[str] = []
    for pool in inputs.pools.values():
        if pool.limits is None:
            continue
        used = _existing_usage(inputs, pool)
        claims = [c for c in plan.get("nodeClaims", []) if c["nodePool"] == pool.name]
        chosen = []
        for claim in claims:
            instance_type = pool.instance_types.get(claim["instanceType"])
            chosen.append(dict(instance_type.capacity) if instance_type else {})
        total = _add(used, *chosen, {"nodes": 1000 * len(claims)})
        for resource, limit in pool.limits.items():
            if total.get(resource, 0) > limit:
                errors.append(
                    f"NodePool {pool.name}: {resource} {total.get(resource, 0)} > limit {limit}"
                )
        # a NodeClaim may launch as any type it lists (Karpenter counts the largest option):
        # the limits must hold when every claim launches as its largest listed type
        largest: list[dict[str, int]] = []
        for claim, capacity in zip(claims, chosen, strict=True):
            worst = dict(capacity)
            for type_name in claim["instanceTypes"]:
                instance_type = pool.instance_types.get(type_name)
                for r, v in (instance_type.capacity if instance_type else {}).items():
                    worst[r] = max(worst.get(r, 0), v)
            largest.append(worst)
        worst_total = _add(used, *largest, {"nodes": 1000 * len(claims)})
        for resource, limit in pool.limits.items():
            if worst_total.get(resource, 0) > limit >= total.get(resource, 0):
                errors.append(
                    f"NodePool {pool.name}: {resource} {worst_total.get(resource, 0)} > limit "
                    f"{limit} when each NodeClaim launches its largest listed instance type"
                )
    return errors


def _existing_usage(inputs: _Inputs, pool: _Pool) -> dict[str, int]:
    """What the pool's existing nodes (and in-flight NodeClaims) count against its limits."""
    used: dict[str, int] = defaultdict(int)
    for node_name, capacity in inputs.node_capacity.items():
        node = inputs.nodes.get(node_name)
        labels = node.labels if node is not None else _raw_node_labels(inputs, node_name)
        if labels.get(NODEPOOL) != pool.name:
            continue
        for k, v in capacity.items():
            used[k] += v
        used["nodes"] += 1000
    return used


def _node_labels(inputs: _Inputs, node_name: str) -> Mapping[str, str]:
    node = inputs.nodes.get(node_name)
    return node.labels if node is not None else _raw_node_labels(inputs, node_name)


def _raw_node_labels(inputs: _Inputs, node_name: str) -> Mapping[str, str]:
    for obj in inputs.raw:
        if obj.get("kind") == "Node" and _meta(obj).get("name") == node_name:
            return _meta(obj).get("labels") or {}
        if obj.get("kind") == "NodeClaim" and f"nodeclaim/{_meta(obj).get('name')}" == node_name:
            return _meta(obj).get("labels") or {}
    return {}


def _check_gangs(inputs: _Inputs, plan: Mapping[str, Any], placement: _Placement) -> list[str]:
    context = build_context(inputs.raw)
    unschedulable = {u["pod"] for u in plan.get("unschedulable", [])}
    ignored = {u["pod"] for u in plan.get("ignored", [])}
    groups: dict[Any, list[_PodInfo]] = defaultdict(list)
    refs = {}
    for pod in inputs.pending.values():
        ref = detect_group(pod.model)
        if ref is not None:
            groups[ref.group_id].append(pod)
            refs[ref.group_id] = ref
    errors: list[str] = []
    for group_id, members in sorted(groups.items()):
        info = group_info(refs[group_id], context)
        if not info.is_gang or info.min_count is None:
            continue
        name = info.key
        keys = {p.key for p in members}
        considered = keys - ignored
        if not considered:
            continue
        if info.ready_count < info.min_count and not info.size_from_first_pod:
            errors.append(
                f"gang {name}: incomplete ({info.ready_count} < {info.min_count}) but planned"
            )
            continue
        placed = [k for k in considered if k in placement.node]
        running = [m for m in info.members if m in inputs.bound_node and m not in inputs.pending]
        if placed and len(placed) + len(running) < info.min_count:
            errors.append(
                f"gang {name}: partial placement {len(placed)} + {len(running)} running "
                f"< minimum {info.min_count}"
            )
        if not placed and considered - unschedulable:
            errors.append(f"gang {name}: members neither placed nor unschedulable")
        # members already running tie the rest to their NodePool and zone
        running_labels = [_node_labels(inputs, inputs.bound_node[m]) for m in running]
        pools = {placement.pool[k] for k in placed}
        zones = {placement.zone[k] for k in placed}
        if placed:
            pools |= {labels[NODEPOOL] for labels in running_labels if labels.get(NODEPOOL)}
            zones |= {labels[ZONE] for labels in running_labels if labels.get(ZONE)}
        if len(pools) > 1:
            errors.append(f"gang {name}: placed on several NodePools {sorted(pools)}")
        if info.same_zone and len(zones) > 1:
            errors.append(f"gang {name}: placed in several zones {sorted(zones)}")
    return errors


def _volume_terms(inputs: _Inputs, pod: _PodInfo) -> list[list[NodeSelectorTerm]] | str:
    """Per claim, the node selector terms (ORed) the node must satisfy; or a missing claim."""
    result = []
    for claim_name in pod.claims:
        claim = inputs.claims.get(f"{pod.namespace}/{claim_name}")
        if claim is None:
            return f"persistentvolumeclaim {pod.namespace}/{claim_name} not found"
        spec = claim.get("spec") or {}
        volume_name = spec.get("volumeName")
        if volume_name:
            volume = inputs.volumes.get(volume_name)
            if volume is None:
                return f"persistentvolume {volume_name} not found"
            required = ((volume.get("spec") or {}).get("nodeAffinity") or {}).get("required")
            if required:
                result.append(
                    [NodeSelectorTerm.from_dict(t) for t in required.get("nodeSelectorTerms") or []]
                )
            continue
        storage_class = inputs.classes.get(spec.get("storageClassName") or "")
        if storage_class and storage_class.get("allowedTopologies"):
            terms = []
            for term in storage_class["allowedTopologies"]:
                expressions = [
                    {"key": e["key"], "operator": "In", "values": list(e.get("values") or [])}
                    for e in term.get("matchLabelExpressions") or []
                ]
                terms.append(NodeSelectorTerm.from_dict({"matchExpressions": expressions}))
            result.append(terms)
    return result


def _check_volumes(inputs: _Inputs, plan: Mapping[str, Any], placement: _Placement) -> list[str]:
    errors = []
    unschedulable = {u["pod"]: u["reason"] for u in plan.get("unschedulable", [])}
    for key, pod in sorted(inputs.pending.items()):
        if not pod.claims:
            continue
        terms = _volume_terms(inputs, pod)
        if isinstance(terms, str):
            if key in placement.node:
                errors.append(f"pod {key}: placed although {terms}")
            elif key in unschedulable and "not found" not in unschedulable[key]:
                errors.append(f"pod {key}: unschedulable reason does not say {terms!r}")
            continue
        if key not in placement.node:
            continue
        labels = placement.labels[key]
        errors.extend(
            f"pod {key}: volume topology not satisfied by {placement.node[key]}"
            for alternatives in terms
            if not any(t.matches(labels) for t in alternatives)
        )
    return errors


def _pod_has_topology(pod: _PodInfo) -> bool:
    affinity = pod.spec.get("affinity") or {}
    return bool(
        pod.spec.get("topologySpreadConstraints")
        or affinity.get("podAffinity")
        or affinity.get("podAntiAffinity")
    )


def _check_weights(inputs: _Inputs, plan: Mapping[str, Any], placement: _Placement) -> list[str]:
    claims: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for claim in plan.get("nodeClaims", []):
        claims[claim["nodePool"]].append(claim)
    usage: dict[str, dict[str, int]] = {}
    for pool in inputs.pools.values():
        chosen = [
            dict(pool.instance_types[c["instanceType"]].capacity)
            for c in claims[pool.name]
            if c["instanceType"] in pool.instance_types
        ]
        usage[pool.name] = _add(
            _existing_usage(inputs, pool), *chosen, {"nodes": 1000 * len(claims[pool.name])}
        )
    errors = []
    rooms: dict[str, list[_Room]] = {}
    for key in sorted(placement.new):
        pod = inputs.pending[key]
        if detect_group(pod.model) is not None or _pod_has_topology(pod) or pod.claims:
            continue
        pool = inputs.pools[placement.pool[key]]
        for other in inputs.pools.values():
            if other.weight <= pool.weight:
                continue
            if other.name not in rooms:
                rooms[other.name] = _claim_rooms(inputs, other, claims[other.name])
            if _pool_could_take(inputs, other, pod, usage[other.name]) or _claim_has_room(
                other, rooms[other.name], pod
            ):
                errors.append(
                    f"pod {key}: placed on NodePool {pool.name} (weight {pool.weight}) although "
                    f"NodePool {other.name} (weight {other.weight}) could take it"
                )
                break
    return errors


def _pool_could_take(inputs: _Inputs, pool: _Pool, pod: _PodInfo, used: Mapping[str, int]) -> bool:
    """Whether one more node of the pool, within the limits ``used`` leaves, holds the pod."""
    if not pod.tolerates(pool.taints):
        return False
    for instance_type in pool.instance_types.values():
        if pool.limits is not None:
            one = {**instance_type.capacity, "nodes": 1000}
            if any(used.get(r, 0) + one.get(r, 0) > v for r, v in pool.limits.items()):
                continue
        for offering in instance_type.offerings:
            if not offering.available:
                continue
            node = _offering(inputs, pool, instance_type, offering.zone, offering.capacity_type)
            if not (node.in_pool and pod.accepts(node.labels)):
                continue
            if _fits(_add(pod.requests, node.overhead), instance_type.allocatable):
                continue
            if pod.fraction is not None and instance_type.allocatable.get(GPU, 0) < 1000:
                continue
            return True
    return False


_Room = tuple[dict[str, str], dict[str, int], Mapping[str, int]]
"""A planned NodeClaim's node labels, the requests of its pods and its type's allocatable."""


def _claim_rooms(inputs: _Inputs, pool: _Pool, claims: Sequence[Mapping[str, Any]]) -> list[_Room]:
    """The planned NodeClaims of the pool with an instanceType of the pool, as rooms."""
    rooms = []
    for claim in claims:
        instance_type = pool.instance_types.get(claim["instanceType"])
        if instance_type is None:
            continue
        offering = _offering(inputs, pool, instance_type, claim["zone"], claim["capacityType"])
        rooms.append(
            (offering.labels, _resources(claim.get("requests")), instance_type.allocatable)
        )
    return rooms


def _claim_has_room(pool: _Pool, rooms: Sequence[_Room], pod: _PodInfo) -> bool:
    """Whether a planned NodeClaim of the pool has room for the pod on its instanceType."""
    if pod.fraction is not None or not pod.tolerates(pool.taints):
        return False
    for labels, requests, allocatable in rooms:
        if pod.accepts(labels) and not _fits(_add(requests, pod.requests), allocatable):
            return True
    return False


# --- helpers for tests -------------------------------------------------------------------------


def catalogs_for(
    objects: Sequence[Mapping[str, Any]], region: str = "us-east-1"
) -> dict[str, Sequence[InstanceType]]:
    """The built-in catalog of ``region`` per NodePool, resolved for its EC2NodeClass."""
    from cloudprovider.aws.catalog import builtin_catalog  # noqa: PLC0415
    from cloudprovider.aws.nodeclass import parse_nodeclass  # noqa: PLC0415

    nodeclasses = {str(_meta(o).get("name")): o for o in objects if o.get("kind") == "EC2NodeClass"}
    cache: dict[str | None, Catalog] = {}
    result: dict[str, Sequence[InstanceType]] = {}
    for obj in objects:
        if obj.get("kind") != "NodePool":
            continue
        ref = (
            (((obj.get("spec") or {}).get("template") or {}).get("spec") or {}).get("nodeClassRef")
            or {}
        ).get("name")
        key = ref if ref in nodeclasses else None
        if key not in cache:
            nodeclass = parse_nodeclass(nodeclasses[key]) if key is not None else None
            cache[key] = builtin_catalog(region, nodeclass=nodeclass)
        result[str(_meta(obj).get("name"))] = cache[key].instance_types
    return result
