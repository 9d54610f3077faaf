"""Solver configuration."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SolverConfig:
    """How hard and how reproducibly to optimise.

    Attributes:
        time_limit_seconds: wall-clock cap for the whole ``solve`` (greedy, column
            generation, CP-SAT); the best plan so far is returned when it runs out. A cap,
            not a floor: with ``adaptive_budget`` a large limit still stops early.
        num_workers: CP-SAT search workers (1 for reproducible tests).
        random_seed: CP-SAT seed.
        deterministic_time: CP-SAT ``max_deterministic_time`` (reproducible budget), or None.
        relative_gap: stop as soon as (cost - lower bound) / cost is at most this (after the
            greedy plans, after column generation, or inside CP-SAT); also CP-SAT's
            ``relative_gap_limit``.
        colgen_rounds: maximum column-generation pricing rounds; None: until the deadline on
            wall-clock runs, ``DETERMINISTIC_ROUNDS`` with ``deterministic_time``.
        adaptive_budget: let ``solve`` stop before the time limit on its own budget, which
            grows with the problem (``solver.cpsat.budget_seconds``); ignored when
            ``deterministic_time`` is set. Either way, without ``deterministic_time`` CP-SAT
            stops when it has not improved for a while.
        spent_seconds: time the caller already spent on this planning step (building the
            problem); the adaptive budget counts it.
        min_search_seconds: the adaptive budget never leaves ``solve`` less than this
            (within the time limit), however much ``spent_seconds`` took.
        merge_from: classes from which the LP phases merge interchangeable ones
            (``solver.shapes``); small problems keep theirs.
        log_callback: receives solver log lines (CP-SAT search log and short progress
            lines); ``None`` = silent. Nothing is ever printed to stdout.
    """

    time_limit_seconds: float = 5.0
    num_workers: int = 2
    random_seed: int = 0
    deterministic_time: float | None = None
    relative_gap: float = 0.01
    colgen_rounds: int | None = None
    adaptive_budget: bool = True
    spent_seconds: float = 0.0
    min_search_seconds: float = 0.25
    merge_from: int = 60
    log_callback: Callable[[str], None] | None = None


DETERMINISTIC_ROUNDS = 30
"""Column-generation rounds of a reproducible run (``deterministic_time``) by default."""
