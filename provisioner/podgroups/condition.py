"""The ``metav1.Condition`` shape shared by the pod-group CRDs, and lookups over it."""

from __future__ import annotations

from collections.abc import Iterable

from provisioner.apis.base import LenientModel

__all__ = ["Condition", "find_condition", "is_true"]


class Condition(LenientModel):
    """A status condition (``type``, ``status``, ``reason``, ``message``)."""

    type: str = ""
    status: str = ""
    reason: str = ""
    message: str = ""


def find_condition(conditions: Iterable[Condition], kind: str) -> Condition | None:
    """Return the condition of type ``kind``, if present."""
    for condition in conditions:
        if condition.type == kind:
            return condition
    return None


def is_true(conditions: Iterable[Condition], kind: str) -> bool:
    """Whether the condition of type ``kind`` is present with status ``True``."""
    condition = find_condition(conditions, kind)
    return condition is not None and condition.status == "True"
