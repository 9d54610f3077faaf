"""Owned-field writes to NodeClaims and Nodes: merge patches, status patches, conflict retries.

Nothing here writes a whole object back: label and annotation maps are merge-patched, lists
(finalizers, taints, owner references, conditions) are rewritten from a fresh read under the
read's resourceVersion, and a conflict re-reads and retries.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from provisioner.apis.base import parse_object, to_wire
from provisioner.apis.conditions import NODECLAIM_READY_DEPENDENTS, set_root_condition
from provisioner.apis.nodeclaim import NodeClaim
from provisioner.kube.errors import NotFoundError
from provisioner.kube.protocol import JsonObject, KubeClient
from provisioner.kube.resource import NODE_CLAIMS, Resource
from provisioner.kube.retry import conflict_retry

__all__ = ["get_claim", "patch_claim_status", "update_with_version"]

StatusMutation = Callable[[NodeClaim], Mapping[str, Any] | None]


def get_claim(kube: KubeClient, name: str) -> NodeClaim | None:
    """Read a NodeClaim fresh from the API (None when it is gone)."""
    try:
        return parse_object(NodeClaim, kube.get(NODE_CLAIMS, name), kind="NodeClaim")
    except NotFoundError:
        return None


def patch_claim_status(
    kube: KubeClient, name: str, mutate: StatusMutation, *, now: datetime
) -> NodeClaim | None:
    """Read the NodeClaim, let ``mutate`` return a status patch, write it under its version.

    ``mutate`` gets the fresh claim and returns the ``status`` fields to merge (``conditions``
    as a tuple of models, recomputed with ``Ready`` here) or None for no change. Conflicts
    retry the whole read-mutate-write.

    Returns:
        The updated claim, or None when it is gone.
    """

    def attempt() -> NodeClaim | None:
        claim = get_claim(kube, name)
        if claim is None:
            return None
        patch = mutate(claim)
        if patch is None:
            return claim
        status: dict[str, Any] = {k: v for k, v in patch.items() if k != "conditions"}
        if "conditions" in patch:
            conditions = set_root_condition(
                patch["conditions"],
                NODECLAIM_READY_DEPENDENTS,
                now=now,
                observed_generation=claim.metadata.generation,
            )
            status["conditions"] = [to_wire(c) for c in conditions]
        updated = kube.patch_status(
            NODE_CLAIMS,
            name,
            {"status": status},
            resource_version=claim.metadata.resource_version or None,
        )
        return parse_object(NodeClaim, updated, kind="NodeClaim")

    try:
        return conflict_retry(attempt)
    except NotFoundError:
        return None


def update_with_version(
    kube: KubeClient,
    resource: Resource,
    name: str,
    build: Callable[[JsonObject], Mapping[str, Any] | None],
) -> JsonObject | None:
    """Read, build a merge patch of owned fields, apply it under the read's resourceVersion.

    ``build`` gets the fresh object and returns the patch (None: nothing to change); a
    conflict re-reads and retries.

    Returns:
        The updated object (the read one when ``build`` returned None), or None when gone.
    """

    def attempt() -> JsonObject | None:
        try:
            current = kube.get(resource, name)
        except NotFoundError:
            return None
        patch = build(current)
        if not patch:
            return current
        return kube.merge_patch(
            resource,
            name,
            patch,
            resource_version=str(current["metadata"].get("resourceVersion") or "") or None,
        )

    try:
        return conflict_retry(attempt)
    except NotFoundError:
        return None
