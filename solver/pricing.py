"""Cheap knapsack upper bounds for many offering groups at once (column generation pricing).

For a dual vector ``pi`` and one bin of type ``t``, every single capacity row (a resource,
the GPU row in milli-devices, a hostname cap) is a relaxation of the pattern knapsack; its LP
optimum is a fractional knapsack, filled by value density ``pi_c / coef_c``. The density
order does not depend on the bin type, so one sort per row serves every group: cumulative
weights and values over the sorted classes, masked by which classes each group may hold,
give every group's fractional optimum with one vectorised search. The minimum over rows is
``bounds.fast_knapsack_upper`` for all groups in one pass.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from solver.bounds import hostname_caps
from solver.problem import GPU_MILLI, BinType, Problem
from solver.weights import fits_one

Array = npt.NDArray[np.float64]


class UpperIndex:
    """Per-group class eligibility and row coefficients, built once per column generation."""

    def __init__(
        self, problem: Problem, reps: Sequence[BinType], demand: Mapping[str, int]
    ) -> None:
        classes = [c for c in problem.classes if demand.get(c.key, 0) > 0]
        self.keys = [c.key for c in classes]
        self.demand = np.array([demand[k] for k in self.keys], dtype=np.float64)
        self.eligible = np.array(
            [
                [t.id in c.allowed_bin_types and fits_one(problem, c, t) for c in classes]
                for t in reps
            ],
            dtype=np.float64,
        ).reshape(len(reps), len(classes))
        gpu = problem.gpu_resource
        names = sorted({r for c in classes for r in c.demand} - {gpu})
        coefs: list[list[float]] = [[c.demand.get(r, 0) for c in classes] for r in names]
        caps: list[list[float]] = [[t.capacity.get(r, 0) for t in reps] for r in names]
        coefs.append([GPU_MILLI * c.demand.get(gpu, 0) + c.gpu_fraction_milli for c in classes])
        caps.append([GPU_MILLI * t.capacity.get(gpu, 0) for t in reps])
        for gid, cap in sorted(hostname_caps(problem).items()):
            coefs.append([1.0 if gid in c.topology else 0.0 for c in classes])
            caps.append([float(cap)] * len(reps))
        self.coefs = np.array(coefs, dtype=np.float64).reshape(len(coefs), len(classes))
        self.caps = np.array(caps, dtype=np.float64).reshape(len(caps), len(reps))

    def uppers(self, duals: Mapping[str, float]) -> Array:
        """Return, per group, an upper bound on the best pattern value under ``duals``."""
        pi = np.array([max(0.0, duals.get(k, 0.0)) for k in self.keys], dtype=np.float64)
        mask = self.eligible * (pi > 0)
        full = mask @ (pi * self.demand)
        best = full.copy()
        for coef, cap in zip(self.coefs, self.caps, strict=True):
            weighted = coef > 0
            free = mask[:, ~weighted] @ (pi * self.demand)[~weighted]
            order = np.flatnonzero(weighted)
            if order.size == 0:
                continue
            density = pi[order] / coef[order]
            order = order[np.argsort(-density, kind="stable")]
            weights = mask[:, order] * (self.demand[order] * coef[order])
            values = mask[:, order] * (self.demand[order] * pi[order])
            cum_w = np.cumsum(weights, axis=1)
            cum_v = np.cumsum(values, axis=1)
            # first class that no longer fits whole; it fills what is left fractionally
            cut = np.sum(cum_w <= cap[:, None], axis=1)
            rows = np.arange(len(cap))
            before_w = np.where(cut > 0, cum_w[rows, np.maximum(cut - 1, 0)], 0.0)
            before_v = np.where(cut > 0, cum_v[rows, np.maximum(cut - 1, 0)], 0.0)
            k = np.minimum(cut, order.size - 1)
            dens = (pi[order] / coef[order])[k] * mask[rows, order[k]]
            partial = np.where(cut < order.size, (cap - before_w) * dens, 0.0)
            best = np.minimum(best, free + before_v + partial)
        result: Array = best * (1 + 1e-6) + 1e-6
        return result
