"""Status conditions: the model, Karpenter's condition types and reasons, and pure helpers.

Helpers never read a clock: every function that may stamp ``lastTransitionTime`` takes ``now``.
Conditions are frozen; helpers return a new tuple (unchanged input when nothing changed, so callers
can skip the status patch with an identity check).

Semantics follow Karpenter's ``operatorpkg/status`` condition sets:

* ``lastTransitionTime`` changes only when ``status`` changes; reason, message and
  ``observedGeneration`` are updated in place otherwise;
* an empty reason defaults to the condition type for ``True`` and ``False`` and to
  ``AwaitingReconciliation`` for ``Unknown`` (the NodePool CRD requires a non-empty reason);
* the root ``Ready`` condition is ``True`` when every dependent is ``True``, ``False`` when any is
  ``False`` and ``Unknown`` otherwise.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Annotated, Any, Final, Literal

import pydantic
from pydantic import AfterValidator, BeforeValidator, Field, field_validator

from provisioner.apis.base import ApiModel
from provisioner.apis.requirements import one_of

__all__ = [
    "CONDITION_READY",
    "DISRUPTION_REASONS",
    "DISRUPTION_REASON_DRIFTED",
    "DISRUPTION_REASON_EMPTY",
    "DISRUPTION_REASON_UNDERUTILIZED",
    "NODECLAIM_CONDITION_CONSISTENT_STATE_FOUND",
    "NODECLAIM_CONDITION_CONSOLIDATABLE",
    "NODECLAIM_CONDITION_DISRUPTION_REASON",
    "NODECLAIM_CONDITION_DRAINED",
    "NODECLAIM_CONDITION_DRIFTED",
    "NODECLAIM_CONDITION_INITIALIZED",
    "NODECLAIM_CONDITION_INSTANCE_TERMINATING",
    "NODECLAIM_CONDITION_LAUNCHED",
    "NODECLAIM_CONDITION_REGISTERED",
    "NODECLAIM_CONDITION_VOLUMES_DETACHED",
    "NODECLAIM_READY_DEPENDENTS",
    "NODEPOOL_CONDITION_NODE_CLASS_READY",
    "NODEPOOL_CONDITION_NODE_REGISTRATION_HEALTHY",
    "NODEPOOL_CONDITION_VALIDATION_SUCCEEDED",
    "NODEPOOL_READY_DEPENDENTS",
    "REASON_AWAITING_RECONCILIATION",
    "REASON_AWAITING_VOLUME_DETACHMENT",
    "REASON_DRAINING",
    "REASON_DRA_DRIVER_POOLS_NOT_PUBLISHED",
    "REASON_INSTANCE_TYPE_NOT_FOUND",
    "REASON_KNOWN_EPHEMERAL_TAINTS_EXIST",
    "REASON_LAUNCH_FAILED",
    "REASON_MULTIPLE_NODES_FOUND",
    "REASON_NODEPOOL_DRIFTED",
    "REASON_NODE_NOT_FOUND",
    "REASON_NODE_NOT_READY",
    "REASON_REQUIREMENTS_DRIFTED",
    "REASON_RESOURCE_NOT_REGISTERED",
    "REASON_STARTUP_TAINTS_EXIST",
    "REASON_TERMINATION_GRACE_PERIOD_ELAPSED",
    "REASON_UNREGISTERED_TAINT_MISSING",
    "STATUS_FALSE",
    "STATUS_TRUE",
    "STATUS_UNKNOWN",
    "Condition",
    "ConditionStatus",
    "Conditions",
    "clear_condition",
    "get_condition",
    "is_false",
    "is_true",
    "is_unknown",
    "not_ready_cause",
    "parse_conditions",
    "root_status",
    "set_condition",
    "set_false",
    "set_root_condition",
    "set_true",
    "set_unknown",
]

ConditionStatus = Literal["True", "False", "Unknown"]
STATUS_TRUE: Final = "True"
STATUS_FALSE: Final = "False"
STATUS_UNKNOWN: Final = "Unknown"

# --- Condition types --------------------------------------------------------------------------

CONDITION_READY: Final = "Ready"
"""The root condition of NodePools and NodeClaims."""

NODECLAIM_CONDITION_LAUNCHED: Final = "Launched"
NODECLAIM_CONDITION_REGISTERED: Final = "Registered"
NODECLAIM_CONDITION_INITIALIZED: Final = "Initialized"
NODECLAIM_CONDITION_CONSOLIDATABLE: Final = "Consolidatable"
NODECLAIM_CONDITION_DRIFTED: Final = "Drifted"
NODECLAIM_CONDITION_DISRUPTION_REASON: Final = "DisruptionReason"
NODECLAIM_CONDITION_DRAINED: Final = "Drained"
NODECLAIM_CONDITION_VOLUMES_DETACHED: Final = "VolumesDetached"
NODECLAIM_CONDITION_INSTANCE_TERMINATING: Final = "InstanceTerminating"
NODECLAIM_CONDITION_CONSISTENT_STATE_FOUND: Final = "ConsistentStateFound"
NODECLAIM_READY_DEPENDENTS: Final = (
    NODECLAIM_CONDITION_LAUNCHED,
    NODECLAIM_CONDITION_REGISTERED,
    NODECLAIM_CONDITION_INITIALIZED,
)
"""A NodeClaim is Ready when these three are True."""

NODEPOOL_CONDITION_VALIDATION_SUCCEEDED: Final = "ValidationSucceeded"
NODEPOOL_CONDITION_NODE_CLASS_READY: Final = "NodeClassReady"
NODEPOOL_CONDITION_NODE_REGISTRATION_HEALTHY: Final = "NodeRegistrationHealthy"
NODEPOOL_READY_DEPENDENTS: Final = (
    NODEPOOL_CONDITION_VALIDATION_SUCCEEDED,
    NODEPOOL_CONDITION_NODE_CLASS_READY,
)
"""A NodePool is Ready when these two are True."""

# --- Reasons ----------------------------------------------------------------------------------

REASON_AWAITING_RECONCILIATION: Final = "AwaitingReconciliation"
REASON_LAUNCH_FAILED: Final = "LaunchFailed"
REASON_NODE_NOT_FOUND: Final = "NodeNotFound"
REASON_MULTIPLE_NODES_FOUND: Final = "MultipleNodesFound"
REASON_UNREGISTERED_TAINT_MISSING: Final = "UnregisteredTaintMissing"
REASON_NODE_NOT_READY: Final = "NodeNotReady"
REASON_STARTUP_TAINTS_EXIST: Final = "StartupTaintsExist"
REASON_KNOWN_EPHEMERAL_TAINTS_EXIST: Final = "KnownEphemeralTaintsExist"
REASON_RESOURCE_NOT_REGISTERED: Final = "ResourceNotRegistered"
REASON_DRA_DRIVER_POOLS_NOT_PUBLISHED: Final = "DRADriverPoolsNotPublished"
REASON_NODEPOOL_DRIFTED: Final = "NodePoolDrifted"
REASON_REQUIREMENTS_DRIFTED: Final = "RequirementsDrifted"
REASON_INSTANCE_TYPE_NOT_FOUND: Final = "InstanceTypeNotFound"
REASON_DRAINING: Final = "Draining"
REASON_AWAITING_VOLUME_DETACHMENT: Final = "AwaitingVolumeDetachment"
REASON_TERMINATION_GRACE_PERIOD_ELAPSED: Final = "TerminationGracePeriodElapsed"

DISRUPTION_REASON_UNDERUTILIZED: Final = "Underutilized"
DISRUPTION_REASON_EMPTY: Final = "Empty"
DISRUPTION_REASON_DRIFTED: Final = "Drifted"
DISRUPTION_REASONS: Final = (
    DISRUPTION_REASON_UNDERUTILIZED,
    DISRUPTION_REASON_EMPTY,
    DISRUPTION_REASON_DRIFTED,
)
"""Reasons of the ``DisruptionReason`` condition and of disruption budgets."""

_TYPE_PATTERN = re.compile(
    r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])",
    re.ASCII,
)
_REASON_PATTERN = re.compile(r"([A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?)?", re.ASCII)
_TYPE_MAX_LENGTH: Final = 316
_REASON_MAX_LENGTH: Final = 1024
_MESSAGE_MAX_LENGTH: Final = 32768


class Condition(ApiModel):
    """One status condition (``metav1.Condition``).

    Attributes:
        type: CamelCase type (``Ready``), optionally domain-prefixed.
        status: ``True``, ``False`` or ``Unknown``.
        observed_generation: the ``metadata.generation`` the condition was computed from.
        last_transition_time: when ``status`` last changed.
        reason: CamelCase machine reason.
        message: human-readable detail.
    """

    type: str
    status: Annotated[
        ConditionStatus, BeforeValidator(one_of(STATUS_TRUE, STATUS_FALSE, STATUS_UNKNOWN))
    ]
    observed_generation: int | None = Field(default=None, strict=True, ge=0)
    last_transition_time: datetime
    reason: str = Field(default="", max_length=_REASON_MAX_LENGTH)
    message: str = Field(default="", max_length=_MESSAGE_MAX_LENGTH)

    @field_validator("type")
    @classmethod
    def _check_type(cls, value: str) -> str:
        if len(value) > _TYPE_MAX_LENGTH or not _TYPE_PATTERN.fullmatch(value):
            raise ValueError(f'"{value}" is not a valid condition type')
        return value

    @field_validator("reason")
    @classmethod
    def _check_reason(cls, value: str) -> str:
        if not _REASON_PATTERN.fullmatch(value):
            raise ValueError(f'"{value}" is not a valid reason (CamelCase, letters first)')
        return value


def _check_unique_types(conditions: tuple[Condition, ...]) -> tuple[Condition, ...]:
    seen: set[str] = set()
    for condition in conditions:
        if condition.type in seen:
            raise ValueError(f'duplicate condition type "{condition.type}"')
        seen.add(condition.type)
    return conditions


Conditions = Annotated[tuple[Condition, ...], AfterValidator(_check_unique_types)]
"""A list of conditions keyed by type (``x-kubernetes-list-type: map``)."""


def parse_conditions(raw: Sequence[Mapping[str, Any]]) -> tuple[Condition, ...]:
    """Conditions as stored in an object's status; entries that do not parse are skipped."""
    parsed = []
    for item in raw:
        try:
            parsed.append(Condition.model_validate(item))
        except pydantic.ValidationError:
            continue
    return tuple(parsed)


