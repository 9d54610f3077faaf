"""The chaos soak's invariants, checked on observations of the cluster and the account.

:class:`InvariantChecker` is pure: it is fed :class:`Observation` s (plain facts, built by the
soak from the in-memory API, the simulated account and the record, or by hand in tests) in
time order and returns the :class:`Violation` s each one reveals. Every invariant is checked on
every observation, not only at the end:

* ``orphanInstances``: an instance still running :data:`ORPHAN_GRACE_SECONDS` after it was
  first seen without a NodeClaim (garbage collection runs every 2 minutes and spares instances
  younger than 30 s).
* ``duplicateLaunches``: more than one instance ever launched for one NodeClaim.
* ``protectedPodEvictions``: the controllers evicted a ``karpenter.sh/do-not-disrupt`` pod
  (Karpenter's drain never evicts one; it waits, or force-deletes at the grace deadline).
* ``partialGangs``: a gang with some but fewer than ``minMember`` members bound for
  :data:`GANG_GRACE_SECONDS`, unless one of its members was lost involuntarily (its node was
  interrupted, stopped or never joined).
* ``pdbViolations``: an eviction after which a PodDisruptionBudget's healthy pods fell below
  what it requires.
* ``nodePoolLimits``: the capacity of a NodePool's NodeClaims above one of its ``limits``.
* ``pendingPods``: a pod pending longer than :data:`PENDING_GRACE_SECONDS` since it was created
  or since capacity last became available (a capacity outage or throttling burst ended, the
  controllers restarted), that is neither bound nor given a reason (``Nominated`` or
  ``FailedScheduling`` from the provisioner).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

__all__ = [
    "GANG_GRACE_SECONDS",
    "INVARIANTS",
    "ORPHAN_GRACE_SECONDS",
    "PENDING_GRACE_SECONDS",
    "Claim",
    "Eviction",
    "Gang",
    "Instance",
    "InvariantChecker",
    "Observation",
    "PendingPod",
    "Pool",
    "Violation",
]

ORPHAN_GRACE_SECONDS: Final = 300.0
"""Two garbage-collection periods and the 30 s minimum age, rounded up."""
GANG_GRACE_SECONDS: Final = 300.0
"""How long a gang may sit partly bound (members arrive one binding at a time)."""
PENDING_GRACE_SECONDS: Final = 300.0
"""Issue 21: every pending pod is bound or given a reason within 5 minutes of capacity existing."""

INVARIANTS: Final[Mapping[str, str]] = {
    "orphanInstances": "0 orphan instances",
    "duplicateLaunches": "0 duplicate launches",
    "protectedPodEvictions": "0 protected-pod evictions",
    "partialGangs": "0 partial gangs",
    "pdbViolations": "0 PDB violations",
    "nodePoolLimits": "NodePool limits never exceeded",
    "pendingPods": "every pending pod bound or given a reason within 5 minutes of capacity",
}
"""Every invariant, by name, with what it promises."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Instance:
    """A running instance and the NodeClaim its tag names ("" when untagged)."""

    instance_id: str
    node_claim: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Claim:
    """A NodeClaim: its NodePool and its capacity (integer units)."""

    name: str
    node_pool: str
    capacity: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class Pool:
    """A NodePool's ``spec.limits`` (integer units)."""

    name: str
    limits: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingPod:
    """A pod not bound and not finished: when it was created and whether it has a reason."""

    key: str
    created_at: float
    has_reason: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class Gang:
    """A pod group: its minimum and how many members are bound and live.

    Attributes:
        disturbed: a member was lost involuntarily (interruption, stop, a node that never
            joined): the gang's own scheduler restarts it, not the provisioner.
    """

    key: str
    min_member: int
    bound: int
    disturbed: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Eviction:
    """One eviction the controllers made.

    Attributes:
        pod: ``namespace/name``.
        protected: the pod was annotated ``karpenter.sh/do-not-disrupt: "true"``.
        short_pdbs: the PodDisruptionBudgets below their requirement right after it.
    """

    at: float
    pod: str
    protected: bool = False
    short_pdbs: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Observation:
    """What the cluster and the account hold at one moment.

    Attributes:
        at: virtual seconds.
        instances: running instances.
        launches: NodeClaim name -> ids of every instance ever launched for it.
        claims: NodeClaims that exist (deleting ones included).
        pools: NodePools.
        pending: pending pods.
        gangs: pod groups with at least one live member.
        evictions: evictions since the previous observation.
        capacity_since: when capacity last became available (0 when always).
    """

    at: float
    instances: tuple[Instance, ...] = ()
    launches: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    claims: tuple[Claim, ...] = ()
    pools: tuple[Pool, ...] = ()
    pending: tuple[PendingPod, ...] = ()
    gangs: tuple[Gang, ...] = ()
    evictions: tuple[Eviction, ...] = ()
    capacity_since: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Violation:
    """One broken invariant: which, when, about what, and how."""

    invariant: str
    at: float
    subject: str
    detail: str


