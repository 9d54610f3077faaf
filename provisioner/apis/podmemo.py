"""Values computed once per pod object, for callers that plan over the same pods many times.

A disruption pass runs many rescheduling simulations over one snapshot: every simulation
reads the requests of the pods on the nodes that stay, and turns the pods of the nodes it
removes into pending copies whose facts it reads. Pods are immutable, so each of these is a
function of the pod object; :class:`PerPod` keeps it while the object is held here (an
identity cannot be recycled), and :meth:`PerPod.bound` drops the pods of older snapshots.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Generic, TypeVar

from provisioner.apis.core import Pod

__all__ = ["PER_POD_SLACK", "PerPod"]

PER_POD_SLACK: Final = 1024
"""Pods kept beyond twice the live ones before a memo starts again."""

T = TypeVar("T")


class PerPod(Generic[T]):
    """One value per pod object, computed on first use."""

    __slots__ = ("_known",)

    def __init__(self) -> None:
        self._known: dict[int, tuple[Pod, T]] = {}

    def get(self, pod: Pod, compute: Callable[[Pod], T]) -> T:
        """The value for ``pod``: remembered, or ``compute(pod)`` (exceptions pass through)."""
        known = self._known.get(id(pod))
        if known is not None and known[0] is pod:
            return known[1]
        value = compute(pod)
        self._known[id(pod)] = (pod, value)
        return value

    def __len__(self) -> int:
        return len(self._known)

    def bound(self, live: int) -> None:
        """Start again when holding more than twice ``live`` pods (plus some slack)."""
        if len(self._known) > 2 * live + PER_POD_SLACK:
            self._known = {}