def get_condition(conditions: Sequence[Condition], condition_type: str) -> Condition | None:
    """Return the condition of ``condition_type``, or ``None``."""
    return next((c for c in conditions if c.type == condition_type), None)


def is_true(conditions: Sequence[Condition], condition_type: str) -> bool:
    """Whether the condition exists and is ``True``."""
    condition = get_condition(conditions, condition_type)
    return condition is not None and condition.status == STATUS_TRUE


def is_false(conditions: Sequence[Condition], condition_type: str) -> bool:
    """Whether the condition exists and is ``False``."""
    condition = get_condition(conditions, condition_type)
    return condition is not None and condition.status == STATUS_FALSE


def is_unknown(conditions: Sequence[Condition], condition_type: str) -> bool:
    """Whether the condition is ``Unknown`` or missing."""
    condition = get_condition(conditions, condition_type)
    return condition is None or condition.status == STATUS_UNKNOWN


def _default_reason(condition_type: str, status: ConditionStatus) -> str:
    return REASON_AWAITING_RECONCILIATION if status == STATUS_UNKNOWN else condition_type


def set_condition(
    conditions: Sequence[Condition],
    condition_type: str,
    status: ConditionStatus,
    *,
    now: datetime,
    reason: str = "",
    message: str = "",
    observed_generation: int | None = None,
) -> tuple[Condition, ...]:
    """Set a condition; return the new conditions (the same tuple when nothing changed).

    ``lastTransitionTime`` becomes ``now`` only when the status changes (or the condition is new).

    Args:
        conditions: the current conditions.
        condition_type: the condition to set.
        status: its new status.
        now: the current time, from the caller's injected clock.
        reason: CamelCase reason; empty means the default for ``status``.
        message: human-readable detail.
        observed_generation: the object's ``metadata.generation``.
    """
    current = tuple(conditions)
    reason = reason or _default_reason(condition_type, status)
    existing = get_condition(current, condition_type)
    if existing is None:
        new = Condition(
            type=condition_type,
            status=status,
            observed_generation=observed_generation,
            last_transition_time=now,
            reason=reason,
            message=message,
        )
        return (*current, new)
    if (existing.status, existing.reason, existing.message, existing.observed_generation) == (
        status,
        reason,
        message,
        observed_generation,
    ):
        return current
    updated = existing.model_copy(
        update={
            "status": status,
            "reason": reason,
            "message": message,
            "observed_generation": observed_generation,
            "last_transition_time": (
                now if existing.status != status else existing.last_transition_time
            ),
        }
    )
    return tuple(updated if c.type == condition_type else c for c in current)


