"""`jointer plan`: the provisioner's planning step over manifest files (`spec/plan.md`).

Exit status 0 when a plan was computed (even if some pods cannot be placed), 2 for unusable
input, with a message on standard error naming the file, the document and the field.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TextIO

import orjson

_INDENTED: Final = orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE
EXIT_OK: Final = 0
EXIT_INPUT: Final = 2
_DEFAULT_TIME_LIMIT: Final = 5.0

CORE_KINDS: Final[Mapping[tuple[str, str], str]] = {
    ("v1", "Pod"): "pods",
    ("v1", "Node"): "nodes",
    ("apps/v1", "DaemonSet"): "daemonsets",
    ("v1", "PersistentVolumeClaim"): "claims",
    ("v1", "PersistentVolume"): "volumes",
    ("storage.k8s.io/v1", "StorageClass"): "storage_classes",
    ("policy/v1", "PodDisruptionBudget"): "pdbs",
    ("scheduling.k8s.io/v1", "PriorityClass"): "priority_classes",
    ("karpenter.sh/v1", "NodePool"): "nodepools",
    ("karpenter.sh/v1", "NodeClaim"): "nodeclaims",
    ("karpenter.sh/v1alpha1", "NodeOverlay"): "overlays",
    ("karpenter.k8s.aws/v1", "EC2NodeClass"): "nodeclasses",
}
POD_GROUP_GROUPS: Final = frozenset(
    {
        "scheduling.run.ai",
        "scheduling.volcano.sh",
        "scheduling.x-k8s.io",
        "kueue.x-k8s.io",
        "scheduling.k8s.io",
        "leaderworkerset.x-k8s.io",
        "jobset.x-k8s.io",
        "autoscaling.x-k8s.io",
        "batch",
        "llmaz.io",
    }
)
RAW_KINDS: Final = frozenset({("v1", "PodTemplate")})
"""Core kinds read raw with the pod-group objects (ProvisioningRequests' PodTemplates)."""

BUFFER_SOURCES: Final = frozenset(
    {
        ("v1", "PodTemplate"),
        ("apps/v1", "Deployment"),
        ("apps/v1", "ReplicaSet"),
        ("apps/v1", "StatefulSet"),
    }
)
"""What CapacityBuffers (``autoscaling.x-k8s.io``) shape their chunks by."""


class InputError(ValueError):
    """Unusable input; the message names the file, document and field."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `jointer plan`."""
    parser.add_argument(
        "-f",
        "--filename",
        dest="files",
        action="append",
        required=True,
        metavar="PATH",
        help="YAML/JSON file, directory, or - for standard input (repeatable)",
    )
    parser.add_argument("--catalog", metavar="CATALOG.json", help="instance catalog file")
    parser.add_argument("--region", default="us-east-1", help="built-in catalog region")
    parser.add_argument(
        "--time-limit",
        type=float,
        default=None,
        metavar="SECONDS",
        help="optimiser time cap (default: 5; stops earlier on a budget growing with the pods)",
    )
    parser.add_argument(
        "--policy",
        choices=("jointer", "greedy"),
        default="jointer",
        help="optimiser, or Karpenter-style first-fit-decreasing",
    )
    parser.add_argument("-o", "--output", choices=("json", "table"), default=None)
    parser.add_argument(
        "--quiet",
        action="store_true",
        help="no progress bar (shown on a terminal for large inputs)",
    )


def run(args: argparse.Namespace) -> int:
    """Run `jointer plan` and return its exit status."""
    from provisioner.app.progress import PlanProgress, wanted  # noqa: PLC0415

    output = args.output or ("table" if sys.stdout.isatty() else "json")
    progress = PlanProgress(sys.stderr) if wanted(sys.stderr, quiet=args.quiet) else None
    try:
        result = plan_files(
            args.files,
            catalog_path=args.catalog,
            region=args.region,
            time_limit=args.time_limit,
            policy=args.policy,
            stderr=sys.stderr,
            progress=progress,
        )
    except InputError as error:
        sys.stderr.write(f"jointer plan: error: {error}\n")
        return EXIT_INPUT
    finally:
        if progress is not None:
            progress.finish()
    from provisioner.controllers.provisioning.plan import render_table  # noqa: PLC0415

    if output == "json":
        # orjson writes what json.dump(indent=2) writes, ten times faster (10k pods: 0.2 s)
        sys.stdout.write(orjson.dumps(result.to_json(), option=_INDENTED).decode())
    else:
        sys.stdout.write(render_table(result) + "\n")
    return EXIT_OK


@dataclass
class _Inputs:
    objects: dict[str, list[tuple[str, Any]]] = field(default_factory=dict)
    raw_groups: list[Mapping[str, Any]] = field(default_factory=list)
    """Pod-group objects (pods are validated once, as they are classified)."""
    cluster: list[Any] = field(default_factory=list)
    """Every document the cluster state takes, as read (pods as parsed models)."""


def plan_files(
    files: Sequence[str],
    *,
    catalog_path: str | None,
    region: str,
    time_limit: float | None,
    policy: str,
    stderr: TextIO,
    stdin: TextIO | None = None,
    deterministic_time: float | None = None,
    random_seed: int = 0,
    progress: Callable[[str, int], None] | None = None,
) -> Any:
    """Read the manifests and the catalog and plan; raise :class:`InputError` on bad input.

    ``time_limit`` None: the default 5 s; a number: at most that (the planner's adaptive
    budget stops it earlier either way, see :func:`planner_config`). ``progress(stage, pods)``
    hears of each stage (`provisioner.app.progress.PlanProgress.STAGES`).
    """
    from provisioner.kube.bulk import collector_paused  # noqa: PLC0415

    # reading builds hundreds of thousands of long-lived objects (10k pods: 2.7 s of 3.5 s
    # went to the collector's passes over them)
    with collector_paused():
        return _plan_files(
            files,
            catalog_path=catalog_path,
            region=region,
            time_limit=time_limit,
            policy=policy,
            stderr=stderr,
            stdin=stdin,
            deterministic_time=deterministic_time,
            random_seed=random_seed,
            progress=progress,
        )


def _plan_files(
    files: Sequence[str],
    *,
    catalog_path: str | None,
    region: str,
    time_limit: float | None,
    policy: str,
    stderr: TextIO,
    stdin: TextIO | None,
    deterministic_time: float | None,
    random_seed: int,
    progress: Callable[[str, int], None] | None,
) -> Any:
    from provisioner.app.manifests import ManifestError, load_documents  # noqa: PLC0415

    try:
        documents = load_documents(files, stdin=stdin, workers=os.cpu_count() or 1)
    except ManifestError as error:
        raise InputError(str(error)) from error
    inputs = _classify(documents, stderr)
    pods = len(inputs.objects.get("pods", []))

    def stage(name: str) -> None:
        if progress is not None:
            progress(name, pods)

    stage("building the cluster state")
    from provisioner.controllers.provisioning.podfacts import PodError  # noqa: PLC0415

    config = planner_config(
        time_limit,
        policy=policy,
        deterministic_time=deterministic_time,
        random_seed=random_seed,
    )
    try:
        result = _decide(
            inputs, config, catalog_path=catalog_path, region=region, stderr=stderr, stage=stage
        )
    except PodError as error:
        raise InputError(_located(str(error), inputs)) from error
    stage("done")
    return result


def planner_config(
    time_limit: float | None,
    *,
    policy: str = "jointer",
    deterministic_time: float | None = None,
    random_seed: int = 0,
) -> Any:
    """The planner settings of `jointer plan`.

    ``time_limit`` is a cap, not a floor: with or without it the planning step stops early on
    its adaptive budget (``solver.cpsat.budget_seconds``); None means the default 5 s.
    """
    from provisioner.controllers.provisioning.planner import PlannerConfig  # noqa: PLC0415

    return PlannerConfig(
        policy="greedy" if policy == "greedy" else "jointer",
        time_limit_seconds=_DEFAULT_TIME_LIMIT if time_limit is None else time_limit,
        adaptive_budget=True,
        num_workers=1 if deterministic_time is not None else 2,
        random_seed=random_seed,
        deterministic_time=deterministic_time,
    )


def _located(message: str, inputs: _Inputs) -> str:
    """Prefix a pod or DaemonSet error with the file and document the object came from."""
    lowered = message.lower()
    for role, kind in (("pods", "pod"), ("daemonsets", "daemonset")):
        for where, obj in inputs.objects.get(role, []):
            name = f"{kind} {obj.metadata.namespace or 'default'}/{obj.metadata.name}:"
            if lowered.startswith(name):
                return f"{where}: {message}"
    return message


def _classify(documents: Sequence[Any], stderr: TextIO) -> _Inputs:
    from provisioner.apis.base import parse_object  # noqa: PLC0415
    from provisioner.apis.errors import ApiValidationError  # noqa: PLC0415

    models = _models()
    inputs = _Inputs()
    for document in documents:
        role = CORE_KINDS.get((document.api_version, document.kind))
        group = document.api_version.split("/")[0] if "/" in document.api_version else ""
        if role is None:
            if group in POD_GROUP_GROUPS or (document.api_version, document.kind) in RAW_KINDS:
                inputs.raw_groups.append(document.body)
                inputs.cluster.append(document.body)
                continue
            if (document.api_version, document.kind) in BUFFER_SOURCES:
                inputs.cluster.append(document.body)
                continue
            stderr.write(
                f"jointer plan: warning: {document.where}: skipping unknown kind "
                f"{document.api_version}/{document.kind}\n"
            )
            continue
        if role == "nodeclasses":
            inputs.objects.setdefault(role, []).append((document.where, document.body))
            continue
        try:
            parsed = parse_object(models[role], document.body, kind=document.kind)
        except ApiValidationError as error:
            raise InputError(f"{document.where}: {error}") from error
        inputs.objects.setdefault(role, []).append((document.where, parsed))
        # pods are validated once: the cluster state takes the parsed model
        inputs.cluster.append(parsed if role == "pods" else document.body)
    return inputs


def _models() -> dict[str, Any]:
    from provisioner.apis import core  # noqa: PLC0415
    from provisioner.apis.nodeclaim import NodeClaim  # noqa: PLC0415
    from provisioner.apis.nodeoverlay import NodeOverlay  # noqa: PLC0415
    from provisioner.apis.nodepool import NodePool  # noqa: PLC0415

    return {
        "pods": core.Pod,
        "nodes": core.Node,
        "daemonsets": core.DaemonSet,
        "claims": core.PersistentVolumeClaim,
        "volumes": core.PersistentVolume,
        "storage_classes": core.StorageClass,
        "pdbs": core.PodDisruptionBudget,
        "priority_classes": core.PriorityClass,
        "nodepools": NodePool,
        "nodeclaims": NodeClaim,
        "overlays": NodeOverlay,
    }


def _decide(
    inputs: _Inputs,
    config: Any,
    *,
    catalog_path: str | None,
    region: str,
    stderr: TextIO,
    stage: Callable[[str], None],
) -> Any:
    """Load the manifests into a cluster state and run the provisioner's batch decision."""
    from provisioner.apis.errors import ApiValidationError  # noqa: PLC0415
    from provisioner.app.logging_setup import build_logger  # noqa: PLC0415
    from provisioner.controllers.provisioning.controller import (  # noqa: PLC0415
        decide,
        resolve_pools,
    )
    from provisioner.podgroups import build_context  # noqa: PLC0415

    try:
        build_context(inputs.raw_groups)
    except ApiValidationError as error:
        raise InputError(str(error)) from error
    snapshot = load_snapshot(inputs.cluster)
    lookup = _InstanceTypes(inputs, catalog_path=catalog_path, region=region, stderr=stderr)
    if not inputs.objects.get("nodepools"):
        # no NodePool needs it, but an unusable --catalog or --region is still bad input
        _catalog(catalog_path, region, None)
    log = build_logger(level="error", log_format="console", stream=stderr, name="plan")
    stage("resolving NodePools")
    pools = resolve_pools(snapshot, lookup, log)
    stage("planning")
    result = decide(snapshot, pools, planner=config, region=region)
    return dataclasses.replace(result, static_node_claims=_static(snapshot, lookup, region))


def _static(snapshot: Any, lookup: Any, region: str) -> tuple[Any, ...]:
    """The NodeClaims the static NodePools of ``snapshot`` still need (``spec.replicas``)."""
    from cloudprovider.errors import CloudProviderError  # noqa: PLC0415
    from provisioner.controllers.provisioning.static import static_plan  # noqa: PLC0415

    def types(nodepool: Any) -> Any:
        try:
            return lookup(nodepool)
        except CloudProviderError:
            return ()  # reported for the dynamic NodePools; a static one then gets none

    return tuple(claim for claim, _ in static_plan(snapshot, types, region=region))


def load_snapshot(documents: Sequence[Any], now: Any = None) -> Any:
    """A cluster state snapshot of ``documents``, as the controller's cache would hold it.

    ``documents`` are decoded objects, or already parsed pods (:class:`~provisioner.apis.core.
    Pod`), which are not validated again. A pending pod whose ``status.nominatedNodeName``
    names one of the NodeClaims is nominated to it (how a snapshot of a running cluster
    carries the provisioner's nominations).
    """
    from provisioner.apis.base import parse_object  # noqa: PLC0415
    from provisioner.apis.core import Pod  # noqa: PLC0415
    from provisioner.runtime.clock import FakeClock, SystemClock  # noqa: PLC0415
    from provisioner.state.cluster import NOMINATION_WINDOW, ClusterState  # noqa: PLC0415

    clock = FakeClock(now) if now is not None else SystemClock()
    state = ClusterState(clock=clock)
    nominated: list[tuple[str, Any]] = []
    for document in documents:
        if isinstance(document, Pod):
            state.put_pod(document)
            target = document.status.nominated_node_name if document.status else ""
        else:
            state.apply_object(dict(document))
            if document.get("kind") != "Pod":
                continue
            target = str((document.get("status") or {}).get("nominatedNodeName") or "")
        if target:
            nominated.append((target, document))
    claims = {claim.name for claim in state.node_claims()}
    at = clock.now()
    for target, document in nominated:
        if target not in claims:
            continue
        pod = document if isinstance(document, Pod) else parse_object(Pod, document, kind="Pod")
        if not pod.spec.node_name:
            state.nominate(pod, target, until=at + NOMINATION_WINDOW)
    return state.snapshot(at)


class _InstanceTypes:
    """A NodePool's instance types from the catalog, for its EC2NodeClass (one per class)."""

    def __init__(
        self, inputs: _Inputs, *, catalog_path: str | None, region: str, stderr: TextIO
    ) -> None:
        self._nodeclasses = _nodeclasses(inputs)
        self._catalog_path = catalog_path
        self._region = region
        self._stderr = stderr
        self._where = {pool.name: where for where, pool in inputs.objects.get("nodepools", [])}
        self._catalogs: dict[str | None, Any] = {}

    def __call__(self, nodepool: Any) -> Any:
        """The instance types of ``nodepool``.

        Raises:
            NodeClassNotReadyError: its EC2NodeClass is missing while the input has others
                (the controller would not plan on it either); without any EC2NodeClass in the
                input, the default node settings are used (with a warning).
        """
        from cloudprovider.errors import NodeClassNotReadyError  # noqa: PLC0415

        ref = nodepool.node_class_ref
        nodeclass = self._nodeclasses.get(ref.name)
        if nodeclass is None and ref.kind == "EC2NodeClass" and self._nodeclasses:
            raise NodeClassNotReadyError(f'EC2NodeClass "{ref.name}" not found')
        if nodeclass is None and ref.kind == "EC2NodeClass":
            self._stderr.write(
                f"jointer plan: warning: {self._where.get(nodepool.name, '-')}: NodePool "
                f"{nodepool.name}: EC2NodeClass {ref.name} not found; using the default node "
                "settings\n"
            )
        key = ref.name if nodeclass is not None else None
        if key not in self._catalogs:
            self._catalogs[key] = _catalog(self._catalog_path, self._region, nodeclass)
        return self._catalogs[key].instance_types


def _nodeclasses(inputs: _Inputs) -> dict[str, Any]:
    from cloudprovider.aws.nodeclass import parse_nodeclass  # noqa: PLC0415
    from provisioner.apis.errors import ApiValidationError  # noqa: PLC0415

    result = {}
    for where, body in inputs.objects.get("nodeclasses", []):
        try:
            nodeclass = parse_nodeclass(body)
        except ApiValidationError as error:
            raise InputError(f"{where}: {error}") from error
        result[nodeclass.name] = nodeclass
    return result


def _catalog(catalog_path: str | None, region: str, nodeclass: Any) -> Any:
    """The catalog of ``--catalog`` or the built-in one of ``region``, for ``nodeclass``.

    Parsed catalogs are immutable and kept for the process (:data:`_CATALOGS`): a file's by
    its content (SHA-256), the built-in one's by region; both by EC2NodeClass.
    """
    key = _catalog_key(catalog_path, region, nodeclass)
    if key is None:
        return _read_catalog(catalog_path, region, nodeclass)
    return _CATALOGS.get(key, lambda: _read_catalog(catalog_path, region, nodeclass))


def _catalog_key(catalog_path: str | None, region: str, nodeclass: Any) -> tuple[Any, ...] | None:
    """What a parsed catalog depends on, or None when the file cannot be looked at."""
    settings = "" if nodeclass is None else nodeclass.model_dump_json()
    if catalog_path is None:
        return ("builtin", region, settings)
    try:
        with open(catalog_path, "rb") as handle:  # noqa: PTH123
            digest = hashlib.sha256(handle.read()).hexdigest()
    except OSError:
        return None  # reading it reports why
    return ("file", digest, settings)


class _Catalogs:
    """The few most recently parsed catalogs of this process, by what they depend on."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._entries: dict[tuple[Any, ...], Any] = {}

    def get(self, key: tuple[Any, ...], load: Callable[[], Any]) -> Any:
        """The catalog of ``key``, loaded (and kept) when not yet here."""
        found = self._entries.pop(key, None)
        if found is None:
            found = load()
            while len(self._entries) >= self._size:
                del self._entries[next(iter(self._entries))]
        self._entries[key] = found
        return found

    def clear(self) -> None:
        """Forget every catalog."""
        self._entries.clear()


_CATALOGS: Final = _Catalogs(size=4)
"""The process's parsed catalogs (a catalog's instance types are immutable, so sharing is
safe); repeated plans in one process (`make bench`, tests) read and resolve each once."""


def _read_catalog(catalog_path: str | None, region: str, nodeclass: Any) -> Any:
    from cloudprovider.aws.catalog import builtin_catalog, read_catalog  # noqa: PLC0415
    from cloudprovider.aws.pricing import UnsupportedRegionError  # noqa: PLC0415
    from provisioner.apis.errors import ApiValidationError  # noqa: PLC0415

    if catalog_path is None:
        try:
            return builtin_catalog(region, nodeclass=nodeclass)
        except (UnsupportedRegionError, LookupError) as error:
            raise InputError(f"--region {region}: {error}") from error
    try:
        with open(catalog_path, encoding="utf-8") as handle:  # noqa: PTH123
            data = json.load(handle)
    except (OSError, json.JSONDecodeError) as error:
        raise InputError(f"{catalog_path}: {error}") from error
    try:
        return read_catalog(data, nodeclass=nodeclass)
    except (ApiValidationError, ValueError) as error:
        raise InputError(f"{catalog_path}: {error}") from error
