"""Node selector requirements as NodePools, NodeClaims and NodeOverlays spell them; label syntax.

The wire shape is core/v1's ``NodeSelectorRequirement`` plus Karpenter's ``minValues``. Validation
re-implements the CRDs' patterns and ``x-kubernetes-validations`` (CEL) rules per item, so each
problem is reported on the field it concerns (``requirements[2].operator``):

* ``operator`` is one of ``In NotIn Exists DoesNotExist Gt Lt Gte Lte``;
* ``In`` needs at least one value (NodeOverlay: ``NotIn`` too);
* ``Gt``/``Lt``/``Gte``/``Lte`` need exactly one value, a non-negative integer;
* ``minValues`` is 1..50 and, for ``In``, at most the number of values;
* ``key`` is a qualified name of at most 316 characters outside the restricted keys and domains of
  the CRD (``karpenter.sh`` except capacity-type and nodepool, ``karpenter.k8s.aws`` except the AWS
  well-known labels, ``kubernetes.io/hostname``); values are label values of at most 63 characters.

The algebra over requirements lives in ``provisioner.scheduling``; this module only holds the shape.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, ClassVar, Final, Literal, TypeVar

from pydantic import AfterValidator, BeforeValidator, Field, ValidationInfo, field_validator

from provisioner.apis import labels
from provisioner.apis.base import ApiModel

__all__ = [
    "LABEL_VALUE_MAX_LENGTH",
    "MAX_MIN_VALUES",
    "MAX_REQUIREMENTS",
    "OPERATORS",
    "REQUIREMENT_KEY_MAX_LENGTH",
    "LabelValue",
    "NodeOverlayRequirement",
    "NodePoolRequirement",
    "NodeSelectorRequirement",
    "NodeSelectorRequirementWithMinValues",
    "Operator",
    "check_label_key",
    "check_label_value",
    "check_requirement_count",
    "is_label_value",
    "is_qualified_name",
    "one_of",
    "restricted_label_message",
]

Operator = Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte"]
OPERATORS: Final[tuple[Operator, ...]] = (
    "In",
    "NotIn",
    "Exists",
    "DoesNotExist",
    "Gt",
    "Lt",
    "Gte",
    "Lte",
)
_NUMERIC_OPERATORS: Final = frozenset({"Gt", "Lt", "Gte", "Lte"})

MAX_REQUIREMENTS: Final = 100
MAX_MIN_VALUES: Final = 50
REQUIREMENT_KEY_MAX_LENGTH: Final = 316
LABEL_VALUE_MAX_LENGTH: Final = 63
_NAME_MAX_LENGTH: Final = 63
_PREFIX_MAX_LENGTH: Final = 253
_INT64_MAX: Final = (1 << 63) - 1

_DNS_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_NAME = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED_NAME = re.compile(rf"({_DNS_SUBDOMAIN}/)?{_NAME}", re.ASCII)
_LABEL_VALUE = re.compile(rf"({_NAME})?", re.ASCII)
_DIGITS = re.compile(r"[0-9]+", re.ASCII)
_T = TypeVar("_T")

# The CRDs' allow-lists for the karpenter.k8s.aws domain (NodePool/NodeClaim, and NodeOverlay's).
_AWS_REQUIREMENT_KEYS: Final = labels.AWS_WELL_KNOWN_LABELS - {labels.LABEL_TOPOLOGY_ZONE_ID}
_AWS_OVERLAY_REQUIREMENT_KEYS: Final = _AWS_REQUIREMENT_KEYS - {
    labels.LABEL_INSTANCE_TENANCY,
    labels.LABEL_CAPACITY_RESERVATION_TYPE,
    labels.LABEL_CAPACITY_RESERVATION_ID,
    labels.LABEL_CAPACITY_RESERVATION_INTERRUPTIBLE,
    labels.LABEL_PLACEMENT_GROUP_ID,
    labels.LABEL_PLACEMENT_GROUP_PARTITION,
}
_KARPENTER_REQUIREMENT_KEYS: Final = frozenset({labels.LABEL_CAPACITY_TYPE, labels.LABEL_NODEPOOL})


def one_of(*allowed: str) -> Callable[[object], object]:
    """A before-validator accepting only ``allowed`` values, failing with ``must be one of ...``."""
    message = (
        f"must be {allowed[0]}" if len(allowed) == 1 else "must be one of " + ", ".join(allowed)
    )

    def check(value: object) -> object:
        if not isinstance(value, str) or value not in allowed:
            raise ValueError(message)
        return value

    return check


def is_qualified_name(key: str) -> bool:
    """Whether ``key`` is a Kubernetes qualified name (``[prefix/]name``, as label keys are)."""
    if not _QUALIFIED_NAME.fullmatch(key):
        return False
    prefix, _, name = key.rpartition("/")
    return len(name) <= _NAME_MAX_LENGTH and len(prefix) <= _PREFIX_MAX_LENGTH


def is_label_value(value: str) -> bool:
    """Whether ``value`` is a valid label value (empty, or <= 63 alphanumerics, ``-_.``)."""
    return len(value) <= LABEL_VALUE_MAX_LENGTH and _LABEL_VALUE.fullmatch(value) is not None


def check_label_key(key: str) -> str:
    """Validate a label key (or requirement key) syntax; return it unchanged.

    Raises:
        ValueError: not a qualified name or too long.
    """
    if len(key) > REQUIREMENT_KEY_MAX_LENGTH:
        raise ValueError(f"must be at most {REQUIREMENT_KEY_MAX_LENGTH} characters")
    if not is_qualified_name(key):
        raise ValueError(
            f'"{key}" is not a qualified name: an optional DNS subdomain prefix and "/", then at '
            'most 63 alphanumerics, "-", "_" or ".", starting and ending with an alphanumeric'
        )
    return key


def check_label_value(value: str) -> str:
    """Validate a label value; return it unchanged.

    Raises:
        ValueError: too long or with characters a label value may not hold.
    """
    if len(value) > LABEL_VALUE_MAX_LENGTH:
        raise ValueError(f"must be at most {LABEL_VALUE_MAX_LENGTH} characters")
    if not is_label_value(value):
        raise ValueError(
            f'"{value}" is not a valid label value: alphanumerics, "-", "_" or ".", starting and '
            "ending with an alphanumeric"
        )
    return value


def check_requirement_count(requirements: tuple[_T, ...]) -> tuple[_T, ...]:
    """Validate that there are at most 100 requirements; return them unchanged.

    Raises:
        ValueError: more than 100.
    """
    if len(requirements) > MAX_REQUIREMENTS:
        raise ValueError(
            f"must have at most {MAX_REQUIREMENTS} requirements, has {len(requirements)}"
        )
    return requirements


LabelValue = Annotated[str, AfterValidator(check_label_value)]
"""A label value: ``""`` or up to 63 of ``[A-Za-z0-9_.-]``, alphanumeric at both ends."""


def _cel_domain(key: str) -> str:
    # CEL: key.find("^([^/]+)") -- the part before the first "/", or the whole key.
    return key.split("/", 1)[0]


class NodeSelectorRequirement(ApiModel):
    """A requirement without ``minValues`` (NodeOverlay's shape).

    Attributes:
        key: the label key.
        operator: how the key relates to the values.
        values: the values; empty for ``Exists``/``DoesNotExist``.
    """

    _aws_allowed_keys: ClassVar[frozenset[str]] = _AWS_OVERLAY_REQUIREMENT_KEYS
    _values_required_for: ClassVar[frozenset[str]] = frozenset({"In", "NotIn"})

    key: str
    operator: Annotated[Operator, BeforeValidator(one_of(*OPERATORS))]
    values: tuple[LabelValue, ...] = Field(default=(), validate_default=True)

    @field_validator("key")
    @classmethod
    def _check_key(cls, key: str) -> str:
        check_label_key(key)
        cls._check_restricted_key(key)
        return key

    @classmethod
    def _check_restricted_key(cls, key: str) -> None:
        domain = _cel_domain(key)
        if key not in _KARPENTER_REQUIREMENT_KEYS and domain.endswith(labels.KARPENTER_API_GROUP):
            raise ValueError(f'label domain "{labels.KARPENTER_API_GROUP}" is restricted')
        if key == labels.LABEL_HOSTNAME:
            raise ValueError(f'label "{labels.LABEL_HOSTNAME}" is restricted')
        if key not in cls._aws_allowed_keys and domain.endswith(labels.AWS_API_GROUP):
            raise ValueError(f'label domain "{labels.AWS_API_GROUP}" is restricted')

    @field_validator("values")
    @classmethod
    def _check_values(cls, values: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        operator = info.data.get("operator")
        if operator in cls._values_required_for and not values:
            raise ValueError(f"operator {operator} requires at least one value")
        if operator in _NUMERIC_OPERATORS and (
            len(values) != 1 or not _DIGITS.fullmatch(values[0]) or int(values[0]) > _INT64_MAX
        ):
            raise ValueError(f"operator {operator} requires a single non-negative integer value")
        return values


class NodeSelectorRequirementWithMinValues(NodeSelectorRequirement):
    """A NodeClaim requirement: a node selector requirement with optional ``minValues``.

    Attributes:
        min_values: the minimum number of distinct values (instance types, families...) the
            launch must keep to choose from; 1..50.
    """

    _aws_allowed_keys: ClassVar[frozenset[str]] = _AWS_REQUIREMENT_KEYS
    _values_required_for: ClassVar[frozenset[str]] = frozenset({"In"})

    min_values: int | None = Field(default=None, strict=True)

    @field_validator("min_values")
    @classmethod
    def _check_min_values(cls, min_values: int | None, info: ValidationInfo) -> int | None:
        if min_values is None:
            return None
        if not 1 <= min_values <= MAX_MIN_VALUES:
            raise ValueError(f"must be between 1 and {MAX_MIN_VALUES}")
        values = info.data.get("values")
        if info.data.get("operator") == "In" and values is not None and len(values) < min_values:
            raise ValueError(f"must not exceed the number of values ({len(values)})")
        return min_values


class NodePoolRequirement(NodeSelectorRequirementWithMinValues):
    """A NodePool requirement: NodeClaim's rules, plus the NodePool-only restrictions.

    ``karpenter.sh/nodepool`` may not be required (Jointer sets it), and a key in a restricted
    domain (``kubernetes.io``, ``k8s.io``, ``karpenter.sh``, ``karpenter.k8s.aws``) must be a
    well-known label after beta-label normalisation (Karpenter's ``RuntimeValidate``).
    """

    @classmethod
    def _check_restricted_key(cls, key: str) -> None:
        super()._check_restricted_key(key)
        if key == labels.LABEL_NODEPOOL:
            raise ValueError(f'label "{labels.LABEL_NODEPOOL}" is restricted')
        if labels.is_restricted_label(labels.normalize_label_key(key)):
            raise ValueError(restricted_label_message(key))


class NodeOverlayRequirement(NodeSelectorRequirement):
    """A NodeOverlay requirement (no ``minValues``; ``In`` and ``NotIn`` need values)."""


def restricted_label_message(key: str) -> str:
    """The message for a NodePool label or requirement key in a restricted domain."""
    domains = ", ".join(sorted(labels.RESTRICTED_LABEL_DOMAINS))
    return (
        f'label "{key}" is restricted; use a well-known label or a custom label outside the '
        f"restricted domains {domains}"
    )
