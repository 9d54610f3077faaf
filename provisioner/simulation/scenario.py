"""The scenario file of `jointer simulate` (`spec/simulate.md`): reading and validation.

A scenario is YAML (``jointer.dev/v1alpha1`` ``Scenario``): a region, a cluster name, a virtual
duration, the time a node takes from launch to Ready, and timed steps. Reading is strict: an
unknown field, a missing one or a value of the wrong shape is a :class:`ScenarioError` whose
message names the step (index and time) and the field, e.g.::

    demo.yaml: spec.steps[3] (at 15m): capacityOutage.for: required value

Besides the step kinds of the spec, ``karpenterNodes`` seeds nodes as Karpenter leaves them
(:mod:`provisioner.simulation.adopt`), for migrations, and ``spec.capacityReservations`` lists
the account's capacity reservations (ODCRs and Capacity Blocks; :class:`ReservationSpec`).

Inline ``apply`` documents and ``applyFile`` files are parsed here too, so a scenario that
cannot be replayed is rejected before anything runs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

import yaml

from provisioner.apis.duration import DurationError, parse_go_duration
from provisioner.apis.labels import CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_SPOT
from provisioner.simulation.kinds import is_deletable_kind, is_known_kind

_RESERVATION_ID: Final = re.compile(r"cr-[0-9a-z]+")

__all__ = [
    "API_VERSION",
    "KIND",
    "ApplyStep",
    "CapacityOutageStep",
    "DeleteSelector",
    "DeleteStep",
    "KarpenterNode",
    "KarpenterNodesStep",
    "ReservationSpec",
    "RestartControllerStep",
    "ScaleStep",
    "Scenario",
    "ScenarioError",
    "SpotInterruptionStep",
    "Step",
    "StepAction",
    "load_scenario",
    "parse_scenario",
]

API_VERSION: Final = "jointer.dev/v1alpha1"
KIND: Final = "Scenario"
DEFAULT_REGION: Final = "us-east-1"
DEFAULT_CLUSTER: Final = "simulation"
DEFAULT_NODE_STARTUP: Final = 40.0
SCALABLE_KINDS: Final = frozenset({"Deployment", "ReplicaSet", "Job"})
_ACTIONS: Final = (
    "apply",
    "applyFile",
    "delete",
    "scale",
    "capacityOutage",
    "spotInterruption",
    "restartController",
    "karpenterNodes",
)


class ScenarioError(ValueError):
    """A scenario that cannot be replayed; the message names the step and the field."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ApplyStep:
    """Create or update objects.

    Attributes:
        documents: the decoded documents, in order.
        source: where they came from (``inline`` or the file path), for messages.
    """

    documents: tuple[Mapping[str, Any], ...]
    source: str = "inline"


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteSelector:
    """Objects to delete: a kind, a namespace, and a name or a label selector."""

    kind: str
    namespace: str | None = None
    name: str | None = None
    label_selector: str | None = None
    api_version: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteStep:
    """Delete objects."""

    selectors: tuple[DeleteSelector, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ScaleStep:
    """Set the replicas of a Deployment or ReplicaSet (the parallelism of a Job)."""

    kind: str
    namespace: str
    name: str
    replicas: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CapacityOutageStep:
    """Launches of matching offerings fail with InsufficientInstanceCapacity for a while.

    Attributes:
        capacity_type: ``spot`` or ``on-demand``; None for both.
        instance_types: the types affected; empty for every type.
        zones: the zones affected; empty for every zone.
        duration: seconds the outage lasts.
    """

    capacity_type: str | None
    instance_types: frozenset[str]
    zones: frozenset[str]
    duration: float


@dataclass(frozen=True, slots=True, kw_only=True)
class SpotInterruptionStep:
    """Two-minute spot interruption warnings for ``count`` spot nodes matching a selector."""

    node_selector: Mapping[str, str]
    count: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RestartControllerStep:
    """Tear the controllers down and start them again from the cluster and EC2."""


@dataclass(frozen=True, slots=True, kw_only=True)
class KarpenterNode:
    """``count`` nodes of one instance type, zone and capacity type."""

    instance_type: str
    zone: str
    capacity_type: str = CAPACITY_TYPE_ON_DEMAND
    count: int = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class KarpenterNodesStep:
    """Nodes Karpenter launched before Jointer took over (instances, NodeClaims, Nodes).

    Attributes:
        nodepool: the NodePool they belong to (applied before).
        nodes: what to seed.
    """

    nodepool: str
    nodes: tuple[KarpenterNode, ...]


StepAction = (
    ApplyStep
    | DeleteStep
    | ScaleStep
    | CapacityOutageStep
    | SpotInterruptionStep
    | RestartControllerStep
    | KarpenterNodesStep
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """One timed step.

    Attributes:
        index: the step's position in the file (for messages).
        at: virtual seconds from the start.
        action: what to do.
    """

    index: int
    at: float
    action: StepAction

    @property
    def kind(self) -> str:
        """The step's action name as written in the file (``capacityOutage``)."""
        return _ACTION_NAMES[type(self.action)]


_ACTION_NAMES: Final[Mapping[type, str]] = {
    ApplyStep: "apply",
    DeleteStep: "delete",
    ScaleStep: "scale",
    CapacityOutageStep: "capacityOutage",
    SpotInterruptionStep: "spotInterruption",
    RestartControllerStep: "restartController",
    KarpenterNodesStep: "karpenterNodes",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ReservationSpec:
    """A capacity reservation of the simulated account (``spec.capacityReservations[]``).

    Attributes:
        id: ``cr-`` and lowercase hex/letters.
        instance_type: the reserved type.
        zone: its zone.
        count: instances it holds.
        reservation_type: ``default`` (ODCR) or ``capacity-block``.
        instance_match_criteria: ``open`` or ``targeted`` (default).
        tags: its tags (for ``capacityReservationSelectorTerms`` by tag).
        end: virtual second it ends (``endsAfter``), None for never.
    """

    id: str
    instance_type: str
    zone: str
    count: int
    reservation_type: str = "default"
    instance_match_criteria: str = "targeted"
    tags: Mapping[str, str] = field(default_factory=dict)
    end: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    """A validated scenario.

    Attributes:
        name: ``metadata.name``.
        region: the AWS region.
        cluster_name: the cluster name (discovery tags, interruption queue).
        duration: virtual seconds to run.
        catalog: path of a catalog file, or None for the built-in catalog.
        node_startup: seconds from launch to a Ready node.
        steps: the steps, sorted by time (file order among equal times).
        reservations: the account's capacity reservations.
    """

    name: str
    region: str = DEFAULT_REGION
    cluster_name: str = DEFAULT_CLUSTER
    duration: float
    catalog: Path | None = None
    node_startup: float = DEFAULT_NODE_STARTUP
    steps: tuple[Step, ...] = field(default_factory=tuple)
    reservations: tuple[ReservationSpec, ...] = ()


# --- reading ------------------------------------------------------------------------------------


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file.

    Raises:
        ScenarioError: the file cannot be read or is not a valid scenario.
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as error:
        raise ScenarioError(f"{file}: cannot read: {error.strerror or error}") from error
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ScenarioError(f"{file}: not valid YAML: {_yaml_problem(error)}") from error
    return parse_scenario(data, source=str(file), base=file.parent)


def parse_scenario(data: object, *, source: str = "scenario", base: Path | None = None) -> Scenario:
    """Validate a decoded scenario; ``base`` resolves relative ``applyFile`` and ``catalog``.

    Raises:
        ScenarioError: naming ``source``, the step and the field.
    """
    reader = _Reader(source, base or Path())
    return reader.scenario(data)


def _yaml_problem(error: yaml.YAMLError) -> str:
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or str(error)
    if mark is not None:
        return f"line {mark.line + 1} column {mark.column + 1}: {problem}"
    return str(problem)


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )


@dataclass(slots=True)
class _Reader:
    """Validation with messages that name the file, the step and the field."""

    source: str
    base: Path
    where: str = ""

    def fail(self, path: str, problem: str) -> ScenarioError:
        prefix = f"{self.source}: {self.where}: " if self.where else f"{self.source}: "
        return ScenarioError(f"{prefix}{path}: {problem}" if path else f"{prefix}{problem}")

    def mapping(self, value: object, path: str) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.fail(path, f"must be an object, got {_type_name(value)}")
        for key in value:
            if not isinstance(key, str):
                raise self.fail(path, f"keys must be strings, got {key!r}")
        return value

    def only(self, value: Mapping[str, Any], allowed: Sequence[str], path: str) -> None:
        for key in value:
            if key not in allowed:
                joined = f"{path}.{key}" if path else key
                raise self.fail(joined, f"unknown field (allowed: {', '.join(allowed)})")

    def string(self, value: object, path: str, *, required: bool = True) -> str | None:
        if value is None:
            if required:
                raise self.fail(path, "required value")
            return None
        if not isinstance(value, str) or not value:
            raise self.fail(path, f"must be a non-empty string, got {value!r}")
        return value

    def duration(self, value: object, path: str) -> float:
        if value is None:
            raise self.fail(path, "required value")
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise self.fail(path, f"must be a duration such as 30s, 15m or 2h, got {value!r}")
        if isinstance(value, int | float):
            seconds = float(value)
        else:
            try:
                seconds = parse_go_duration(value.strip()).total_seconds()
            except DurationError as error:
                raise self.fail(path, f"{error} (examples: 30s, 15m, 1h30m)") from error
        if seconds < 0:
            raise self.fail(path, f"must not be negative, got {value!r}")
        return seconds

    def strings(self, value: object, path: str) -> list[str]:
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self.fail(path, f"must be a list of non-empty strings, got {value!r}")
        return list(value)

    # -- the document ------------------------------------------------------------------------

    def scenario(self, data: object) -> Scenario:
        root = self.mapping(data, "")
        self.only(root, ("apiVersion", "kind", "metadata", "spec"), "")
        if root.get("apiVersion") != API_VERSION:
            raise self.fail("apiVersion", f"must be {API_VERSION}, got {root.get('apiVersion')!r}")
        if root.get("kind") != KIND:
            raise self.fail("kind", f"must be {KIND}, got {root.get('kind')!r}")
        metadata = self.mapping(root.get("metadata"), "metadata")
        name = self.string(metadata.get("name"), "metadata.name")
        spec = self.mapping(root.get("spec"), "spec")
        self.only(
            spec,
            (
                "region",
                "clusterName",
                "duration",
                "catalog",
                "nodeStartup",
                "capacityReservations",
                "steps",
            ),
            "spec",
        )
        duration = self.duration(spec.get("duration"), "spec.duration")
        if duration <= 0:
            raise self.fail("spec.duration", "must be positive")
        startup = spec.get("nodeStartup")
        node_startup = (
            DEFAULT_NODE_STARTUP if startup is None else self.duration(startup, "spec.nodeStartup")
        )
        catalog_text = self.string(spec.get("catalog"), "spec.catalog", required=False)
        catalog = None
        if catalog_text is not None:
            catalog = self.base / catalog_text
            if not catalog.is_file():
                raise self.fail("spec.catalog", f"no such file: {catalog}")
        reservations = self.reservations(spec.get("capacityReservations"))
        raw_steps = spec.get("steps", [])
        if raw_steps is None:
            raw_steps = []
        if not isinstance(raw_steps, list):
            raise self.fail("spec.steps", f"must be a list, got {_type_name(raw_steps)}")
        steps = [self.step(index, raw, duration) for index, raw in enumerate(raw_steps)]
        steps.sort(key=lambda s: (s.at, s.index))
        return Scenario(
            name=str(name),
            region=self.string(spec.get("region"), "spec.region", required=False) or DEFAULT_REGION,
            cluster_name=self.string(spec.get("clusterName"), "spec.clusterName", required=False)
            or DEFAULT_CLUSTER,
            duration=duration,
            catalog=catalog,
            node_startup=node_startup,
            steps=tuple(steps),
            reservations=reservations,
        )

    def reservations(self, value: object) -> tuple[ReservationSpec, ...]:
        if value is None:
            return ()
        if not isinstance(value, list):
            raise self.fail("spec.capacityReservations", f"must be a list, got {_type_name(value)}")
        found: list[ReservationSpec] = []
        for index, raw in enumerate(value):
            path = f"spec.capacityReservations[{index}]"
            entry = self.mapping(raw, path)
            self.only(
                entry,
                (
                    "id",
                    "instanceType",
                    "zone",
                    "count",
                    "type",
                    "instanceMatchCriteria",
                    "tags",
                    "endsAfter",
                ),
                path,
            )
            ident = str(self.string(entry.get("id"), f"{path}.id"))
            if not _RESERVATION_ID.fullmatch(ident):
                raise self.fail(f"{path}.id", f"must match ^cr-[0-9a-z]+$, got {ident!r}")
            if any(r.id == ident for r in found):
                raise self.fail(f"{path}.id", f"duplicate reservation {ident}")
            count = entry.get("count")
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                raise self.fail(f"{path}.count", f"must be a positive integer, got {count!r}")
            kind = entry.get("type", "default")
            if kind not in ("default", "capacity-block"):
                raise self.fail(f"{path}.type", f"must be default or capacity-block, got {kind!r}")
            criteria = entry.get("instanceMatchCriteria", "targeted")
            if criteria not in ("open", "targeted"):
                raise self.fail(
                    f"{path}.instanceMatchCriteria", f"must be open or targeted, got {criteria!r}"
                )
            tags = self.mapping(entry.get("tags") or {}, f"{path}.tags")
            for key, tag in tags.items():
                if not isinstance(tag, str):
                    raise self.fail(f"{path}.tags.{key}", f"must be a string, got {tag!r}")
            ends = entry.get("endsAfter")
            if kind == "capacity-block" and ends is None:
                raise self.fail(f"{path}.endsAfter", "required for a capacity-block")
            found.append(
                ReservationSpec(
                    id=ident,
                    instance_type=str(
                        self.string(entry.get("instanceType"), f"{path}.instanceType")
                    ),
                    zone=str(self.string(entry.get("zone"), f"{path}.zone")),
                    count=count,
                    reservation_type=str(kind),
                    instance_match_criteria=str(criteria),
                    tags=dict(tags),
                    end=None if ends is None else self.duration(ends, f"{path}.endsAfter"),
                )
            )
        return tuple(found)

    def step(self, index: int, raw: object, duration: float) -> Step:
        self.where = f"spec.steps[{index}]"
        body = self.mapping(raw, "")
        self.only(body, ("at", *_ACTIONS), "")
        at = self.duration(body.get("at"), "at")
        self.where = f"spec.steps[{index}] (at {body.get('at')})"
        if at > duration:
            raise self.fail("at", "is after the end of the scenario (spec.duration)")
        actions = [key for key in _ACTIONS if key in body]
        if len(actions) != 1:
            found = ", ".join(actions) or "none"
            raise self.fail("", f"needs exactly one of {', '.join(_ACTIONS)} (found: {found})")
        kind = actions[0]
        value = body[kind]
        action: StepAction
        match kind:
            case "apply":
                action = self.apply_inline(value)
            case "applyFile":
                action = self.apply_file(value)
            case "delete":
                action = self.delete(value)
            case "scale":
                action = self.scale(value)
            case "capacityOutage":
                action = self.outage(value)
            case "spotInterruption":
                action = self.interruption(value)
            case "karpenterNodes":
                action = self.karpenter_nodes(value)
            case _:
                self.only(self.mapping(value or {}, kind), (), kind)
                action = RestartControllerStep()
        step = Step(index=index, at=at, action=action)
        self.where = ""
        return step

    # -- steps -------------------------------------------------------------------------------

    def apply_inline(self, value: object) -> ApplyStep:
        if not isinstance(value, str):
            raise self.fail(
                "apply", f"must be a multi-document YAML string, got {_type_name(value)}"
            )
        return ApplyStep(documents=self.documents(value, "apply"), source="inline")

    def apply_file(self, value: object) -> ApplyStep:
        name = str(self.string(value, "applyFile"))
        path = self.base / name
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as error:
            raise self.fail(
                "applyFile", f"cannot read {path}: {error.strerror or error}"
            ) from error
        return ApplyStep(documents=self.documents(text, f"applyFile {name}"), source=str(path))

    def documents(self, text: str, path: str) -> tuple[Mapping[str, Any], ...]:
        try:
            loaded = list(yaml.safe_load_all(text))
        except yaml.YAMLError as error:
            raise self.fail(path, f"not valid YAML: {_yaml_problem(error)}") from error
        documents: list[Mapping[str, Any]] = []
        for number, document in enumerate(loaded):
            if document is None:
                continue
            where = f"{path} document {number}"
            obj = self.mapping(document, where)
            api_version = obj.get("apiVersion")
            kind = obj.get("kind")
            if not isinstance(api_version, str) or not api_version:
                raise self.fail(f"{where}.apiVersion", "required value")
            if not isinstance(kind, str) or not kind:
                raise self.fail(f"{where}.kind", "required value")
            if kind.endswith("List") and isinstance(obj.get("items"), list):
                raise self.fail(f"{where}.kind", f"{kind}: list documents are not supported")
            if not is_known_kind(api_version, kind):
                raise self.fail(
                    f"{where}.kind",
                    f"{api_version} {kind} is not a kind the simulated cluster understands",
                )
            metadata = self.mapping(obj.get("metadata"), f"{where}.metadata")
            self.string(metadata.get("name"), f"{where}.metadata.name")
            documents.append(obj)
        if not documents:
            raise self.fail(path, "contains no objects")
        return tuple(documents)

    def delete(self, value: object) -> DeleteStep:
        if not isinstance(value, list) or not value:
            raise self.fail("delete", f"must be a non-empty list, got {_type_name(value)}")
        selectors = []
        for number, raw in enumerate(value):
            path = f"delete[{number}]"
            entry = self.mapping(raw, path)
            self.only(entry, ("kind", "apiVersion", "namespace", "name", "labelSelector"), path)
            kind = str(self.string(entry.get("kind"), f"{path}.kind"))
            name = self.string(entry.get("name"), f"{path}.name", required=False)
            selector = self.string(
                entry.get("labelSelector"), f"{path}.labelSelector", required=False
            )
            if (name is None) == (selector is None):
                raise self.fail(path, "needs exactly one of name and labelSelector")
            api_version = self.string(entry.get("apiVersion"), f"{path}.apiVersion", required=False)
            if not is_deletable_kind(kind, api_version):
                raise self.fail(
                    f"{path}.kind", f"{kind} is not a kind the simulated cluster understands"
                )
            selectors.append(
                DeleteSelector(
                    kind=kind,
                    namespace=self.string(
                        entry.get("namespace"), f"{path}.namespace", required=False
                    ),
                    name=name,
                    label_selector=selector,
                    api_version=api_version,
                )
            )
        return DeleteStep(selectors=tuple(selectors))

    def scale(self, value: object) -> ScaleStep:
        entry = self.mapping(value, "scale")
        self.only(entry, ("kind", "namespace", "name", "replicas"), "scale")
        kind = str(self.string(entry.get("kind"), "scale.kind"))
        if kind not in SCALABLE_KINDS:
            raise self.fail(
                "scale.kind", f"must be one of {', '.join(sorted(SCALABLE_KINDS))}, got {kind!r}"
            )
        replicas = entry.get("replicas")
        if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
            raise self.fail("scale.replicas", f"must be a non-negative integer, got {replicas!r}")
        return ScaleStep(
            kind=kind,
            namespace=self.string(entry.get("namespace"), "scale.namespace", required=False)
            or "default",
            name=str(self.string(entry.get("name"), "scale.name")),
            replicas=replicas,
        )

    def outage(self, value: object) -> CapacityOutageStep:
        entry = self.mapping(value, "capacityOutage")
        self.only(entry, ("capacityType", "instanceTypes", "zones", "for"), "capacityOutage")
        capacity_type = entry.get("capacityType")
        allowed: tuple[Literal["spot", "on-demand"], ...] = (
            CAPACITY_TYPE_SPOT,
            CAPACITY_TYPE_ON_DEMAND,
        )
        if capacity_type is not None and capacity_type not in allowed:
            raise self.fail(
                "capacityOutage.capacityType",
                f"must be spot or on-demand (omit for both), got {capacity_type!r}",
            )
        types: list[str] = []
        if entry.get("instanceTypes") is not None:
            types = self.strings(entry["instanceTypes"], "capacityOutage.instanceTypes")
        zones: list[str] = []
        if entry.get("zones") is not None:
            zones = self.strings(entry["zones"], "capacityOutage.zones")
        return CapacityOutageStep(
            capacity_type=capacity_type,
            instance_types=frozenset(t for t in types if t != "*"),
            zones=frozenset(zones),
            duration=self.duration(entry.get("for"), "capacityOutage.for"),
        )

    def interruption(self, value: object) -> SpotInterruptionStep:
        entry = self.mapping(value, "spotInterruption")
        self.only(entry, ("nodeSelector", "count"), "spotInterruption")
        selector = self.mapping(entry.get("nodeSelector") or {}, "spotInterruption.nodeSelector")
        for key, label in selector.items():
            if not isinstance(label, str):
                raise self.fail(
                    f"spotInterruption.nodeSelector.{key}", f"must be a string, got {label!r}"
                )
        count = entry.get("count", 1)
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise self.fail("spotInterruption.count", f"must be a positive integer, got {count!r}")
        return SpotInterruptionStep(node_selector=dict(selector), count=count)

    def karpenter_nodes(self, value: object) -> KarpenterNodesStep:
        entry = self.mapping(value, "karpenterNodes")
        self.only(entry, ("nodePool", "nodes"), "karpenterNodes")
        nodepool = str(self.string(entry.get("nodePool"), "karpenterNodes.nodePool"))
        raw = entry.get("nodes")
        if not isinstance(raw, list) or not raw:
            raise self.fail("karpenterNodes.nodes", f"must be a non-empty list, got {raw!r}")
        nodes = []
        for number, item in enumerate(raw):
            path = f"karpenterNodes.nodes[{number}]"
            node = self.mapping(item, path)
            self.only(node, ("instanceType", "zone", "capacityType", "count"), path)
            capacity_type = node.get("capacityType", CAPACITY_TYPE_ON_DEMAND)
            if capacity_type not in (CAPACITY_TYPE_SPOT, CAPACITY_TYPE_ON_DEMAND):
                raise self.fail(
                    f"{path}.capacityType", f"must be spot or on-demand, got {capacity_type!r}"
                )
            count = node.get("count", 1)
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                raise self.fail(f"{path}.count", f"must be a positive integer, got {count!r}")
            nodes.append(
                KarpenterNode(
                    instance_type=str(
                        self.string(node.get("instanceType"), f"{path}.instanceType")
                    ),
                    zone=str(self.string(node.get("zone"), f"{path}.zone")),
                    capacity_type=str(capacity_type),
                    count=count,
                )
            )
        return KarpenterNodesStep(nodepool=nodepool, nodes=tuple(nodes))
