"""Label and field selectors, evaluated client-side.

`parse_label_selector` understands the string form the API accepts (`a=b`, `a==b`, `a!=b`,
`a in (x,y)`, `a notin (x,y)`, `a`, `!a`, comma-separated = AND); `from_label_selector`
converts the structured form of PodDisruptionBudgets and affinities (`matchLabels`,
`matchExpressions` with `In`/`NotIn`/`Exists`/`DoesNotExist`). `parse_field_selector` handles
`path=value`, `path==value` and `path!=value` over dotted paths such as `metadata.name` or
`spec.nodeName`, which is all the port promises.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from provisioner.kube.errors import BadRequestError


class Operator(StrEnum):
    """A label requirement's operator."""

    EQUALS = "="
    NOT_EQUALS = "!="
    IN = "in"
    NOT_IN = "notin"
    EXISTS = "exists"
    DOES_NOT_EXIST = "!"


@dataclass(frozen=True, slots=True)
class Requirement:
    """One clause of a label selector."""

    key: str
    operator: Operator
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a label set satisfies this clause (API semantics: `!=`/`notin` match absence)."""
        present = self.key in labels
        value = labels.get(self.key)
        match self.operator:
            case Operator.EQUALS | Operator.IN:
                return present and value in self.values
            case Operator.NOT_EQUALS | Operator.NOT_IN:
                return not present or value not in self.values
            case Operator.EXISTS:
                return present
            case Operator.DOES_NOT_EXIST:
                return not present


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A conjunction of requirements; the empty selector matches everything."""

    requirements: tuple[Requirement, ...] = ()
    matches_nothing: bool = False

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        """Whether a label set satisfies every requirement."""
        if self.matches_nothing:
            return False
        actual = labels or {}
        return all(requirement.matches(actual) for requirement in self.requirements)


_SET_RE: Final = re.compile(r"^\s*(\S+?)\s+(in|notin)\s*\((.*)\)\s*$")
_EQ_RE: Final = re.compile(r"^\s*([^=!\s]+)\s*(==|=|!=)\s*(\S*)\s*$")
_KEY_RE: Final = re.compile(r"^\s*(!?)\s*([^=!\s(),]+)\s*$")


def _split_clauses(text: str) -> list[str]:
    clauses: list[str] = []
    depth = 0
    current: list[str] = []
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            clauses.append("".join(current))
            current = []
        else:
            current.append(char)
    if depth != 0:
        raise BadRequestError(f"unbalanced parentheses in label selector {text!r}")
    clauses.append("".join(current))
    return clauses


def _parse_clause(clause: str, text: str) -> Requirement:
    if match := _SET_RE.match(clause):
        values = frozenset(v.strip() for v in match.group(3).split(",") if v.strip())
        operator = Operator.IN if match.group(2) == "in" else Operator.NOT_IN
        return Requirement(match.group(1), operator, values)
    if match := _EQ_RE.match(clause):
        operator = Operator.NOT_EQUALS if match.group(2) == "!=" else Operator.EQUALS
        return Requirement(match.group(1), operator, frozenset({match.group(3)}))
    if match := _KEY_RE.match(clause):
        operator = Operator.DOES_NOT_EXIST if match.group(1) else Operator.EXISTS
        return Requirement(match.group(2), operator)
    raise BadRequestError(f"unable to parse requirement {clause!r} of label selector {text!r}")


def parse_label_selector(text: str | None) -> LabelSelector:
    """Parse the string form of a label selector.

    Args:
        text: e.g. `app=web,tier in (a,b),!legacy`; `None` or blank selects everything.

    Returns:
        The parsed selector.

    Raises:
        BadRequestError: the text is not a valid selector (as the API answers 400).
    """
    if text is None or not text.strip():
        return LabelSelector()
    return LabelSelector(tuple(_parse_clause(clause, text) for clause in _split_clauses(text)))


_EXPRESSION_OPERATORS: Final = {
    "In": Operator.IN,
    "NotIn": Operator.NOT_IN,
    "Exists": Operator.EXISTS,
    "DoesNotExist": Operator.DOES_NOT_EXIST,
}


def from_label_selector(selector: Mapping[str, Any] | None) -> LabelSelector:
    """Convert a structured `metav1.LabelSelector` (`matchLabels`, `matchExpressions`).

    A missing selector (`None`) matches nothing, an empty one (`{}`) everything — the
    PodDisruptionBudget `policy/v1` rules.
    """
    if selector is None:
        return LabelSelector(matches_nothing=True)
    requirements = [
        Requirement(str(key), Operator.EQUALS, frozenset({str(value)}))
        for key, value in (selector.get("matchLabels") or {}).items()
    ]
    for expression in selector.get("matchExpressions") or []:
        operator = _EXPRESSION_OPERATORS.get(str(expression.get("operator")))
        if operator is None:
            raise BadRequestError(f"unknown label selector operator in {expression!r}")
        values = frozenset(str(v) for v in expression.get("values") or [])
        requirements.append(Requirement(str(expression.get("key")), operator, values))
    return LabelSelector(tuple(requirements))


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    """One clause of a field selector over a dotted path."""

    path: str
    value: str
    negated: bool = False

    def matches(self, obj: Mapping[str, Any]) -> bool:
        """Whether the object's field (missing = empty string) has (or lacks) the value."""
        current: Any = obj
        for part in self.path.split("."):
            current = current.get(part) if isinstance(current, Mapping) else None
        actual = "" if current is None else str(current)
        return (actual == self.value) != self.negated


@dataclass(frozen=True, slots=True)
class FieldSelector:
    """A conjunction of field requirements; empty matches everything."""

    requirements: tuple[FieldRequirement, ...] = ()

    def matches(self, obj: Mapping[str, Any]) -> bool:
        """Whether the object satisfies every clause."""
        return all(requirement.matches(obj) for requirement in self.requirements)


def parse_field_selector(text: str | None) -> FieldSelector:
    """Parse `metadata.name=x,spec.nodeName!=y` (`=`, `==`, `!=`).

    Raises:
        BadRequestError: a clause has no operator.
    """
    if text is None or not text.strip():
        return FieldSelector()
    requirements: list[FieldRequirement] = []
    for clause in text.split(","):
        match = _EQ_RE.match(clause)
        if match is None:
            raise BadRequestError(f"invalid field selector {text!r}")
        requirements.append(
            FieldRequirement(match.group(1), match.group(3), negated=match.group(2) == "!=")
        )
    return FieldSelector(tuple(requirements))
