"""Validation errors for API objects.

Every message names the kind, the object and the field path, the way an operator reads it::

    NodePool default: spec.template.spec.requirements[2].operator: must be one of In, NotIn, ...

Error tree::

    ValueError
     └── ApiValidationError        one object failed validation (one or more field problems)
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ApiValidationError", "FieldProblem"]


@dataclass(frozen=True, slots=True)
class FieldProblem:
    """One problem with one field; ``path`` is dotted with list indices (``spec.taints[0]``)."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class ApiValidationError(ValueError):
    """An API object that does not validate.

    Attributes:
        kind: the object's kind (``NodePool``).
        name: the object's name, or ``<unnamed>``.
        problems: every field problem found, in document order.
    """

    def __init__(self, kind: str, name: str | None, problems: list[FieldProblem]) -> None:
        self.kind = kind
        self.name = name or "<unnamed>"
        self.problems = tuple(problems)
        super().__init__(str(self))

    def __str__(self) -> str:
        prefix = f"{self.kind} {self.name}"
        return "; ".join(f"{prefix}: {problem}" for problem in self.problems)
