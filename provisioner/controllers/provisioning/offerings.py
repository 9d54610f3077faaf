"""New capacity a planning step may buy: NodePool x instance type x offering.

Each :class:`Option` is one concrete node Jointer could launch: its NodePool, instance type,
zone and capacity type, the exact labels the node would carry, its price, and what is left
for pending pods after the DaemonSet pods that would land on it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from cloudprovider.instancetype import InstanceType, Offering
from provisioner.apis import labels as wk
from provisioner.apis.core import DaemonSet, Pod, Taint
from provisioner.apis.nodepool import NodePool
from provisioner.apis.podmemo import PerPod
from provisioner.controllers.provisioning.podfacts import PodError, PodFacts, Signature, pod_facts
from provisioner.controllers.provisioning.viewpods import Places, ViewPods
from provisioner.podgroups import DetectionMemo
from provisioner.scheduling.quantity import parse_quantity
from provisioner.scheduling.requirements import Requirements
from provisioner.scheduling.resources import add, subtract
from provisioner.scheduling.taints import untolerated

__all__ = [
    "DaemonOverhead",
    "Option",
    "OptionsMemo",
    "PoolTemplate",
    "enumerate_options",
    "pool_template",
]

SCHEDULING_EFFECTS: Final = ("NoSchedule", "NoExecute")


@dataclass(frozen=True, slots=True)
class PoolTemplate:
    """A NodePool reduced to what planning needs.

    Attributes:
        name: the NodePool name.
        weight: ``spec.weight`` (0 when unset); higher is tried first.
        requirements: the pool's requirements, template labels and ``karpenter.sh/nodepool``.
        labels: labels every node of the pool carries (template labels and the pool name).
        taints: taints pods must tolerate (not startup taints).
        limits: ``spec.limits`` in milli-units, or None.
        instance_types: the instance types its node class resolves to.
    """

    name: str
    weight: int
    requirements: Requirements
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    limits: Mapping[str, int] | None
    instance_types: tuple[InstanceType, ...]


def pool_template(nodepool: NodePool, instance_types: Sequence[InstanceType]) -> PoolTemplate:
    """Reduce a validated NodePool to a :class:`PoolTemplate`."""
    labels = {**nodepool.template_labels, wk.LABEL_NODEPOOL: nodepool.name}
    requirements = Requirements.from_terms(
        [r.model_dump(by_alias=True, exclude_none=True) for r in nodepool.requirements]
    ).union(Requirements.from_labels(labels))
    limits = (
        {name: parse_quantity(value) for name, value in nodepool.limits.items()}
        if nodepool.spec.limits is not None
        else None
    )
    return PoolTemplate(
        name=nodepool.name,
        weight=nodepool.weight,
        requirements=requirements,
        labels=labels,
        taints=nodepool.taints,
        limits=limits,
        instance_types=tuple(instance_types),
    )


@dataclass(frozen=True, slots=True)
class Option:
    """One concrete node that could be launched.

    Attributes:
        id: ``pool/instance-type/zone/capacity-type`` (``/reservation-id`` for a reservation).
        pool: the NodePool template.
        instance_type: the instance type.
        offering: the zone x capacity type offering (available).
        labels: every label the node would carry.
        capacity: allocatable minus the DaemonSet overhead, in milli-units.
        daemon_requests: the DaemonSet pods' requests on this node, in milli-units.
    """

    id: str
    pool: PoolTemplate
    instance_type: InstanceType
    offering: Offering
    labels: Mapping[str, str]
    capacity: Mapping[str, int]
    daemon_requests: Mapping[str, int]

    @property
    def price(self) -> float:
        """Hourly price in US dollars."""
        return self.offering.price

    @property
    def reservation_id(self) -> str | None:
        """The capacity reservation a ``reserved`` option launches into."""
        return self.offering.reservation_id


@dataclass(frozen=True, slots=True)
class DaemonOverhead:
    """The DaemonSets of the cluster, ready to be matched against node templates."""

    daemons: tuple[tuple[Signature, Mapping[str, int]], ...]

    @classmethod
    def from_daemonsets(cls, daemonsets: Iterable[DaemonSet]) -> DaemonOverhead:
        """Read each DaemonSet's pod template (signature and requests).

        Raises:
            PodError: naming the DaemonSet for a malformed template.
        """
        cache: dict[str, Signature] = {}
        daemons = []
        for ds in daemonsets:
            pod = Pod(metadata=ds.spec.template.metadata, spec=ds.spec.template.spec)
            try:
                facts = pod_facts(pod, cache=cache)
            except PodError as error:
                name = f"{ds.metadata.namespace or 'default'}/{ds.metadata.name}"
                raise PodError(f"DaemonSet {name}: spec.template: {error}") from error
            daemons.append((facts.signature, facts.requests))
        return cls(tuple(daemons))

    def requests_for(self, labels: Mapping[str, str], taints: Sequence[Taint]) -> dict[str, int]:
        """Sum of the requests of the DaemonSet pods that would run on such a node."""
        total: dict[str, int] = {}
        for signature, requests in self.daemons:
            if untolerated(signature.tolerations, taints, SCHEDULING_EFFECTS) is not None:
                continue
            if any(alternative.matches(labels) for alternative in signature.alternatives):
                total = add(total, requests)
        return total


_OFFERING_LABELS: Final = frozenset(
    {
        wk.LABEL_ZONE,
        wk.LABEL_CAPACITY_TYPE,
        wk.LABEL_CAPACITY_RESERVATION_ID,
        wk.LABEL_CAPACITY_RESERVATION_TYPE,
    }
)
"""The labels ``enumerate_options`` sets per offering (the others are the instance type's)."""


def enumerate_options(
    pools: Sequence[PoolTemplate], daemons: DaemonOverhead, region: str = ""
) -> list[Option]:
    """Every available offering of every pool whose requirements the node would satisfy.

    The requirements on labels an offering sets (zone, capacity type, reservation) are checked
    per offering; the others once per instance type, whose offerings share those labels.
    """
    options: list[Option] = []
    for pool in pools:
        per_type = pool.requirements.without(*_OFFERING_LABELS)
        per_offering = pool.requirements.without(*(set(pool.requirements) - _OFFERING_LABELS))
        offering_keys = tuple(per_offering)
        verdicts: dict[tuple[str | None, ...], bool] = {}
        for instance_type in pool.instance_types:
            base = {**instance_type.labels, **pool.labels}
            base[wk.LABEL_INSTANCE_TYPE] = instance_type.name
            if region:
                base.setdefault(wk.LABEL_REGION, region)
            if not per_type.matches(base):
                continue
            overhead: dict[str, int] | None = None
            for offering in instance_type.available_offerings():
                labels = {
                    **base,
                    wk.LABEL_ZONE: offering.zone,
                    wk.LABEL_CAPACITY_TYPE: offering.capacity_type,
                }
                if offering.reservation_id:
                    labels[wk.LABEL_CAPACITY_RESERVATION_ID] = offering.reservation_id
                    labels[wk.LABEL_CAPACITY_RESERVATION_TYPE] = (
                        offering.reservation_type or "default"
                    )
                if offering_keys:
                    seen = tuple(labels.get(key) for key in offering_keys)
                    verdict = verdicts.get(seen)
                    if verdict is None:
                        verdict = verdicts[seen] = per_offering.matches(labels)
                    if not verdict:
                        continue
                if overhead is None:
                    overhead = daemons.requests_for(labels, pool.taints)
                capacity = dict(subtract(instance_type.allocatable, overhead).items())
                options.append(
                    Option(
                        id=f"{pool.name}/{instance_type.name}/{offering.key}",
                        pool=pool,
                        instance_type=instance_type,
                        offering=offering,
                        labels=labels,
                        capacity=capacity,
                        daemon_requests=overhead,
                    )
                )
    return options


class OptionsMemo:
    """The offerings of the last NodePools, DaemonSets and region asked for, kept for reuse.

    A disruption pass runs many rescheduling simulations against the same pool templates and
    DaemonSet objects; each would enumerate the same offerings again. Reuse is by identity of
    those objects or by equality (they are immutable and held here, so an identity cannot be
    recycled), so any changed template or DaemonSet (a NodePool or catalog change, a DaemonSet
    update) recomputes. The provisioner keeps one memo across its batches too.

    :attr:`derived` is where the planner keeps what it computes from exactly these offerings
    (fit indexes, compatible offerings per signature, solver bin types): it is emptied
    whenever the offerings are enumerated again. :attr:`detect`, :attr:`facts`,
    :attr:`requests` and :attr:`pending` are what is read from each pod object, remembered.
    """

    __slots__ = (
        "_base",
        "_daemons",
        "_inputs",
        "_options",
        "derived",
        "detect",
        "facts",
        "pending",
        "requests",
    )

    def __init__(self) -> None:
        self._inputs: tuple[tuple[object, ...], tuple[object, ...], str] | None = None
        self._daemons: DaemonOverhead | None = None
        self._options: tuple[Option, ...] = ()
        self.detect = DetectionMemo()
        """``detect_group`` per pod object, for the views planned with this memo."""
        self.facts: PerPod[PodFacts] = PerPod()
        """:func:`pod_facts` per pending pod object."""
        self.requests: PerPod[Mapping[str, int]] = PerPod()
        """Requests (pod slot included) per bound pod object."""
        self.pending: PerPod[Pod] = PerPod()
        """The pending copy a rescheduling simulation makes of a displaced pod object."""
        self.derived: object = None
        """The planner's caches for the current offerings (None after each enumeration)."""
        self._base: tuple[object, ViewPods, Places] | None = None

    def base_pods(self, source: object, build: Callable[[], ViewPods]) -> tuple[ViewPods, Places]:
        """The view pods of ``source`` (a snapshot), built by ``build`` once while it is the last.

        The views of a pass's simulations are derived from its snapshot's.
        """
        held = self._base
        if held is None or held[0] is not source:
            built = build()
            held = (source, built, built.places())
            self._base = held
        return held[1], held[2]

    def get(
        self, pools: Sequence[PoolTemplate], daemonsets: Sequence[DaemonSet], region: str
    ) -> tuple[DaemonOverhead, list[Option]]:
        """The DaemonSet overhead and the offerings (a fresh list) of these inputs.

        Raises:
            PodError: naming a DaemonSet whose pod template cannot be read.
        """
        inputs = self._inputs
        if (
            inputs is None
            or self._daemons is None
            or inputs[2] != region
            or not _same(inputs[0], pools)
            or not _same(inputs[1], daemonsets)
        ):
            daemons = DaemonOverhead.from_daemonsets(daemonsets)
            self._options = tuple(enumerate_options(pools, daemons, region))
            self._daemons = daemons
            self._inputs = (tuple(pools), tuple(daemonsets), region)
            self.derived = None
        return self._daemons, list(self._options)


def _same(kept: Sequence[object], asked: Sequence[object]) -> bool:
    """The same inputs: the same objects, or equal ones.

    A provisioning batch resolves its NodePools' templates afresh, over the same instance type
    objects while nothing changed.
    """
    return len(kept) == len(asked) and all(
        a is b or a == b for a, b in zip(kept, asked, strict=True)
    )
