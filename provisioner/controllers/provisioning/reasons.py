"""Why a pod gets no capacity, in terms a user can act on.

Each reason names the NodePool and what about it stops the pod: a not-ready NodePool and its
condition (``NodePool "gpu" not ready: NodeClassReady=False: EC2NodeClass "gpu" not found``),
the requirement or taint that rules a NodePool out, the limit that ran out. Karpenter's strings
lead where Karpenter has one (``incompatible with nodepool "x", ...``, ``all available instance
types exceed limits for nodepool: "x"``); Jointer's detail follows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from provisioner.apis import labels as wk
from provisioner.controllers.provisioning.offerings import (
    SCHEDULING_EFFECTS,
    Option,
    PoolTemplate,
)
from provisioner.scheduling.requirements import Requirements
from provisioner.scheduling.resources import format_resource_list
from provisioner.scheduling.taints import Toleration, untolerated

__all__ = ["NO_READY_NODEPOOL", "Explainer", "UnavailablePool", "limit_reached"]

NO_READY_NODEPOOL: Final = "no NodePool is ready to provision capacity"
SHOWN_POOLS: Final = 5
"""NodePools named in one reason before ``and N other(s)``."""


@dataclass(frozen=True, slots=True)
class UnavailablePool:
    """A NodePool the planner may not use now, and why.

    Attributes:
        name: the NodePool's name.
        cause: why, e.g. ``NodeClassReady=False: EC2NodeClass "x" not found``.
        template: its requirements and taints (no instance types).
    """

    name: str
    cause: str
    template: PoolTemplate

    def __str__(self) -> str:
        """``NodePool "x" not ready: <cause>``."""
        return f'NodePool "{self.name}" not ready: {self.cause}'


def limit_reached(pool: str, resource: str, limit_milli: int) -> str:
    """Karpenter's limit message for ``pool``, with the limit that ran out."""
    limit = format_resource_list({resource: limit_milli})[resource]
    return (
        f'all available instance types exceed limits for nodepool: "{pool}" '
        f"({resource} limit {limit} reached)"
    )


def _joined(parts: Sequence[str]) -> str:
    shown = list(parts[:SHOWN_POOLS])
    rest = len(parts) - SHOWN_POOLS
    if rest > 0:
        shown.append(f"and {rest} other(s)")
    return "; ".join(shown)


class Explainer:
    """Explains, per pod, why the ready NodePools cannot take it and which unready ones might.

    Args:
        pools: the ready NodePools, heaviest first.
        options: every option of those pools.
        unavailable: the NodePools left out of planning, with why.
    """

    def __init__(
        self,
        pools: Sequence[PoolTemplate],
        options: Sequence[Option],
        unavailable: Sequence[UnavailablePool] = (),
    ) -> None:
        self._pools = tuple(pools)
        self._unavailable = tuple(unavailable)
        self._all_options = tuple(options)
        self._by_pool: dict[str, list[Option]] | None = None  # indexed when first explained

    def _pool_options(self) -> dict[str, list[Option]]:
        if self._by_pool is None:
            self._by_pool = {}
            for option in self._all_options:
                self._by_pool.setdefault(option.pool.name, []).append(option)
        return self._by_pool

    def not_ready(
        self, tolerations: Sequence[Toleration], alternatives: Sequence[Requirements]
    ) -> list[str]:
        """The unready NodePools the pod could use once ready (requirements and taints)."""
        return [
            str(pool)
            for pool in self._unavailable
            if self._taint(tolerations, pool.template) is None
            and self._requirements(pool.template, alternatives) is None
        ]

    def incompatible(
        self, tolerations: Sequence[Toleration], alternatives: Sequence[Requirements]
    ) -> str:
        """Why no ready NodePool offers a node the pod may run on (its requirements, taints)."""
        parts = self.not_ready(tolerations, alternatives)
        for pool in self._pools:
            parts.append(
                f'incompatible with nodepool "{pool.name}", '
                f"{self._pool_cause(pool, tolerations, alternatives)}"
            )
        if not self._pools:
            return f"{NO_READY_NODEPOOL}: {_joined(parts)}" if parts else NO_READY_NODEPOOL
        return _joined(parts)

    def _pool_cause(
        self,
        pool: PoolTemplate,
        tolerations: Sequence[Toleration],
        alternatives: Sequence[Requirements],
    ) -> str:
        taint = self._taint(tolerations, pool)
        if taint is not None:
            return taint
        problem = self._requirements(pool, alternatives)
        if problem is not None:
            return f"incompatible requirements, {problem}"
        options = self._pool_options().get(pool.name, [])
        if not options:
            return "nodepool requirements filtered out all available instance types"
        for alternative in alternatives:
            if pool.requirements.compatible(alternative, wk.WELL_KNOWN_LABELS) is not None:
                continue
            for key in sorted(alternative):
                single = Requirements([alternative[key]])
                if not any(single.matches(o.labels) for o in options):
                    return f"no instance type offering satisfies {alternative[key]}"
            return f"no instance type offering satisfies {alternative}"
        return "no instance type offering satisfies the pod's requirements"

    @staticmethod
    def _taint(tolerations: Sequence[Toleration], pool: PoolTemplate) -> str | None:
        taint = untolerated(tolerations, pool.taints, SCHEDULING_EFFECTS)
        return None if taint is None else f"did not tolerate taint {taint}"

    @staticmethod
    def _requirements(pool: PoolTemplate, alternatives: Sequence[Requirements]) -> str | None:
        """None when one alternative is compatible with the pool, else the first one's error."""
        errors = [pool.requirements.compatible(a, wk.WELL_KNOWN_LABELS) for a in alternatives]
        if not errors or any(error is None for error in errors):
            return None
        return errors[0]
