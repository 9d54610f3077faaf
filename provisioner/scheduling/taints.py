"""Taints and tolerations with kube-scheduler's matching rules.

Taints are `provisioner.apis.core.Taint`. `tolerates` is
``k8s.io/api/core/v1.Toleration.ToleratesTaint``; `untolerated` and
`untolerated_all` are the node-side checks Karpenter and the TaintToleration filter make.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Literal, cast, get_args

from provisioner.apis.core import Taint, TaintEffect

__all__ = [
    "EFFECTS",
    "SCHEDULING_EFFECTS",
    "Effect",
    "TaintError",
    "Toleration",
    "merge_taints",
    "parse_taint",
    "tolerates",
    "untolerated",
    "untolerated_all",
]

Effect = TaintEffect
EFFECTS: Final[frozenset[str]] = frozenset(get_args(Effect))
#: The effects that keep a pod off a node; ``PreferNoSchedule`` is only a preference.
SCHEDULING_EFFECTS: Final[tuple[Effect, ...]] = ("NoSchedule", "NoExecute")
TolerationOperator = Literal["Equal", "Exists", "Lt", "Gt"]
_TOLERATION_OPERATORS: Final[frozenset[str]] = frozenset(get_args(TolerationOperator))


class TaintError(ValueError):
    """A taint or toleration in a shape Kubernetes would reject; names the field."""


def _string(data: Mapping[str, object], name: str, field: str) -> str:
    """``data[name]``, ``""`` when missing or empty.

    Raises:
        TaintError: when it is there and not a string.
    """
    value = data.get(name) or ""
    if not isinstance(value, str):
        raise TaintError(f"{field}.{name}: must be a string, got {value!r}")
    return value


def parse_taint(data: Mapping[str, object], *, field: str = "taint") -> Taint:
    """Read a Kubernetes ``Taint`` (``{key, value?, effect}``); ``timeAdded`` is not kept.

    Raises:
        TaintError: on a missing key or an unknown effect.
    """
    key = data.get("key")
    if not isinstance(key, str) or not key:
        raise TaintError(f"{field}.key: required, got {key!r}")
    value = _string(data, "value", field)
    effect = data.get("effect")
    if effect not in EFFECTS:
        raise TaintError(
            f"{field}.effect: must be one of {', '.join(sorted(EFFECTS))}, got {effect!r}"
        )
    return Taint.model_construct(key=key, value=value, effect=cast("Effect", effect))


@dataclass(frozen=True, slots=True)
class Toleration:
    """A pod toleration; empty ``key`` and ``effect`` are wildcards, as in Kubernetes."""

    key: str = ""
    operator: TolerationOperator = "Equal"
    value: str = ""
    effect: Effect | Literal[""] = ""
    toleration_seconds: int | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, object], *, field: str = "toleration") -> Toleration:
        """Read a Kubernetes ``Toleration``; the operator defaults to ``Equal``.

        Raises:
            TaintError: on a field of the wrong type, an unknown operator or effect.
        """
        key = _string(data, "key", field)
        value = _string(data, "value", field)
        operator = data.get("operator") or "Equal"
        effect = data.get("effect") or ""
        seconds = data.get("tolerationSeconds")
        if operator not in _TOLERATION_OPERATORS:
            raise TaintError(
                f"{field}.operator: must be one of "
                f"{', '.join(sorted(_TOLERATION_OPERATORS))}, got {operator!r}"
            )
        if effect != "" and effect not in EFFECTS:
            raise TaintError(
                f"{field}.effect: must be empty or one of {', '.join(sorted(EFFECTS))}, "
                f"got {effect!r}"
            )
        if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, int)):
            raise TaintError(f"{field}.tolerationSeconds: must be an integer, got {seconds!r}")
        return cls(
            key,
            cast("TolerationOperator", operator),
            value,
            cast("Effect | Literal['']", effect),
            seconds,
        )

    def to_dict(self) -> dict[str, object]:
        """The Kubernetes JSON shape, empty fields omitted."""
        data: dict[str, object] = {"operator": self.operator}
        if self.key:
            data["key"] = self.key
        if self.value:
            data["value"] = self.value
        if self.effect:
            data["effect"] = self.effect
        if self.toleration_seconds is not None:
            data["tolerationSeconds"] = self.toleration_seconds
        return data


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """Whether ``toleration`` tolerates ``taint`` (``Toleration.ToleratesTaint``).

    An empty effect matches every effect and an empty key every key; ``Exists`` matches every
    value, ``Equal`` (the default) needs equal values. The alpha numeric operators ``Lt`` and
    ``Gt`` (KEP-5471, behind a feature gate) tolerate nothing, as with the gate off.
    """
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator == "Exists":
        return True
    if toleration.operator == "Equal":
        return toleration.value == taint.value
    return False


def untolerated_all(
    tolerations: Iterable[Toleration],
    taints: Iterable[Taint],
    effects: Collection[str] = SCHEDULING_EFFECTS,
) -> list[Taint]:
    """The taints with an effect in ``effects`` that no toleration tolerates, in order.

    Karpenter's own ``Taints.ToleratesPod`` checks every effect, ``PreferNoSchedule``
    included: pass ``effects=EFFECTS`` for that.
    """
    held = tuple(tolerations)
    return [
        taint
        for taint in taints
        if taint.effect in effects and not any(tolerates(t, taint) for t in held)
    ]


def untolerated(
    tolerations: Iterable[Toleration],
    taints: Iterable[Taint],
    effects: Collection[str] = SCHEDULING_EFFECTS,
) -> Taint | None:
    """The first taint with an effect in ``effects`` that no toleration tolerates, or None."""
    found = untolerated_all(tolerations, taints, effects)
    return found[0] if found else None


def merge_taints(taints: Iterable[Taint], extra: Iterable[Taint]) -> tuple[Taint, ...]:
    """``taints`` plus each of ``extra`` whose key and effect are not already present."""
    merged = list(taints)
    for taint in extra:
        if not any(taint.matches(existing) for existing in merged):
            merged.append(taint)
    return tuple(merged)
