"""EC2NodeClass status and cleanup for the core's ``nodeclass`` controller.

:class:`AwsNodeClassLifecycle` implements :class:`~cloudprovider.nodeclass.NodeClassLifecycle`:
``status`` resolves the class through :class:`~cloudprovider.aws.nodeclassstatus.NodeClassResolver`
(subnets, security groups, AMIs, instance profile and their conditions) and adds
``ValidationSucceeded`` (False, naming the field, for a class Jointer cannot read; the
authorization dry-runs Karpenter also runs are not made); ``cleanup`` deletes the launch templates
tagged for the class and, for a role-based class, its instance profile (Karpenter's EC2NodeClass
termination).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from cloudprovider.aws.errors import AwsError
from cloudprovider.aws.instanceprofile import InstanceProfileProvider, profile_name_of
from cloudprovider.aws.launchtemplate import LaunchTemplateProvider
from cloudprovider.aws.nodeclass import Condition, EC2NodeClassStatus, parse_nodeclass
from cloudprovider.aws.nodeclassstatus import CONDITION_READY, NodeClassResolver
from cloudprovider.errors import CloudProviderError
from provisioner.apis.base import to_wire
from provisioner.apis.errors import ApiValidationError
from provisioner.apis.labels import FINALIZER_EC2NODECLASS_TERMINATION

__all__ = ["CONDITION_VALIDATION_SUCCEEDED", "AwsNodeClassLifecycle"]

CONDITION_VALIDATION_SUCCEEDED: Final = "ValidationSucceeded"
REASON_VALIDATION_FAILED: Final = "NodeClassValidationFailed"


@dataclass(slots=True, kw_only=True)
class AwsNodeClassLifecycle:
    """EC2NodeClass status resolution and cleanup on delete."""

    resolver: NodeClassResolver
    launch_templates: LaunchTemplateProvider
    instance_profiles: InstanceProfileProvider
    cluster: str
    region: str

    @property
    def finalizer(self) -> str:
        """``karpenter.k8s.aws/termination``."""
        return FINALIZER_EC2NODECLASS_TERMINATION

    def status(self, nodeclass: Mapping[str, Any], now: datetime) -> dict[str, Any]:
        """The EC2NodeClass's status now (see ``NodeClassLifecycle.status``)."""
        generation = (nodeclass.get("metadata") or {}).get("generation")
        observed = generation if isinstance(generation, int) else None
        try:
            parsed = parse_nodeclass(nodeclass)
        except ApiValidationError as error:
            message = str(error)[:32768]
            failed = [
                Condition(
                    type=kind,
                    status="False",
                    reason=REASON_VALIDATION_FAILED,
                    message=message,
                    last_transition_time=now,
                    observed_generation=observed,
                )
                for kind in (CONDITION_VALIDATION_SUCCEEDED, CONDITION_READY)
            ]
            return to_wire(EC2NodeClassStatus(conditions=failed))
        status = self.resolver.resolve(parsed).to_status(now)
        conditions = list(status.conditions or [])
        valid = Condition(
            type=CONDITION_VALIDATION_SUCCEEDED,
            status="True",
            reason=CONDITION_VALIDATION_SUCCEEDED,
            message="",
            last_transition_time=now,
            observed_generation=observed,
        )
        ready = [i for i, c in enumerate(conditions) if c.type == CONDITION_READY]
        conditions.insert(ready[0] if ready else len(conditions), valid)
        return to_wire(status.model_copy(update={"conditions": conditions}))

    def cleanup(self, nodeclass: Mapping[str, Any]) -> list[str]:
        """Delete the class's launch templates and its role-based instance profile."""
        metadata = nodeclass.get("metadata") or {}
        name = str(metadata.get("name", ""))
        try:
            deleted = self.launch_templates.delete_for_nodeclass(name)
            spec = nodeclass.get("spec") or {}
            if spec.get("role") and not spec.get("instanceProfile"):
                uid = str(metadata.get("uid", ""))
                profile = profile_name_of(self.cluster, self.region, name, uid)
                self.instance_profiles.delete(profile)
                deleted.append(profile)
        except AwsError as error:
            raise CloudProviderError(f"cleaning up ec2nodeclass {name!r}, {error}") from error
        return deleted