def set_true(
    conditions: Sequence[Condition],
    condition_type: str,
    *,
    now: datetime,
    reason: str = "",
    message: str = "",
    observed_generation: int | None = None,
) -> tuple[Condition, ...]:
    """Set a condition ``True`` (see :func:`set_condition`)."""
    return set_condition(
        conditions,
        condition_type,
        STATUS_TRUE,
        now=now,
        reason=reason,
        message=message,
        observed_generation=observed_generation,
    )


def set_false(
    conditions: Sequence[Condition],
    condition_type: str,
    *,
    now: datetime,
    reason: str,
    message: str = "",
    observed_generation: int | None = None,
) -> tuple[Condition, ...]:
    """Set a condition ``False`` with a reason (see :func:`set_condition`)."""
    return set_condition(
        conditions,
        condition_type,
        STATUS_FALSE,
        now=now,
        reason=reason,
        message=message,
        observed_generation=observed_generation,
    )


def set_unknown(
    conditions: Sequence[Condition],
    condition_type: str,
    *,
    now: datetime,
    reason: str = "",
    message: str = "",
    observed_generation: int | None = None,
) -> tuple[Condition, ...]:
    """Set a condition ``Unknown`` (see :func:`set_condition`)."""
    return set_condition(
        conditions,
        condition_type,
        STATUS_UNKNOWN,
        now=now,
        reason=reason,
        message=message,
        observed_generation=observed_generation,
    )


