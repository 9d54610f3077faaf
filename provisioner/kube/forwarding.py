"""`ForwardingKube`: a `KubeClient` that forwards every call to another one.

The base of the port's decorators (`provisioner.kube.rbac.AuthorizedKube`, the simulation's
`RecordingKube`, ...): each forwards every `KubeClient` method verbatim, with all its keyword
arguments, and overrides only what it adds. Before every call, `_before` is told the request's
RBAC attributes (verb, resource, namespace, name, subresource), as the HTTP call would carry
them; it does nothing by default.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from provisioner.kube.protocol import EventType, JsonObject, KubeClient, ObjectList, WatchEvent
from provisioner.kube.resource import EVENTS, PODS, Resource


class ForwardingKube:
    """A `KubeClient` that forwards every call to `inner`, calling `_before` first.

    Args:
        inner: the client every call goes to.
    """

    def __init__(self, inner: KubeClient) -> None:
        self._inner = inner

    def _before(
        self,
        verb: str,
        resource: Resource,
        *,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str = "",
    ) -> None:
        """Called before every call with the request's attributes; a no-op by default.

        `merge_patch` is verb `patch`, `patch_status` is `patch` on subresource `status`,
        `evict` is `create` on `pods/eviction`, `create_event` is `create` on `events` in the
        involved object's namespace (`default` for cluster-scoped objects); `create` takes its
        namespace from `metadata.namespace` when none is given.
        """

    def get(self, resource: Resource, name: str, *, namespace: str | None = None) -> JsonObject:
        """See `KubeClient.get`."""
        self._before("get", resource, namespace=namespace, name=name)
        return self._inner.get(resource, name, namespace=namespace)

    def list(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> ObjectList:
        """See `KubeClient.list`."""
        self._before("list", resource, namespace=namespace)
        return self._inner.list(
            resource,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
        )

    def watch(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        resource_version: str | None = None,
        label_selector: str | None = None,
        timeout: float | None = None,
    ) -> Iterator[WatchEvent]:
        """See `KubeClient.watch`."""
        self._before("watch", resource, namespace=namespace)
        return self._inner.watch(
            resource,
            namespace=namespace,
            resource_version=resource_version,
            label_selector=label_selector,
            timeout=timeout,
        )

    def create(
        self, resource: Resource, body: Mapping[str, Any], *, namespace: str | None = None
    ) -> JsonObject:
        """See `KubeClient.create`."""
        given = (body.get("metadata") or {}).get("namespace")
        self._before("create", resource, namespace=namespace or given)
        return self._inner.create(resource, body, namespace=namespace)

    def merge_patch(
        self,
        resource: Resource,
        name: str,
        patch: Mapping[str, Any],
        *,
        namespace: str | None = None,
        resource_version: str | None = None,
    ) -> JsonObject:
        """See `KubeClient.merge_patch`."""
        self._before("patch", resource, namespace=namespace, name=name)
        return self._inner.merge_patch(
            resource, name, patch, namespace=namespace, resource_version=resource_version
        )

    def patch_status(
        self,
        resource: Resource,
        name: str,
        patch: Mapping[str, Any],
        *,
        namespace: str | None = None,
        resource_version: str | None = None,
    ) -> JsonObject:
        """See `KubeClient.patch_status`."""
        self._before("patch", resource, namespace=namespace, name=name, subresource="status")
        return self._inner.patch_status(
            resource, name, patch, namespace=namespace, resource_version=resource_version
        )

    def delete(
        self,
        resource: Resource,
        name: str,
        *,
        namespace: str | None = None,
        uid: str | None = None,
        resource_version: str | None = None,
        grace_period_seconds: int | None = None,
    ) -> None:
        """See `KubeClient.delete`."""
        self._before("delete", resource, namespace=namespace, name=name)
        self._inner.delete(
            resource,
            name,
            namespace=namespace,
            uid=uid,
            resource_version=resource_version,
            grace_period_seconds=grace_period_seconds,
        )

    def evict(self, namespace: str, name: str, *, uid: str | None = None) -> None:
        """See `KubeClient.evict`."""
        self._before("create", PODS, namespace=namespace, name=name, subresource="eviction")
        self._inner.evict(namespace, name, uid=uid)

    def create_event(
        self,
        involved: Mapping[str, Any],
        *,
        reason: str,
        message: str,
        type: EventType = "Normal",  # noqa: A002 - the API's own field name
        component: str = "karpenter",
    ) -> JsonObject:
        """See `KubeClient.create_event`."""
        namespace = (involved.get("metadata") or {}).get("namespace") or "default"
        self._before("create", EVENTS, namespace=namespace)
        return self._inner.create_event(
            involved, reason=reason, message=message, type=type, component=component
        )
