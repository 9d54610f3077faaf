"""`jointer plan`: the provisioner's planning step over manifest files (`spec/plan.md`).

Exit status 0 when a plan was computed (even if some pods cannot be placed), 2 for unusable
input, with a message on standard error naming the file, the document and the field.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TextIO

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
    }
)
RAW_KINDS: Final = frozenset({("v1", "PodTemplate")})
"""Core kinds read raw with the pod-group objects (ProvisioningRequests' PodTemplates)."""


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
        help="optimiser budget (default: 5, stopping earlier on a budget that grows with the pods)",
    )
    parser.add_argument(
        "--policy",
        choices=("jointer", "greedy"),
        default="jointer",
        help="optimiser, or Karpenter-style first-fit-decreasing",
    )
    parser.add_argument("-o", "--output", choices=("json", "table"), default=None)


def run(args: argparse.Namespace) -> int:
    """Run `jointer plan` and return its exit status."""
    output = args.output or ("table" if sys.stdout.isatty() else "json")
    try:
        result = plan_files(
            args.files,
            catalog_path=args.catalog,
            region=args.region,
            time_limit=args.time_limit,
            policy=args.policy,
            stderr=sys.stderr,
        )
    except InputError as error:
        sys.stderr.write(f"jointer plan: error: {error}\n")
        return EXIT_INPUT
    from provisioner.controllers.provisioning.plan import render_table  # noqa: PLC0415

    if output == "json":
        json.dump(result.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_table(result) + "\n")
    return EXIT_OK


@dataclass
class _Inputs:
    objects: dict[str, list[tuple[str, Any]]] = field(default_factory=dict)
    raw_groups: list[Mapping[str, Any]] = field(default_factory=list)
    cluster: list[Mapping[str, Any]] = field(default_factory=list)
    """Every document the cluster state takes, as read."""


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
) -> Any:
    """Read the manifests and the catalog and plan; raise :class:`InputError` on bad input.

    ``time_limit`` None: the default 5 s, with the planner's adaptive budget; a number: that
    budget, as asked.
    """
    from provisioner.app.manifests import ManifestError, load_documents  # noqa: PLC0415

    try:
        documents = load_documents(files, stdin=stdin)
    except ManifestError as error:
        raise InputError(str(error)) from error
    inputs = _classify(documents, stderr)
    from provisioner.controllers.provisioning.planner import PlannerConfig  # noqa: PLC0415
    from provisioner.controllers.provisioning.podfacts import PodError  # noqa: PLC0415

    config = PlannerConfig(
        policy="greedy" if policy == "greedy" else "jointer",
        time_limit_seconds=_DEFAULT_TIME_LIMIT if time_limit is None else time_limit,
        adaptive_budget=time_limit is None,
        num_workers=1 if deterministic_time is not None else 2,
        random_seed=random_seed,
        deterministic_time=deterministic_time,
    )
    try:
        return _decide(inputs, config, catalog_path=catalog_path, region=region, stderr=stderr)
    except PodError as error:
        raise InputError(_located(str(error), inputs)) from error


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
        inputs.cluster.append(document.body)
        if role == "pods":
            inputs.raw_groups.append(document.body)
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
    inputs: _Inputs, config: Any, *, catalog_path: str | None, region: str, stderr: TextIO
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
    pools = resolve_pools(snapshot, lookup, log)
    return decide(snapshot, pools, planner=config, region=region)


def load_snapshot(documents: Sequence[Mapping[str, Any]], now: Any = None) -> Any:
    """A cluster state snapshot of ``documents``, as the controller's cache would hold it.

    A pending pod whose ``status.nominatedNodeName`` names one of the NodeClaims is nominated
    to it (how a snapshot of a running cluster carries the provisioner's nominations).
    """
    from provisioner.apis.base import parse_object  # noqa: PLC0415
    from provisioner.apis.core import Pod  # noqa: PLC0415
    from provisioner.runtime.clock import FakeClock, SystemClock  # noqa: PLC0415
    from provisioner.state.cluster import NOMINATION_WINDOW, ClusterState  # noqa: PLC0415

    clock = FakeClock(now) if now is not None else SystemClock()
    state = ClusterState(clock=clock)
    for body in documents:
        state.apply_object(dict(body))
    claims = {claim.name for claim in state.node_claims()}
    at = clock.now()
    for body in documents:
        if body.get("kind") != "Pod":
            continue
        target = str((body.get("status") or {}).get("nominatedNodeName") or "")
        if target in claims:
            pod = parse_object(Pod, body, kind="Pod")
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
