"""The fluid cost of a bin's pods: what guides ``solver.improve``'s rebalancing moves.

A bin's *fluid cost* is what its pods would cost if capacity could be bought by the fraction
of an offering: ``min_t price_t * max_r used_r / cap_t,r`` over the offerings ``t`` of its
domain. Two bins that each fill one resource and leave the other idle (one CPU-bound, one
memory-bound) have a higher total fluid cost than the same pods dealt so that both fill
evenly; moves that lower the total, while every bin keeps its offering, make the plan no
dearer and leave bins that the shrinking moves can then step down.

Each offering contributes the row ``w_t = price_t / cap_t`` (a resource it lacks weighs
``_LACKING``); the fluid cost is ``min_t max_r used_r * w_t,r``, so only offerings whose row
no other offering's row is below everywhere matter (``FluidCost`` keeps those: one offering
on a catalog whose types differ only in size, a few per family ratio on a real one), and
of offerings within a percent of each other only one.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

_CLOSE = 0.01
"""Offerings whose weights are within this share of another's everywhere are left out.

The fluid cost only guides moves that keep every bin on its offering, so a percent does not
matter, while the number of rows is what each evaluation costs: Karpenter's fake catalog has
400 offerings of one shape, of which rounding and the per-node overhead leave 37 strictly
undominated rows, all within a percent of the largest type's."""
_LACKING = 1e18
"""Weight of a resource an offering has none of: any use of it rules the offering out."""


class FluidCost:
    """The fluid cost of bins of one domain, for many used-resource vectors at once."""

    def __init__(self, cap: npt.NDArray[np.int64], price: npt.NDArray[np.int64]) -> None:
        """Keep the rows that matter of offerings of ``cap`` (offerings x resources), ``price``."""
        rows = np.where(cap > 0, price[:, None] / np.maximum(cap, 1), _LACKING)
        self.weights = _undominated(rows.astype(np.float64))

    def of(self, used: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """Return the fluid cost (micro-dollars) of each row of ``used`` (n x resources)."""
        if not len(self.weights) or not used.shape[1]:
            return np.zeros(used.shape[0])
        per = (used[:, None, :] * self.weights[None, :, :]).max(axis=2)
        result: npt.NDArray[np.float64] = per.min(axis=1)
        return result


def _undominated(rows: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Return rows such that every row is at least ``1 / (1 + _CLOSE)`` times one of them.

    Rows are kept cheapest first (by their sum); a row within ``_CLOSE`` above a kept row
    everywhere adds nothing worth its cost to ``FluidCost.of``.
    """
    ordered = rows[np.argsort(rows.sum(axis=1), kind="stable")]
    kept = np.zeros_like(ordered)
    n = 0
    for row in ordered:
        if not n or not (kept[:n] <= row * (1 + _CLOSE)).all(axis=1).any():
            kept[n] = row
            n += 1
    return kept[:n]
