"""ProvisioningRequests (``pod-groups.md`` §7, row 7): consumers, classes, conditions, pods.

A request's ``podSets`` are expanded into *virtual pods* (:func:`virtual_pods`): ``count``
copies of each PodTemplate, carrying the consume annotations, so they form the request's gang
(min count = the sum of the counts) and the planner treats them as one all-or-nothing group.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Final

from pydantic import Field

from provisioner.apis.base import LenientModel, parse_object
from provisioner.apis.core import ObjectMeta, Pod
from provisioner.apis.errors import ApiValidationError
from provisioner.podgroups import keys
from provisioner.podgroups.condition import Condition, find_condition, is_true
from provisioner.podgroups.model import Ecosystem, PodGroupRef

__all__ = [
    "ACCEPTED",
    "API_GROUP",
    "ATOMIC_SCALE_UP",
    "BOOKING_EXPIRED",
    "BOOKING_TIME",
    "CAPACITY_REVOKED",
    "CHECK_CAPACITY",
    "CLASSES",
    "DEFAULT_VALID_UNTIL",
    "FAILED",
    "PROVISIONED",
    "VALID_UNTIL_PARAMETER",
    "VIRTUAL_LABEL",
    "PodTemplate",
    "PodTemplateRef",
    "ProvisioningRequest",
    "ProvisioningRequestError",
    "ProvisioningRequestStatus",
    "RequestCondition",
    "admission_reason",
    "consumed_request",
    "detect",
    "is_active",
    "is_booking",
    "is_virtual",
    "min_count",
    "provisioned_at",
    "valid_until",
    "virtual_pods",
]

API_GROUP: Final = "autoscaling.x-k8s.io"
CHECK_CAPACITY: Final = "check-capacity.autoscaling.x-k8s.io"
ATOMIC_SCALE_UP: Final = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
CLASSES: Final = frozenset({CHECK_CAPACITY, ATOMIC_SCALE_UP})
"""The classes Jointer serves (others are left to whoever serves them)."""

ACCEPTED: Final = "Accepted"
PROVISIONED: Final = "Provisioned"
FAILED: Final = "Failed"
BOOKING_EXPIRED: Final = "BookingExpired"
CAPACITY_REVOKED: Final = "CapacityRevoked"

BOOKING_TIME: Final = timedelta(minutes=10)
"""How long provisioned capacity is held for consumers that have not come (Cluster Autoscaler)."""
DEFAULT_VALID_UNTIL: Final = timedelta(days=7)
"""Without ``ValidUntilSeconds`` a request expires 7 days after creation (Cluster Autoscaler)."""
VALID_UNTIL_PARAMETER: Final = "ValidUntilSeconds"
VIRTUAL_LABEL: Final = "jointer.dev/provisioning-request-pod"
"""Marks a virtual pod (never written to the API)."""


class ProvisioningRequestError(ValueError):
    """A request Jointer cannot serve; the message names the object and the field."""


class PodTemplateRef(LenientModel):
    """``podTemplateRef``."""

    name: str = ""


class ProvisioningRequestPodSet(LenientModel):
    """``podSets[] {podTemplateRef, count}``."""

    pod_template_ref: PodTemplateRef = Field(default_factory=PodTemplateRef)
    count: int = 0


class ProvisioningRequestSpec(LenientModel):
    """Pod sets, class and parameters."""

    pod_sets: tuple[ProvisioningRequestPodSet, ...] = ()
    provisioning_class_name: str = ""
    parameters: dict[str, str] = Field(default_factory=dict)


class RequestCondition(Condition):
    """A condition with its transition time."""

    last_transition_time: datetime | None = None


class ProvisioningRequestStatus(LenientModel):
    """Conditions ``Accepted``, ``Provisioned``, ``Failed``, ``BookingExpired``, ..."""

    conditions: tuple[RequestCondition, ...] = ()


class ProvisioningRequest(LenientModel):
    """An ``autoscaling.x-k8s.io/v1`` ProvisioningRequest."""

    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ProvisioningRequestSpec = Field(default_factory=ProvisioningRequestSpec)
    status: ProvisioningRequestStatus = Field(default_factory=ProvisioningRequestStatus)

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.metadata.namespace or 'default'}/{self.metadata.name}"


class PodTemplate(LenientModel):
    """A ``v1`` PodTemplate (``template`` kept raw, read as a pod)."""

    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    template: dict[str, Any] = Field(default_factory=dict)


def consumed_request(pod: Pod) -> str | None:
    """The name of the ProvisioningRequest the pod consumes.

    Both the consume and the class annotation must be present (either spelling:
    ``autoscaling.x-k8s.io/...`` or the older ``cluster-autoscaler.kubernetes.io/...``).
    """
    annotations = pod.metadata.annotations
    name = annotations.get(keys.CONSUME_PROVISIONING_REQUEST) or annotations.get(
        keys.CONSUME_PROVISIONING_REQUEST_DEPRECATED
    )
    if not name:
        return None
    if not (
        annotations.get(keys.PROVISIONING_CLASS_NAME)
        or annotations.get(keys.PROVISIONING_CLASS_NAME_DEPRECATED)
    ):
        return None
    return name


def detect(pod: Pod) -> PodGroupRef | None:
    """Row 7: ``consume-provisioning-request`` + ``provisioning-class-name`` annotations."""
    name = consumed_request(pod)
    if name is None:
        return None
    return PodGroupRef(
        ecosystem=Ecosystem.PROVISIONING_REQUEST,
        namespace=pod.metadata.namespace or "default",
        name=name,
    )


def min_count(request: ProvisioningRequest) -> int | None:
    """Sum of ``podSets[].count``."""
    total = sum(p.count for p in request.spec.pod_sets)
    return total or None


def admission_reason(request_key: str, request: ProvisioningRequest | None) -> str | None:
    """Consumers of a missing, failed or expired request never get ad-hoc capacity."""
    if request is None:
        return f"pod consumes provisioning request {request_key}, which does not exist"
    conditions = request.status.conditions
    if is_true(conditions, FAILED):
        return f"provisioning request {request_key} has failed"
    if is_true(conditions, BOOKING_EXPIRED):
        return f"provisioning request {request_key}: its booking expired"
    return None


def is_active(request: ProvisioningRequest) -> bool:
    """Served by Jointer and neither failed, expired nor revoked."""
    conditions = request.status.conditions
    return request.spec.provisioning_class_name in CLASSES and not any(
        is_true(conditions, kind) for kind in (FAILED, BOOKING_EXPIRED, CAPACITY_REVOKED)
    )


def provisioned_at(request: ProvisioningRequest) -> datetime | None:
    """When ``Provisioned`` turned True (None: not provisioned)."""
    found = find_condition(request.status.conditions, PROVISIONED)
    if not isinstance(found, RequestCondition) or found.status != "True":
        return None
    return found.last_transition_time or request.metadata.creation_timestamp


def valid_until(request: ProvisioningRequest) -> datetime | None:
    """Creation plus ``parameters.ValidUntilSeconds`` (default 7 days); None without a creation.

    Raises:
        ProvisioningRequestError: the parameter is not a non-negative whole number.
    """
    created = request.metadata.creation_timestamp
    raw = request.spec.parameters.get(VALID_UNTIL_PARAMETER)
    window = DEFAULT_VALID_UNTIL
    if raw is not None:
        try:
            seconds = int(raw)
        except ValueError:
            seconds = -1
        if seconds < 0:
            raise ProvisioningRequestError(
                f"ProvisioningRequest {request.key}: spec.parameters.{VALID_UNTIL_PARAMETER}: "
                f"{raw!r} is not a non-negative number of seconds"
            )
        window = timedelta(seconds=seconds)
    return created + window if created is not None else None


def is_booking(request: ProvisioningRequest, now: datetime | None) -> bool:
    """Whether provisioned capacity is still held: within :data:`BOOKING_TIME` of ``Provisioned``.

    A request not provisioned yet holds what is launched for it; ``now`` None: no time limit.
    """
    since = provisioned_at(request)
    return since is None or now is None or now < since + BOOKING_TIME


def _uid(*parts: str) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:32]


def virtual_pods(
    request: ProvisioningRequest, templates: Mapping[str, PodTemplate]
) -> tuple[Pod, ...]:
    """``count`` pods of each pod set's PodTemplate, as consumers of ``request``.

    Args:
        request: the request.
        templates: PodTemplates by ``namespace/name``.

    Raises:
        ProvisioningRequestError: a missing or unreadable PodTemplate, or no pods at all.
    """
    namespace = request.metadata.namespace or "default"
    name = request.metadata.name
    pods: list[Pod] = []
    for index, pod_set in enumerate(request.spec.pod_sets):
        where = f"ProvisioningRequest {request.key}: spec.podSets[{index}]"
        template = templates.get(f"{namespace}/{pod_set.pod_template_ref.name}")
        if template is None:
            raise ProvisioningRequestError(
                f"{where}.podTemplateRef.name: PodTemplate "
                f"{namespace}/{pod_set.pod_template_ref.name} not found"
            )
        body = template.template
        metadata = dict(body.get("metadata") or {})
        annotations = {
            **dict(metadata.get("annotations") or {}),
            keys.CONSUME_PROVISIONING_REQUEST: name,
            keys.PROVISIONING_CLASS_NAME: request.spec.provisioning_class_name,
        }
        labels = {**dict(metadata.get("labels") or {}), VIRTUAL_LABEL: name}
        for replica in range(pod_set.count):
            pod_name = f"{name}-{index}-{replica}"
            obj = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": pod_name,
                    "namespace": namespace,
                    "uid": _uid(namespace, name, str(index), str(replica)),
                    "labels": labels,
                    "annotations": annotations,
                },
                "spec": body.get("spec") or {},
            }
            try:
                pods.append(parse_object(Pod, obj, kind="Pod"))
            except ApiValidationError as error:
                raise ProvisioningRequestError(
                    f"{where}: PodTemplate {namespace}/{pod_set.pod_template_ref.name}: {error}"
                ) from error
    if not pods:
        raise ProvisioningRequestError(f"ProvisioningRequest {request.key}: spec.podSets: no pods")
    return tuple(pods)


def is_virtual(pod: Pod) -> bool:
    """Whether ``pod`` is a virtual pod of a request."""
    return VIRTUAL_LABEL in pod.metadata.labels
