"""NodeOverlay (``karpenter.sh/v1alpha1``): change the price or add capacity of instance types.

Every field of ``shared/karpenter/crds/karpenter.sh_nodeoverlays.yaml`` is modelled, with its rules:
``price`` (``"0.42"``) xor ``priceAdjustment`` (``"+0.1"``, ``"-0.05"``, ``"+10%"``, ``"-15%"``,
``"-100%"``); ``capacity`` adds extended resources only (not cpu, memory, ephemeral-storage, pods);
``weight`` 1..10000 (unset = 0; higher wins, ties merge alphabetically).
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Annotated, Final, Literal

from pydantic import AfterValidator, BeforeValidator, Field, ValidationInfo, field_validator

from provisioner.apis.base import ApiModel
from provisioner.apis.conditions import Conditions
from provisioner.apis.core import ObjectMeta
from provisioner.apis.nodeclaim import ResourceList
from provisioner.apis.requirements import NodeOverlayRequirement, check_requirement_count, one_of

__all__ = [
    "NODEOVERLAY_API_VERSION",
    "NODEOVERLAY_KIND",
    "RESTRICTED_OVERLAY_RESOURCES",
    "NodeOverlay",
    "NodeOverlaySpec",
    "NodeOverlayStatus",
]

NODEOVERLAY_API_VERSION: Final = "karpenter.sh/v1alpha1"
NODEOVERLAY_KIND: Final = "NodeOverlay"
RESTRICTED_OVERLAY_RESOURCES: Final = frozenset({"cpu", "memory", "ephemeral-storage", "pods"})
_MIN_WEIGHT: Final = 1
_MAX_WEIGHT: Final = 10000

_PRICE = re.compile(r"[0-9]+(\.[0-9]+)?", re.ASCII)
# The CRD: ^(([+-]{1}(\d*\.?\d+))|(\+{1}\d*\.?\d+%)|(^(-\d{1,2}(\.\d+)?%)$)|(-100%))$
_PRICE_ADJUSTMENT = re.compile(
    r"([+-][0-9]*\.?[0-9]+)|(\+[0-9]*\.?[0-9]+%)|(-[0-9]{1,2}(\.[0-9]+)?%)|(-100%)", re.ASCII
)


class NodeOverlaySpec(ApiModel):
    """What the overlay matches and what it changes.

    Attributes:
        requirements: the instance types (and pools) it applies to; at most 100.
        price: replaces the price of matching offerings (``"0.42"``).
        price_adjustment: changes it: ``"+0.1"``/``"-0.05"`` (absolute) or ``"+10%"``/``"-15%"``.
        capacity: extended resources added to matching instance types (``nvidia.com/gpu``...).
        weight: 1..10000; higher wins; unset = 0.
    """

    requirements: Annotated[
        tuple[NodeOverlayRequirement, ...], AfterValidator(check_requirement_count)
    ]
    price: str | None = None
    price_adjustment: str | None = None
    capacity: ResourceList | None = None
    weight: int | None = Field(default=None, strict=True)

    @field_validator("price")
    @classmethod
    def _check_price(cls, price: str | None) -> str | None:
        if price is not None and not _PRICE.fullmatch(price):
            raise ValueError(f'"{price}" must be a non-negative decimal price ("0.42")')
        return price

    @field_validator("price_adjustment")
    @classmethod
    def _check_price_adjustment(cls, adjustment: str | None, info: ValidationInfo) -> str | None:
        if adjustment is None:
            return None
        if not _PRICE_ADJUSTMENT.fullmatch(adjustment):
            raise ValueError(
                f'"{adjustment}" must be a signed amount ("+0.1", "-0.05") or percentage '
                '("+10%", "-15%", "-100%")'
            )
        if info.data.get("price") is not None:
            raise ValueError("cannot set both 'price' and 'priceAdjustment'")
        return adjustment

    @field_validator("capacity")
    @classmethod
    def _check_capacity(cls, capacity: dict[str, int | str] | None) -> dict[str, int | str] | None:
        restricted = sorted(set(capacity or {}) & RESTRICTED_OVERLAY_RESOURCES)
        if restricted:
            raise ValueError(
                f"invalid resource restricted: {', '.join(restricted)} (only extended resources)"
            )
        return capacity

    @field_validator("weight")
    @classmethod
    def _check_weight(cls, weight: int | None) -> int | None:
        if weight is not None and not _MIN_WEIGHT <= weight <= _MAX_WEIGHT:
            raise ValueError(f"must be between {_MIN_WEIGHT} and {_MAX_WEIGHT}")
        return weight


class NodeOverlayStatus(ApiModel):
    """Conditions (``Ready`` once the overlay has been evaluated without conflict)."""

    conditions: Conditions = ()


class NodeOverlay(ApiModel):
    """A ``karpenter.sh/v1alpha1`` NodeOverlay."""

    api_version: Annotated[
        Literal["karpenter.sh/v1alpha1"], BeforeValidator(one_of(NODEOVERLAY_API_VERSION))
    ] = NODEOVERLAY_API_VERSION
    kind: Annotated[Literal["NodeOverlay"], BeforeValidator(one_of(NODEOVERLAY_KIND))] = (
        NODEOVERLAY_KIND
    )
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: NodeOverlaySpec
    status: NodeOverlayStatus | None = None

    @property
    def name(self) -> str:
        """``metadata.name``."""
        return self.metadata.name

    @property
    def weight(self) -> int:
        """``spec.weight``, 0 when unset."""
        return self.spec.weight or 0

    def adjusted_price(self, price: Decimal) -> Decimal:
        """The price of a matching offering after this overlay (never below zero).

        ``price`` replaces it; an absolute ``priceAdjustment`` is added; a percentage scales it.
        """
        if self.spec.price is not None:
            return Decimal(self.spec.price)
        adjustment = self.spec.price_adjustment
        if adjustment is None:
            return price
        if adjustment.endswith("%"):
            adjusted = price * (1 + Decimal(adjustment[:-1]) / 100)
        else:
            adjusted = price + Decimal(adjustment)
        return max(Decimal(0), adjusted)
