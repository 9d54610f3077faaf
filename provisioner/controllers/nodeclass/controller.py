"""``nodeclass``: a NodeClass's status, finalizer and cleanup on a provider-neutral port.

Karpenter's EC2NodeClass status and termination controllers:

1. A live NodeClass gets the provider's finalizer (``karpenter.k8s.aws/termination``) and the
   status the provider resolves (AWS: subnets, security groups, AMIs, instance profile and the
   conditions ``SubnetsReady``, ``SecurityGroupsReady``, ``AMIsReady``, ``InstanceProfileReady``,
   ``ValidationSucceeded`` and ``Ready``). Status is patched only when it changed; a condition
   whose status did not change keeps its ``lastTransitionTime``. It runs again every minute.
2. A deleted NodeClass waits while NodeClaims still use it (a ``WaitingOnNodeClaimTermination``
   event names them); then the provider deletes what it made for the class (AWS: launch
   templates and the role-based instance profile) and the finalizer is removed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any, Final

from cloudprovider.errors import CloudProviderError
from cloudprovider.nodeclass import NodeClassLifecycle
from provisioner.controllers.events import Event, object_ref
from provisioner.controllers.nodeclaim.status import update_with_version
from provisioner.controllers.ports import ControllerBase, Ports
from provisioner.kube.errors import KubeApiError, NotFoundError
from provisioner.kube.protocol import JsonObject
from provisioner.kube.resource import Resource
from provisioner.runtime.reconciler import Request, Result

__all__ = ["NAME", "REQUEUE", "WAIT_REQUEUE", "NodeClassController", "merge_conditions"]

NAME: Final = "nodeclass"
REQUEUE: Final = timedelta(minutes=1)
"""How often a live NodeClass's status is resolved again (Karpenter: subnets every minute)."""
WAIT_REQUEUE: Final = timedelta(seconds=10)
"""Retry delay while a deleted NodeClass waits on NodeClaims or a failed cleanup."""
SHOWN: Final = 5


def merge_conditions(
    current: Sequence[Mapping[str, Any]], desired: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """``desired``, keeping each condition's ``lastTransitionTime`` when its status is unchanged."""
    before = {str(c.get("type")): c for c in current}
    merged = []
    for condition in desired:
        old = before.get(str(condition.get("type")))
        entry = dict(condition)
        if old is not None and old.get("status") == entry.get("status"):
            entry["lastTransitionTime"] = old.get("lastTransitionTime")
        merged.append(entry)
    return merged


class NodeClassController(ControllerBase):
    """Keeps one NodeClass's status and finalizer; cleans up after it on delete.

    Args:
        ports: what the controller acts through.
        lifecycle: the provider's status resolution and cleanup.
        resource: the NodeClass resource (``ec2nodeclasses``).
    """

    name: Final = NAME

    def __init__(self, *, ports: Ports, lifecycle: NodeClassLifecycle, resource: Resource) -> None:
        super().__init__(ports, NAME)
        self._lifecycle = lifecycle
        self._resource = resource

    def reconcile(self, request: Request) -> Result:
        """Reconcile the NodeClass ``request.name``."""
        try:
            obj = self._kube.get(self._resource, request.name)
        except NotFoundError:
            return Result.done()
        except KubeApiError as error:
            self._log.error("getting nodeclass", NodeClass={"name": request.name}, error=str(error))
            return Result.after(WAIT_REQUEUE)
        if obj.get("metadata", {}).get("deletionTimestamp"):
            return self._finalize(obj)
        if not self._add_finalizer(request.name):
            return Result.done()
        return self._write_status(obj)

    # -- live ---------------------------------------------------------------------------------

    def _add_finalizer(self, name: str) -> bool:
        finalizer = self._lifecycle.finalizer

        def build(current: JsonObject) -> dict[str, Any] | None:
            finalizers = list(current.get("metadata", {}).get("finalizers") or [])
            if finalizer in finalizers or current["metadata"].get("deletionTimestamp"):
                return None
            return {"metadata": {"finalizers": [*finalizers, finalizer]}}

        try:
            return update_with_version(self._kube, self._resource, name, build) is not None
        except KubeApiError as error:
            self._log.error(
                "adding nodeclass finalizer", NodeClass={"name": name}, error=str(error)
            )
            return True

    def _write_status(self, obj: JsonObject) -> Result:
        name = str(obj["metadata"]["name"])
        now = self._clock.now()
        current = dict(obj.get("status") or {})
        desired = dict(self._lifecycle.status(obj, now))
        desired["conditions"] = merge_conditions(
            current.get("conditions") or [], desired.get("conditions") or []
        )
        if desired != current:
            patch: dict[str, Any] = dict(desired)
            for key in current:
                patch.setdefault(key, None)  # merge patch: drop what is no longer resolved
            try:
                self._kube.patch_status(self._resource, name, {"status": patch})
            except NotFoundError:
                return Result.done()
            except KubeApiError as error:
                self._log.error(
                    "patching nodeclass status", NodeClass={"name": name}, error=str(error)
                )
                return Result.after(WAIT_REQUEUE)
        return Result.after(REQUEUE)

    # -- deleted ------------------------------------------------------------------------------

    def _users(self, name: str) -> list[str]:
        kind, group = self._resource.kind, self._resource.group
        return sorted(
            claim.name
            for claim in self._state.node_claims()
            if claim.spec.node_class_ref.name == name
            and claim.spec.node_class_ref.kind == kind
            and claim.spec.node_class_ref.group == group
        )

    def _finalize(self, obj: JsonObject) -> Result:
        name = str(obj["metadata"]["name"])
        finalizer = self._lifecycle.finalizer
        if finalizer not in (obj["metadata"].get("finalizers") or []):
            return Result.done()
        users = self._users(name)
        if users:
            shown = ", ".join(users[:SHOWN])
            rest = len(users) - SHOWN
            names = f"{shown} and {rest} other(s)" if rest > 0 else shown
            self._events.publish(
                Event(
                    object_ref(
                        self._resource.kind,
                        name,
                        api_version=self._resource.api_version,
                        uid=str(obj["metadata"].get("uid") or ""),
                    ),
                    "Normal",
                    "WaitingOnNodeClaimTermination",
                    f"Waiting on NodeClaim termination for {names}",
                )
            )
            return Result.after(WAIT_REQUEUE)
        try:
            deleted = self._lifecycle.cleanup(obj)
        except CloudProviderError as error:
            self._log.error("cleaning up nodeclass", NodeClass={"name": name}, error=str(error))
            return Result.after(WAIT_REQUEUE)
        if deleted:
            self._log.info("deleted nodeclass resources", NodeClass={"name": name}, deleted=deleted)

        def build(current: JsonObject) -> dict[str, Any] | None:
            finalizers = list(current.get("metadata", {}).get("finalizers") or [])
            if finalizer not in finalizers:
                return None
            return {"metadata": {"finalizers": [f for f in finalizers if f != finalizer]}}

        try:
            update_with_version(self._kube, self._resource, name, build)
        except KubeApiError as error:
            self._log.error(
                "removing nodeclass finalizer", NodeClass={"name": name}, error=str(error)
            )
            return Result.after(WAIT_REQUEUE)
        return Result.done()
