"""ProvisioningRequest consumers (``pod-groups.md`` §7, row 7)."""

from __future__ import annotations

from typing import Final

from pydantic import Field

from provisioner.apis.base import LenientModel
from provisioner.apis.core import ObjectMeta, Pod
from provisioner.podgroups import keys
from provisioner.podgroups.condition import Condition, is_true
from provisioner.podgroups.model import Ecosystem, PodGroupRef

__all__ = ["ProvisioningRequest", "admission_reason", "consumed_request", "detect", "min_count"]

API_GROUP: Final = "autoscaling.x-k8s.io"


class ProvisioningRequestPodSet(LenientModel):
    """``podSets[] {podTemplateRef, count}``."""

    count: int = 0


class ProvisioningRequestSpec(LenientModel):
    """Pod sets and class."""

    pod_sets: tuple[ProvisioningRequestPodSet, ...] = ()
    provisioning_class_name: str = ""


class ProvisioningRequestStatus(LenientModel):
    """Conditions ``Accepted``, ``Provisioned``, ``Failed``, ``BookingExpired``, ..."""

    conditions: tuple[Condition, ...] = ()


class ProvisioningRequest(LenientModel):
    """An ``autoscaling.x-k8s.io/v1`` ProvisioningRequest."""

    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ProvisioningRequestSpec = Field(default_factory=ProvisioningRequestSpec)
    status: ProvisioningRequestStatus = Field(default_factory=ProvisioningRequestStatus)


def consumed_request(pod: Pod) -> str | None:
    """The name of the ProvisioningRequest the pod consumes (both annotations present)."""
    annotations = pod.metadata.annotations
    name = annotations.get(keys.CONSUME_PROVISIONING_REQUEST)
    if not name or not annotations.get(keys.PROVISIONING_CLASS_NAME):
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
    if is_true(conditions, "Failed"):
        return f"provisioning request {request_key} has failed"
    if is_true(conditions, "BookingExpired"):
        return f"provisioning request {request_key}: its booking expired"
    return None