_Report = Callable[[str, str, str], None]


class InvariantChecker:
    """Checks every invariant on each observation; reports each violation once."""

    def __init__(self) -> None:
        self.observations = 0
        self.violations: list[Violation] = []
        self._orphan_since: dict[str, float] = {}
        self._partial_since: dict[str, float] = {}
        self._reported: set[tuple[str, str]] = set()

    def counts(self) -> dict[str, int]:
        """Violations per invariant (every invariant listed, zeros included)."""
        counts = dict.fromkeys(INVARIANTS, 0)
        for violation in self.violations:
            counts[violation.invariant] += 1
        return counts

    def observe(self, observation: Observation) -> list[Violation]:
        """Check one observation; return the violations it reveals (new ones only)."""
        self.observations += 1
        found: list[Violation] = []
        at = observation.at

        def report(invariant: str, subject: str, detail: str) -> None:
            if (invariant, subject) in self._reported:
                return
            self._reported.add((invariant, subject))
            found.append(Violation(invariant=invariant, at=at, subject=subject, detail=detail))

        self._orphans(observation, report)
        self._duplicates(observation, report)
        self._evictions(observation, report)
        self._gangs(observation, report)
        self._limits(observation, report)
        self._pending(observation, report)
        self.violations.extend(found)
        return found

    def _orphans(self, observation: Observation, report: _Report) -> None:
        at = observation.at
        claims = {c.name for c in observation.claims}
        for instance in observation.instances:
            if instance.node_claim and instance.node_claim in claims:
                self._orphan_since.pop(instance.instance_id, None)
                continue
            since = self._orphan_since.setdefault(instance.instance_id, at)
            if at - since >= ORPHAN_GRACE_SECONDS:
                report(
                    "orphanInstances",
                    instance.instance_id,
                    f"running {at - since:g}s without a NodeClaim "
                    f"(tag {instance.node_claim or 'missing'})",
                )
        running = {i.instance_id for i in observation.instances}
        for gone in set(self._orphan_since) - running:
            del self._orphan_since[gone]

    @staticmethod
    def _duplicates(observation: Observation, report: _Report) -> None:
        for claim, ids in sorted(observation.launches.items()):
            if len(ids) > 1:
                report(
                    "duplicateLaunches",
                    claim,
                    f"{len(ids)} instances for one NodeClaim: {', '.join(sorted(ids))}",
                )

    @staticmethod
    def _evictions(observation: Observation, report: _Report) -> None:
        for eviction in observation.evictions:
            if eviction.protected:
                report(
                    "protectedPodEvictions",
                    f"{eviction.pod}@{eviction.at:g}",
                    "evicted a karpenter.sh/do-not-disrupt pod",
                )
            if eviction.short_pdbs:
                report(
                    "pdbViolations",
                    f"{eviction.pod}@{eviction.at:g}",
                    "PodDisruptionBudget(s) below their minimum after the eviction: "
                    + ", ".join(eviction.short_pdbs),
                )

    def _gangs(self, observation: Observation, report: _Report) -> None:
        at = observation.at
        partial = set()
        for gang in observation.gangs:
            if 0 < gang.bound < gang.min_member and not gang.disturbed:
                partial.add(gang.key)
                since = self._partial_since.setdefault(gang.key, at)
                if at - since >= GANG_GRACE_SECONDS:
                    report(
                        "partialGangs",
                        gang.key,
                        f"{gang.bound} of minMember {gang.min_member} bound for {at - since:g}s",
                    )
        for key in set(self._partial_since) - partial:
            del self._partial_since[key]

    @staticmethod
    def _limits(observation: Observation, report: _Report) -> None:
        used: dict[str, dict[str, int]] = {}
        for claim in observation.claims:
            totals = used.setdefault(claim.node_pool, {})
            for resource, quantity in claim.capacity.items():
                totals[resource] = totals.get(resource, 0) + quantity
        for pool in observation.pools:
            totals = used.get(pool.name, {})
            for resource, limit in sorted(pool.limits.items()):
                if totals.get(resource, 0) > limit:
                    report(
                        "nodePoolLimits",
                        f"{pool.name}/{resource}",
                        f"NodeClaims hold {totals[resource]} of {resource}, limit {limit}",
                    )

    @staticmethod
    def _pending(observation: Observation, report: _Report) -> None:
        for pod in observation.pending:
            waiting = observation.at - max(pod.created_at, observation.capacity_since)
            if not pod.has_reason and waiting > PENDING_GRACE_SECONDS:
                report(
                    "pendingPods",
                    pod.key,
                    f"pending {waiting:g}s with capacity available, not bound and no reason given",
                )
