"""Node selector requirements with Karpenter's semantics (``pkg/scheduling/requirement(s).go``).

A `Requirement` constrains one label key. It describes the set of *states* the label may be in
on a node: absent, or present with some value. The value part is either a finite set (``In``)
or the complement of a finite set (``NotIn``, ``Exists``), optionally bounded by integer limits
(``Gt``, ``Lt``). Intersection is a true set intersection of states, which makes it
commutative, associative and idempotent, and makes "the intersection is empty" mean exactly
"no node can satisfy both".

This differs from Karpenter only where Karpenter's representation loses information: Karpenter
cannot tell ``In []`` (impossible) from ``DoesNotExist``, and turns ``Exists ∩ NotIn [x]`` or
``Gt 1 ∩ NotIn [x]`` into a plain ``NotIn [x]`` that also accepts an absent label. Jointer keeps
the absence flag, so such requirements never match a node without the label (as
kube-scheduler would decide).

Label-key normalisation (deprecated beta labels to their stable names) and the lists of
well-known and restricted labels live in ``provisioner.apis.labels``; callers pass them in.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal, NotRequired, TypedDict, cast, get_args

__all__ = [
    "OPERATORS",
    "NodeSelectorRequirementDict",
    "Operator",
    "Requirement",
    "RequirementError",
    "Requirements",
]

Operator = Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte"]
OPERATORS: Final[frozenset[str]] = frozenset(get_args(Operator))
_VALUE_OPERATORS: Final = frozenset({"In", "NotIn"})
_BOUND_OPERATORS: Final = frozenset({"Gt", "Lt", "Gte", "Lte"})
_INTEGER_RE: Final = re.compile(r"^[+-]?[0-9]+$")
_MAX_LISTED_VALUES: Final = 5


class RequirementError(ValueError):
    """A node selector requirement that cannot be built; names the key and operator."""


class NodeSelectorRequirementDict(TypedDict):
    """A ``NodeSelectorRequirementWithMinValues`` in its Kubernetes JSON shape."""

    key: str
    operator: str
    values: list[str]
    minValues: NotRequired[int]


def _as_int(value: str) -> int | None:
    """The integer a label value denotes, as Go's ``strconv.Atoi`` reads it, or None."""
    if _INTEGER_RE.match(value) is None:
        return None
    return int(value)


def _within(value: str, greater_than: int | None, less_than: int | None) -> bool:
    if greater_than is None and less_than is None:
        return True
    number = _as_int(value)
    if number is None:
        return False
    return (greater_than is None or number > greater_than) and (
        less_than is None or number < less_than
    )


def _max_opt(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)