def clear_condition(conditions: Sequence[Condition], condition_type: str) -> tuple[Condition, ...]:
    """Remove a condition; return the new conditions (the same tuple when it was absent)."""
    current = tuple(conditions)
    if get_condition(current, condition_type) is None:
        return current
    return tuple(c for c in current if c.type != condition_type)


def root_status(conditions: Sequence[Condition], dependents: Sequence[str]) -> ConditionStatus:
    """The root (``Ready``) status: True if all dependents are True, False if any is False."""
    statuses = [get_condition(conditions, d) for d in dependents]
    if any(c is not None and c.status == STATUS_FALSE for c in statuses):
        return STATUS_FALSE
    if all(c is not None and c.status == STATUS_TRUE for c in statuses):
        return STATUS_TRUE
    return STATUS_UNKNOWN


def set_root_condition(
    conditions: Sequence[Condition],
    dependents: Sequence[str],
    *,
    now: datetime,
    root: str = CONDITION_READY,
    observed_generation: int | None = None,
) -> tuple[Condition, ...]:
    """Recompute the root condition from its dependents (Karpenter's ``Ready``).

    When not True, the root takes the reason and message of the first dependent that is False (or,
    failing that, not True).
    """
    status = root_status(conditions, dependents)
    if status == STATUS_TRUE:
        return set_true(
            conditions, root, now=now, reason=root, observed_generation=observed_generation
        )
    found = [(d, get_condition(conditions, d)) for d in dependents]
    wanted = (
        (lambda c: c is not None and c.status == STATUS_FALSE)
        if status == STATUS_FALSE
        else (lambda c: c is None or c.status != STATUS_TRUE)
    )
    culprit_type, culprit = next((d, c) for d, c in found if wanted(c))
    if culprit is None:
        reason, message = REASON_AWAITING_RECONCILIATION, f"{culprit_type}={STATUS_UNKNOWN}"
    else:
        reason, message = culprit.reason, f"{culprit_type}={culprit.status}"
        if culprit.message:
            message = f"{message}, {culprit.message}"
    return set_condition(
        conditions,
        root,
        status,
        now=now,
        reason=reason,
        message=message,
        observed_generation=observed_generation,
    )


def not_ready_cause(raw: Sequence[Mapping[str, Any]]) -> str | None:
    """Why an object with these ``status.conditions`` (as stored) is not Ready, or None.

    The first ``False`` dependent of a NodePool's ``Ready`` (``ValidationSucceeded``, then
    ``NodeClassReady``), else ``Ready`` itself: ``NodeClassReady=False: EC2NodeClass "x" not
    found``.
    """
    by_type = {str(c.get("type")): c for c in raw}
    for condition_type in (*NODEPOOL_READY_DEPENDENTS, CONDITION_READY):
        condition = by_type.get(condition_type)
        if condition is not None and condition.get("status") == STATUS_FALSE:
            message = str(condition.get("message") or condition.get("reason") or "")
            cause = f"{condition_type}={STATUS_FALSE}"
            return f"{cause}: {message}" if message else cause
    return None
