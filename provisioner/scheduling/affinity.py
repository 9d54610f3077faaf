"""Node affinity: required terms (ORed), preferred terms (weighted) and a pod's requirements.

Matching a node follows kube-scheduler (``nodeaffinity.GetRequiredNodeAffinity``): the pod's
``nodeSelector`` must match and, when required node affinity is set, at least one term. Each
expression of a term is evaluated on its own, so ``k In [a]`` and ``k In [b]`` in one term never
match. Building Karpenter's requirements follows ``NewPodRequirements``: the node selector, the
first required term and (optionally) the heaviest preferred term, intersected.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from provisioner.scheduling.requirements import Requirement, RequirementError, Requirements

__all__ = [
    "AffinityError",
    "NodeAffinity",
    "NodeSelectorTerm",
    "PreferredTerm",
    "node_selector_matches",
    "pod_requirements",
]

#: The only field a ``matchFields`` expression may name.
NODE_NAME_FIELD: Final = "metadata.name"
_FIELD_OPERATORS: Final = frozenset({"In", "NotIn"})


class AffinityError(ValueError):
    """A node affinity that cannot be read or turned into requirements; names the field."""


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """One ``NodeSelectorTerm``: its expressions are ANDed.

    Attributes:
        expressions: the ``matchExpressions``, each as its own requirement, in order.
        node_names: from ``matchFields`` on ``metadata.name``: each entry is
            ``(operator, names)`` with operator ``In`` or ``NotIn``.
    """

    expressions: tuple[Requirement, ...] = ()
    node_names: tuple[tuple[str, frozenset[str]], ...] = ()

    @classmethod
    def from_dict(
        cls, data: Mapping[str, object], *, field: str = "nodeSelectorTerm"
    ) -> NodeSelectorTerm:
        """Read a Kubernetes ``NodeSelectorTerm``.

        Raises:
            AffinityError: on malformed expressions, or ``matchFields`` on anything but
                ``metadata.name`` with ``In``/``NotIn`` and one value.
        """
        expressions = []
        for index, expression in enumerate(_list(data.get("matchExpressions"), field)):
            where = f"{field}.matchExpressions[{index}]"
            try:
                (requirement,) = Requirements.from_terms([expression]).values()
            except RequirementError as error:
                raise AffinityError(f"{where}: {error}") from error
            expressions.append(requirement)
        node_names = []
        for index, expression in enumerate(_list(data.get("matchFields"), field)):
            node_names.append(_node_name_field(expression, f"{field}.matchFields[{index}]"))
        return cls(tuple(expressions), tuple(node_names))

    def matches(self, labels: Mapping[str, str], node_name: str | None = None) -> bool:
        """Whether a node with these labels (and name) satisfies the term.

        A term with no expressions and no fields matches nothing, as in Kubernetes. A
        ``matchFields`` term never matches when ``node_name`` is None (a node not yet created).
        """
        if not self.expressions and not self.node_names:
            return False
        for requirement in self.expressions:
            value = labels.get(requirement.key)
            if not (requirement.allow_absent if value is None else requirement.has(value)):
                return False
        for operator, names in self.node_names:
            if node_name is None or (node_name in names) != (operator == "In"):
                return False
        return True

    def to_requirements(self, *, ignore_match_fields: bool = False) -> Requirements:
        """The term's expressions intersected into requirements.

        Raises:
            AffinityError: when the term has ``matchFields`` (a node's name cannot be chosen
                for a node not yet launched) unless ``ignore_match_fields``, which drops them
                as Karpenter does.
        """
        if self.node_names and not ignore_match_fields:
            raise AffinityError(
                "matchFields on metadata.name select an existing node and cannot be provisioned"
            )
        return Requirements(self.expressions)


@dataclass(frozen=True, slots=True)
class PreferredTerm:
    """A ``PreferredSchedulingTerm``: a weight (1-100) and its preference."""

    weight: int
    term: NodeSelectorTerm

    @classmethod
    def from_dict(cls, data: Mapping[str, object], *, field: str = "preferred") -> PreferredTerm:
        """Read a Kubernetes ``PreferredSchedulingTerm`` (``{weight, preference}``).

        Raises:
            AffinityError: on a missing or non-integer weight or a malformed preference.
        """
        weight = data.get("weight")
        if isinstance(weight, bool) or not isinstance(weight, int):
            raise AffinityError(f"{field}.weight: must be an integer, got {weight!r}")
        preference = data.get("preference") or {}
        if not isinstance(preference, Mapping):
            raise AffinityError(f"{field}.preference: must be an object")
        return cls(weight, NodeSelectorTerm.from_dict(preference, field=f"{field}.preference"))

    @property
    def requirements(self) -> Requirements:
        """The preference as requirements (``matchFields`` dropped)."""
        return self.term.to_requirements(ignore_match_fields=True)


@dataclass(frozen=True, slots=True)
class NodeAffinity:
    """A pod's ``spec.affinity.nodeAffinity``.

    Attributes:
        required: the required terms (ORed), or None when no required affinity is set.
        preferred: the preferred terms, heaviest first (stable for equal weights), the order
            in which Karpenter tries and then relaxes them.
    """

    required: tuple[NodeSelectorTerm, ...] | None = None
    preferred: tuple[PreferredTerm, ...] = ()

    def __post_init__(self) -> None:
        ordered = tuple(sorted(self.preferred, key=lambda term: -term.weight))
        object.__setattr__(self, "preferred", ordered)

    @classmethod
    def from_dict(
        cls, data: Mapping[str, object] | None, *, field: str = "spec.affinity.nodeAffinity"
    ) -> NodeAffinity:
        """Read a Kubernetes ``NodeAffinity`` (None or ``{}`` means no node affinity).

        Raises:
            AffinityError: naming the field of the first malformed term.
        """
        if not data:
            return cls()
        required_field = f"{field}.requiredDuringSchedulingIgnoredDuringExecution"
        required_data = data.get("requiredDuringSchedulingIgnoredDuringExecution")
        required = None
        if required_data is not None:
            if not isinstance(required_data, Mapping):
                raise AffinityError(f"{required_field}: must be an object")
            terms = _list(required_data.get("nodeSelectorTerms"), required_field)
            required = tuple(
                NodeSelectorTerm.from_dict(
                    _mapping(term, f"{required_field}.nodeSelectorTerms[{index}]"),
                    field=f"{required_field}.nodeSelectorTerms[{index}]",
                )
                for index, term in enumerate(terms)
            )
        preferred_field = f"{field}.preferredDuringSchedulingIgnoredDuringExecution"
        preferred = tuple(
            PreferredTerm.from_dict(
                _mapping(term, f"{preferred_field}[{index}]"), field=f"{preferred_field}[{index}]"
            )
            for index, term in enumerate(
                _list(data.get("preferredDuringSchedulingIgnoredDuringExecution"), field)
            )
        )
        return cls(required, preferred)

    def matches(self, labels: Mapping[str, str], node_name: str | None = None) -> bool:
        """Whether the required terms admit the node (no required affinity admits all)."""
        if self.required is None:
            return True
        return any(term.matches(labels, node_name) for term in self.required)


def node_selector_matches(
    node_selector: Mapping[str, str] | None,
    terms: Sequence[NodeSelectorTerm] | NodeAffinity | None,
    labels: Mapping[str, str],
    node_name: str | None = None,
) -> bool:
    """Whether a node with ``labels`` passes a pod's nodeSelector and required node affinity.

    Args:
        node_selector: the pod's ``spec.nodeSelector``; every entry must equal the label.
        terms: the required node selector terms (ORed) or a whole `NodeAffinity`; None means
            no required affinity. An empty sequence of terms matches nothing.
        labels: the node's labels.
        node_name: the node's name, for ``matchFields``.
    """
    if node_selector and any(labels.get(k) != v for k, v in node_selector.items()):
        return False
    if terms is None:
        return True
    if isinstance(terms, NodeAffinity):
        return terms.matches(labels, node_name)
    return any(term.matches(labels, node_name) for term in terms)


def pod_requirements(
    node_selector: Mapping[str, str] | None,
    affinity: NodeAffinity | None,
    *,
    required: bool = True,
    preferred: bool = True,
) -> Requirements:
    """Karpenter's ``NewPodRequirements``: what a new node must satisfy for a pod.

    The node selector, intersected with the *first* required term (Karpenter relaxes by
    dropping the first of several terms) and the *heaviest* preferred term (treated as
    required until relaxed). ``matchFields`` are dropped, as Karpenter drops them. Set
    ``preferred=False`` for the strict requirements (``NewStrictPodRequirements``).
    """
    requirements = Requirements.from_node_selector(node_selector or {})
    if affinity is None:
        return requirements
    if preferred and affinity.preferred:
        requirements = requirements.union(affinity.preferred[0].requirements)
    if required and affinity.required:
        requirements = requirements.union(
            affinity.required[0].to_requirements(ignore_match_fields=True)
        )
    return requirements


def _list(value: object, field: str) -> Iterable[Mapping[str, object]]:
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        raise AffinityError(f"{field}: must be a list, got {value!r}")
    return [_mapping(item, f"{field}[{index}]") for index, item in enumerate(value)]


def _mapping(value: object, field: str) -> Mapping[str, object]:
    if not isinstance(value, Mapping):
        raise AffinityError(f"{field}: must be an object, got {value!r}")
    return value


def _node_name_field(expression: Mapping[str, object], field: str) -> tuple[str, frozenset[str]]:
    key = expression.get("key")
    operator = expression.get("operator")
    values = expression.get("values") or []
    if key != NODE_NAME_FIELD:
        raise AffinityError(f"{field}.key: only {NODE_NAME_FIELD!r} is supported, got {key!r}")
    if operator not in _FIELD_OPERATORS:
        raise AffinityError(f"{field}.operator: must be In or NotIn, got {operator!r}")
    if not isinstance(values, list) or len(values) != 1 or not isinstance(values[0], str):
        raise AffinityError(f"{field}.values: must hold exactly one node name, got {values!r}")
    return str(operator), frozenset(values)