def _min_opt(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


@dataclass(frozen=True, slots=True)
class Requirement:
    """The allowed states of one label key.

    Build requirements with `from_operator` (or `Requirements.from_terms`); the fields are
    normalised on construction so that equal constraints compare equal.

    Attributes:
        key: the label key.
        complement: False: the label's value must be one of ``members``; True: it must not be.
        members: the allowed values (``complement`` False) or the excluded ones (True).
        greater_than: the value must be an integer strictly greater than this.
        less_than: the value must be an integer strictly less than this.
        allow_absent: a node without the label satisfies the requirement (``NotIn``,
            ``DoesNotExist``).
        min_values: Karpenter's ``minValues``: how many distinct values the launch must keep
            open for this key.
    """

    key: str
    complement: bool
    members: frozenset[str]
    greater_than: int | None = None
    less_than: int | None = None
    allow_absent: bool = False
    min_values: int | None = None

    def __post_init__(self) -> None:
        bounded = self.greater_than is not None or self.less_than is not None
        if not self.complement:
            members = frozenset(
                value for value in self.members if _within(value, self.greater_than, self.less_than)
            )
            self._set(members=members, greater_than=None, less_than=None)
            return
        if (
            self.greater_than is not None
            and self.less_than is not None
            and self.greater_than + 1 >= self.less_than
        ):
            # No integer lies strictly between the bounds: nothing is allowed.
            self._set(
                complement=False,
                members=frozenset(),
                greater_than=None,
                less_than=None,
                allow_absent=False,
            )
            return
        if bounded:
            # Excluding values the bounds already exclude changes nothing; drop them.
            members = frozenset(
                value for value in self.members if _within(value, self.greater_than, self.less_than)
            )
            # Integer bounds require the label to be present.
            self._set(members=members, allow_absent=False)

    def _set(self, **fields: object) -> None:
        for name, value in fields.items():
            object.__setattr__(self, name, value)

    @classmethod
    def from_operator(
        cls,
        key: str,
        operator: str,
        values: Iterable[str] = (),
        min_values: int | None = None,
    ) -> Requirement:
        """Build a requirement from a Kubernetes node selector expression.

        ``Gte n`` is ``Gt n-1`` and ``Lte n`` is ``Lt n+1``.

        Raises:
            RequirementError: on an empty key, an unknown operator, ``In``/``NotIn`` value
                lists that are not lists of strings, ``In`` without values, values on
                ``Exists``/``DoesNotExist``, bounds without exactly one integer value, or a
                ``minValues`` below 1.
        """
        where = f"requirement {key!r} {operator}"
        if not key:
            raise RequirementError(f"{where}: key must be a non-empty string")
        if operator not in OPERATORS:
            raise RequirementError(
                f"{where}: unknown operator, expected one of {', '.join(sorted(OPERATORS))}"
            )
        if isinstance(values, str):
            raise RequirementError(f"{where}: values must be a list of strings, not a string")
        listed = tuple(values)
        if not all(isinstance(value, str) for value in listed):
            raise RequirementError(f"{where}: values must be strings, got {list(listed)!r}")
        if min_values is not None and (isinstance(min_values, bool) or min_values < 1):
            raise RequirementError(f"{where}: minValues must be a positive integer")
        if operator in _VALUE_OPERATORS:
            if operator == "In" and not listed:
                raise RequirementError(f"{where}: In requires at least one value")
            return cls(
                key,
                complement=operator == "NotIn",
                members=frozenset(listed),
                allow_absent=operator == "NotIn",
                min_values=min_values,
            )
        if operator in _BOUND_OPERATORS:
            return cls._bounded(key, operator, listed, min_values, where)
        if listed:
            raise RequirementError(f"{where}: {operator} takes no values, got {list(listed)!r}")
        exists = operator == "Exists"
        return cls(
            key,
            complement=exists,
            members=frozenset(),
            allow_absent=not exists,
            min_values=min_values,
        )

    @classmethod
    def _bounded(
        cls,
        key: str,
        operator: str,
        listed: tuple[str, ...],
        min_values: int | None,
        where: str,
    ) -> Requirement:
        number = _as_int(listed[0]) if len(listed) == 1 else None
        if number is None:
            raise RequirementError(
                f"{where}: requires exactly one integer value, got {list(listed)!r}"
            )
        greater_than = {"Gt": number, "Gte": number - 1}.get(operator)
        less_than = {"Lt": number, "Lte": number + 1}.get(operator)
        return cls(
            key,
            complement=True,
            members=frozenset(),
            greater_than=greater_than,
            less_than=less_than,
            min_values=min_values,
        )

    @classmethod
    def exists(cls, key: str) -> Requirement:
        """``key Exists``: any value, the label must be present."""
        return cls(key, complement=True, members=frozenset())

    def intersection(self, other: Requirement) -> Requirement:
        """The states allowed by both requirements (``minValues``: the larger).

        Raises:
            RequirementError: when the keys differ.
        """
        if other.key != self.key:
            raise RequirementError(
                f"cannot intersect requirements on {self.key!r} and {other.key!r}"
            )
        if self.complement and other.complement:
            members = self.members | other.members
        elif self.complement:
            members = other.members - self.members
        elif other.complement:
            members = self.members - other.members
        else:
            members = self.members & other.members
        return Requirement(
            self.key,
            complement=self.complement and other.complement,
            members=members,
            greater_than=_max_opt(self.greater_than, other.greater_than),
            less_than=_min_opt(self.less_than, other.less_than),
            allow_absent=self.allow_absent and other.allow_absent,
            min_values=_max_opt(self.min_values, other.min_values),
        )

    def has(self, value: str) -> bool:
        """Whether a node whose label ``key`` is ``value`` satisfies the requirement."""
        if not _within(value, self.greater_than, self.less_than):
            return False
        return (value in self.members) != self.complement

    def is_empty(self) -> bool:
        """Whether no node can satisfy the requirement (no value allowed, absence neither)."""
        return not self.complement and not self.members and not self.allow_absent

    def is_finite(self) -> bool:
        """Whether the allowed values are a finite set (``In`` or ``DoesNotExist``)."""
        return not self.complement

    def size(self) -> int | None:
        """The number of allowed values, or None when infinitely many are allowed."""
        return None if self.complement else len(self.members)

    def values(self) -> tuple[str, ...] | None:
        """The allowed values, sorted, or None when infinitely many are allowed."""
        return None if self.complement else tuple(sorted(self.members))

    def any(self) -> str | None:
        """Some allowed value (deterministic), or None when only absence is allowed."""
        if not self.complement:
            return min(self.members) if self.members else None
        return self._any_of_complement()

    def _any_of_complement(self) -> str:
        excluded = len(self.members) + 1
        if self.greater_than is not None:
            first, step = self.greater_than + 1, 1
        elif self.less_than is not None:
            first, step = self.less_than - 1, -1
        else:
            first, step = 0, 1
        for number in itertools.islice(itertools.count(first, step), excluded):
            if _within(str(number), self.greater_than, self.less_than) and (
                str(number) not in self.members
            ):
                return str(number)
        # Every integer in a tiny range is excluded in canonical form; zero-padded spellings
        # denote the same integer and are still allowed. Normalisation guarantees that
        # ``first`` is in range.
        sign = "-" if first < 0 else ""
        padding = 1
        while f"{sign}{'0' * padding}{abs(first)}" in self.members:
            padding += 1
        return f"{sign}{'0' * padding}{abs(first)}"

    def operator(self) -> Operator:
        """The normalised operator: ``Gt``/``Lt`` when bounded, else the set operator.

        An impossible requirement reports ``In`` (with no values).
        """
        if self.greater_than is not None:
            return "Gt"
        if self.less_than is not None:
            return "Lt"
        if self.complement:
            return "NotIn" if self.members or self.allow_absent else "Exists"
        return "DoesNotExist" if self.allow_absent and not self.members else "In"

    def to_dict(self) -> NodeSelectorRequirementDict:
        """One node selector expression for this requirement, as Karpenter writes it.

        This is lossy, as Karpenter's ``NodeSelectorRequirement()`` is, when the requirement
        needs several expressions (``Gt`` and ``Lt``, or bounds plus excluded values); use
        `to_dicts` to keep everything.
        """
        operator = self.operator()
        values: list[str]
        if operator == "Gt":
            values = [str(self.greater_than)]
        elif operator == "Lt":
            values = [str(self.less_than)]
        else:
            values = sorted(self.members)
        return self._expression(operator, values, with_min_values=True)

    def to_dicts(self) -> list[NodeSelectorRequirementDict]:
        """The node selector expressions (ANDed) equivalent to this requirement."""
        if self.is_empty():
            # ``In []`` is rejected by the API server; this pair is valid and unsatisfiable.
            impossible = [self._expression("Exists", []), self._expression("DoesNotExist", [])]
            if self.min_values is not None:
                impossible[0]["minValues"] = self.min_values
            return impossible
        if not self.complement:
            return [self.to_dict()]
        expressions: list[NodeSelectorRequirementDict] = []
        bounded = self.greater_than is not None or self.less_than is not None
        if self.greater_than is not None:
            expressions.append(self._expression("Gt", [str(self.greater_than)]))
        if self.less_than is not None:
            expressions.append(self._expression("Lt", [str(self.less_than)]))
        if not bounded and not self.allow_absent:
            expressions.append(self._expression("Exists", []))
        if self.members or (self.allow_absent and not bounded):
            expressions.append(self._expression("NotIn", sorted(self.members)))
        if self.min_values is not None:
            expressions[0]["minValues"] = self.min_values
        return expressions

    def _expression(
        self, operator: str, values: list[str], *, with_min_values: bool = False
    ) -> NodeSelectorRequirementDict:
        expression: NodeSelectorRequirementDict = {
            "key": self.key,
            "operator": operator,
            "values": values,
        }
        if with_min_values and self.min_values is not None:
            expression["minValues"] = self.min_values
        return expression

    def __str__(self) -> str:
        """Karpenter's rendering: ``key In [a b]``, ``key Exists >3``, ``... minValues 2``."""
        if self.complement:
            operator = "NotIn" if self.members else "Exists"
        else:
            operator = "In" if self.members else "DoesNotExist"
        if operator in {"Exists", "DoesNotExist"}:
            text = f"{self.key} {operator}"
        else:
            values = sorted(self.members)
            if len(values) > _MAX_LISTED_VALUES:
                extra = len(values) - _MAX_LISTED_VALUES
                values = [*values[:_MAX_LISTED_VALUES], f"and {extra} others"]
            text = f"{self.key} {operator} [{' '.join(values)}]"
        if self.greater_than is not None:
            text += f" >{self.greater_than}"
        if self.less_than is not None:
            text += f" <{self.less_than}"
        if self.min_values is not None:
            text += f" minValues {self.min_values}"
        return text


class Requirements(Mapping[str, Requirement]):
    """An immutable set of requirements, one per key, ANDed; iteration is in key order.

    Adding a requirement for a key already present intersects the two.
    """

    __slots__ = ("_hash", "_items")

    def __init__(self, requirements: Iterable[Requirement] = ()) -> None:
        items: dict[str, Requirement] = {}
        for requirement in requirements:
            existing = items.get(requirement.key)
            items[requirement.key] = (
                requirement if existing is None else existing.intersection(requirement)
            )
        self._items: Final = dict(sorted(items.items()))
        self._hash: int | None = None

    @classmethod
    def from_terms(cls, terms: Iterable[Mapping[str, object]]) -> Requirements:
        """Parse node selector expressions (``{key, operator, values?, minValues?}`` dicts).

        Raises:
            RequirementError: naming the expression's index, key and operator.
        """
        requirements = []
        for index, term in enumerate(terms):
            key = term.get("key")
            operator = term.get("operator")
            values = term.get("values")
            min_values = term.get("minValues")
            where = f"requirement [{index}] {key!r} {operator}"
            if not isinstance(key, str) or not isinstance(operator, str):
                raise RequirementError(f"{where}: key and operator must be strings")
            if values is not None and not isinstance(values, list | tuple):
                raise RequirementError(f"{where}: values must be a list of strings")
            if min_values is not None and not isinstance(min_values, int):
                raise RequirementError(f"{where}: minValues must be an integer")
            try:
                requirement = Requirement.from_operator(
                    key, operator, cast("Sequence[str]", values or ()), min_values
                )
            except RequirementError as error:
                raise RequirementError(f"[{index}] {error}") from error
            requirements.append(requirement)
        return cls(requirements)

    @classmethod
    def from_labels(cls, labels: Mapping[str, str]) -> Requirements:
        """Each label ``k: v`` as ``k In [v]``."""
        return cls(Requirement.from_operator(key, "In", [value]) for key, value in labels.items())

    @classmethod
    def from_node_selector(cls, node_selector: Mapping[str, str]) -> Requirements:
        """A pod's ``spec.nodeSelector``: each entry as ``k In [v]``."""
        return cls.from_labels(node_selector)

    def __getitem__(self, key: str) -> Requirement:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        if self._hash is None:  # immutable: computed once
            self._hash = hash(frozenset(self._items.items()))
        return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Requirements):
            return self._items == other._items
        return NotImplemented

    def __repr__(self) -> str:
        return f"Requirements({list(self._items.values())!r})"

    def __str__(self) -> str:
        """Karpenter's rendering: each requirement, sorted, joined by ``", "``."""
        return ", ".join(sorted(str(requirement) for requirement in self._items.values()))

    def for_key(self, key: str) -> Requirement:
        """The requirement on ``key``, or ``key Exists`` when undefined (Karpenter's ``Get``)."""
        return self._items.get(key) or Requirement.exists(key)

    def add(self, *requirements: Requirement) -> Requirements:
        """These requirements plus ``requirements``, intersecting on shared keys."""
        return Requirements(itertools.chain(self._items.values(), requirements))

    def union(self, other: Requirements) -> Requirements:
        """Both sets of requirements ANDed (intersecting on shared keys)."""
        return self.add(*other.values())

    def without(self, *keys: str) -> Requirements:
        """These requirements minus those on ``keys``."""
        return Requirements(r for key, r in self._items.items() if key not in keys)

    def is_satisfiable(self) -> bool:
        """Whether no requirement is empty."""
        return not any(requirement.is_empty() for requirement in self._items.values())

    def intersects(self, other: Requirements) -> str | None:
        """Why no node can satisfy both sets on their shared keys, or None if one can.

        Symmetric in whether it returns None; the message follows Karpenter's
        ``key K, <other> not in <self>``, several joined by ``"; "``.
        """
        errors = [
            f"key {key}, {other[key]} not in {self[key]}"
            for key in sorted(self._items.keys() & other.keys())
            if self[key].intersection(other[key]).is_empty()
        ]
        return "; ".join(errors) or None

    def compatible(
        self, other: Requirements, allow_undefined: frozenset[str] = frozenset()
    ) -> str | None:
        """Whether ``other`` (a pod's requirements) can be met by ``self`` (a node template).

        Keys that ``other`` constrains but ``self`` does not define are allowed only when
        ``other`` permits the label to be absent (``NotIn``, ``DoesNotExist``) or the key is in
        ``allow_undefined`` (Karpenter's well-known labels); shared keys must intersect. Not
        symmetric.

        Returns:
            None when compatible, else Karpenter's reason(s) joined by ``"; "``, such as
            ``label "team" does not have known values``.
        """
        errors = [
            f'label "{key}" does not have known values'
            f"{_label_hint(key, self._items.keys(), allow_undefined)}"
            for key in sorted(other.keys() - allow_undefined)
            if key not in self._items and not other[key].allow_absent
        ]
        if (intersection_error := self.intersects(other)) is not None:
            errors.append(intersection_error)
        return "; ".join(errors) or None

    def labels(self, exclude: Iterable[str] = ()) -> dict[str, str]:
        """The labels these requirements pin: every key allowed exactly one value, present."""
        excluded = frozenset(exclude)
        return {
            key: next(iter(requirement.members))
            for key, requirement in self._items.items()
            if key not in excluded
            and not requirement.complement
            and not requirement.allow_absent
            and len(requirement.members) == 1
        }

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a node with exactly these labels satisfies every requirement."""
        for key, requirement in self._items.items():
            value = labels.get(key)
            if not (requirement.allow_absent if value is None else requirement.has(value)):
                return False
        return True

    def to_dicts(self) -> list[NodeSelectorRequirementDict]:
        """Equivalent node selector expressions, in key order (lossless)."""
        return [expression for r in self._items.values() for expression in r.to_dicts()]

    def has_min_values(self) -> bool:
        """Whether any requirement carries ``minValues``."""
        return any(r.min_values is not None for r in self._items.values())

    def min_values_shortfall(
        self, candidates: Iterable[Requirements | Mapping[str, str]]
    ) -> dict[str, tuple[int, int]]:
        """The ``minValues`` requirements that ``candidates`` fail to cover.

        Each candidate is an instance type, given by its requirements (finite values of a key
        count; ``Exists``-like ones count for nothing) or by a label set. A value counts for a
        key when some candidate offers it and this requirement allows it.

        Returns:
            ``{key: (distinct values found, minValues)}`` for every key short of its
            ``minValues``; empty when all are met.
        """
        found = self._min_values_found()
        for candidate in candidates:
            self._collect(found, candidate)
        return self._shortfall(found)

    def min_values_ok(self, candidates: Iterable[Requirements | Mapping[str, str]]) -> bool:
        """Whether ``candidates`` cover every ``minValues`` (see `min_values_shortfall`)."""
        return not self.min_values_shortfall(candidates)

    def min_values_prefix(
        self, candidates: Iterable[Requirements | Mapping[str, str]]
    ) -> int | None:
        """The length of the shortest prefix of ``candidates`` that meets every ``minValues``.

        Karpenter keeps a NodeClaim's instance types (sorted cheapest first) only as far as
        this allows when truncating them. Returns 0 when there is no ``minValues``, None when
        even all candidates fall short.
        """
        found = self._min_values_found()
        if not self._shortfall(found):
            return 0
        for length, candidate in enumerate(candidates, start=1):
            self._collect(found, candidate)
            if not self._shortfall(found):
                return length
        return None

    def _min_values_found(self) -> dict[str, set[str]]:
        return {key: set() for key, r in self._items.items() if r.min_values is not None}

    def _collect(
        self, found: dict[str, set[str]], candidate: Requirements | Mapping[str, str]
    ) -> None:
        for key, values in found.items():
            requirement = self._items[key]
            values.update(value for value in _offered(candidate, key) if requirement.has(value))

    def _shortfall(self, found: dict[str, set[str]]) -> dict[str, tuple[int, int]]:
        shortfall = {}
        for key, values in found.items():
            needed = self._items[key].min_values or 0
            if len(values) < needed:
                shortfall[key] = (len(values), needed)
        return shortfall


def _offered(candidate: Requirements | Mapping[str, str], key: str) -> Iterable[str]:
    if isinstance(candidate, Requirements):
        requirement = candidate.get(key)
        if requirement is None or requirement.complement:
            return ()
        return requirement.members
    value = candidate.get(key)
    return () if value is None else (value,)


def _label_hint(key: str, defined: Iterable[str], allow_undefined: Iterable[str]) -> str:
    """Karpenter's ``(typo of "..."?)`` hint for an undefined label key."""
    for known in itertools.chain(sorted(allow_undefined), sorted(defined)):
        if known in key or key in known or _levenshtein(known, key) < len(known) // 5:
            return f' (typo of "{known}"?)'
    return ""


def _levenshtein(a: str, b: str) -> int:
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, start=1):
        current = [i]
        for j, char_b in enumerate(b, start=1):
            current.append(
                min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char_a != char_b))
            )
        previous = current
    return previous[-1]
