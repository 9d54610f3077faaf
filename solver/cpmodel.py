"""OR-Tools' CP-SAT model, built without its pre-PEP 8 aliases.

``cp_model.CpModel()`` walks its own attributes on every construction to add a deprecated
camelCase alias for each ``add_*``/``new_*``/``clear_*`` method: about 0.4 ms, as long as
solving one of column generation's pricing knapsacks, which builds a model per knapsack (tens
per pricing round). Jointer calls the snake_case methods only, so :class:`CpModel` skips the
aliases; the model, and so every solve, is the same.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

__all__ = ["CpModel"]


class CpModel(cp_model.CpModel):
    """A ``cp_model.CpModel`` without the camelCase aliases."""

    def _add_pre_pep8_methods(self) -> None:
        """Add nothing: Jointer never calls the deprecated camelCase names."""
