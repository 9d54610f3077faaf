"""Whether pods that may use no new node can all fit in what existing nodes have left.

A consolidation's simulation narrows the new capacity its moving pods may take (cheaper than
the nodes they leave, not spot when spot-to-spot consolidation is off); often none is left,
and the pods can only go to existing nodes. When they ask for more than those nodes have
left, no plan moves them all, and searching for one is wasted: the simulation fails
whatever the search finds. :func:`exceeds_existing_room` is that test, a necessary
condition only (room is summed over nodes and shared with every other pod, so it never
says "too much" when a plan could place them).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping

from solver.problem import PodClass, Problem

__all__ = ["exceeds_existing_room"]


def exceeds_existing_room(problem: Problem, keys: Collection[str]) -> bool:
    """Whether no plan can place every pod of the classes ``keys`` that may use no new bin.

    Such a class's pods can only go to the existing bins it allows. When one class's pods,
    or all of them together, request more of a resource than those bins have left in total,
    some of them stay unplaced in every valid plan. Classes that may use new bins are not
    looked at; GPU fractions are not counted (whole-GPU requests are).
    """
    remaining = {b.id: b.remaining for b in problem.existing}
    need: Counter[str] = Counter()
    usable: set[str] = set()
    for pod_class in problem.classes:
        if pod_class.key not in keys or pod_class.allowed_bin_types:
            continue
        own = _requests(pod_class, problem.gpu_resource)
        if _short(own, pod_class.allowed_existing, remaining):
            return True
        need.update(own)
        usable |= pod_class.allowed_existing
    return _short(need, usable, remaining)


def _requests(pod_class: PodClass, gpu_resource: str) -> Counter[str]:
    """What all the class's pods request, per resource (GPU fractions left out)."""
    return Counter(
        {
            resource: amount * pod_class.count
            for resource, amount in pod_class.demand.items()
            if amount > 0 and not (pod_class.gpu_fraction_milli and resource == gpu_resource)
        }
    )


def _short(
    need: Mapping[str, int], bins: Collection[str], remaining: Mapping[str, Mapping[str, int]]
) -> bool:
    """Whether ``bins`` have less left than ``need`` of some resource."""
    for resource, amount in need.items():
        room = sum(remaining.get(b, {}).get(resource, 0) for b in bins)
        if amount > room:
            return True
    return False
