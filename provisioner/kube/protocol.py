"""The `KubeClient` port: the few Kubernetes API calls Jointer makes.

Objects cross the port as plain JSON dicts in exactly the wire shape (`apiVersion`, `kind`,
`metadata`, `spec`, `status`); typed models live in `provisioner.apis`. Callers own the dicts
they get back (adapters return fresh copies). Every failure is an error of
`provisioner.kube.errors`.

Two implementations: `provisioner.kube.real.RealKube` (the official client over HTTP) and
`provisioner.kube.memory.InMemoryKube` (API semantics in memory, for simulation and tests).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, Protocol

from provisioner.kube.errors import NotFoundError
from provisioner.kube.resource import Resource

JsonObject = dict[str, Any]
"""A Kubernetes object (or patch) in wire shape."""

EventType = Literal["Normal", "Warning"]


class WatchEventType(StrEnum):
    """The `type` of a watch event."""

    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"
    BOOKMARK = "BOOKMARK"


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One event of a watch stream.

    Attributes:
        type: what happened.
        object: the object after the change (for `DELETED`, its last state; for `BOOKMARK`,
            only `apiVersion`, `kind` and `metadata.resourceVersion`).
    """

    type: WatchEventType
    object: JsonObject

    @property
    def resource_version(self) -> str:
        """The event object's `metadata.resourceVersion` (empty when missing)."""
        return str(self.object.get("metadata", {}).get("resourceVersion") or "")


@dataclass(frozen=True, slots=True)
class ObjectList:
    """The answer of a list call.

    Attributes:
        items: the objects, each with `apiVersion` and `kind` set.
        resource_version: the collection's resourceVersion, the point a watch resumes from.
    """

    items: list[JsonObject] = field(default_factory=list)
    resource_version: str = ""


class KubeClient(Protocol):
    """A small, synchronous Kubernetes client.

    `namespace` is required for namespaced resources on object calls and ignored for
    cluster-scoped ones; on `list`/`watch`, `None` means all namespaces.
    """

    def get(self, resource: Resource, name: str, *, namespace: str | None = None) -> JsonObject:
        """Read one object.

        Raises:
            NotFoundError: no such object.
        """
        ...

    def list(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> ObjectList:
        """List objects matching the selectors.

        `label_selector` is the API string form (`=`, `==`, `!=`, `in`, `notin`, `key`, `!key`).
        `field_selector` supports `=`/`!=` on `metadata.name`, `metadata.namespace` and
        `spec.nodeName` at least; adapters may evaluate it client-side.

        Returns:
            The items and the collection's resourceVersion, from which `watch` continues.
        """
        ...

    def watch(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        resource_version: str | None = None,
        label_selector: str | None = None,
        timeout: float | None = None,
    ) -> Iterator[WatchEvent]:
        """Stream changes after `resource_version`, bookmarks included.

        The iterator ends normally when the server closes the stream (about `timeout`
        seconds; the in-memory API ends once caught up unless `timeout` is given).
        Callers resume from the last event's resourceVersion (`BOOKMARK`s carry one too).
        Closing the iterator early releases the connection.

        Raises:
            GoneError: `resource_version` is too old; list again and watch from the new one.
            UnreachableError: the connection failed or broke.
        """
        ...

    def create(
        self, resource: Resource, body: Mapping[str, Any], *, namespace: str | None = None
    ) -> JsonObject:
        """Create an object (`metadata.generateName` is honoured when `name` is absent).

        Returns:
            The stored object, with uid, resourceVersion, generation, creationTimestamp.

        Raises:
            AlreadyExistsError: an object of that name exists.
            InvalidError: the object is rejected.
        """
        ...

    def merge_patch(
        self,
        resource: Resource,
        name: str,
        patch: Mapping[str, Any],
        *,
        namespace: str | None = None,
        resource_version: str | None = None,
    ) -> JsonObject:
        """Apply a JSON merge patch (RFC 7386: dicts merge, lists replace, `None` deletes).

        With `resource_version`, the patch applies only if the object is still at that version
        (optimistic concurrency; needed whenever a list such as `finalizers` or `taints` is
        rewritten from a read). For resources with a status subresource, `status` in the
        patch is ignored.

        Raises:
            NotFoundError: no such object.
            ConflictError: the object is no longer at `resource_version`.
        """
        ...

    def patch_status(
        self,
        resource: Resource,
        name: str,
        patch: Mapping[str, Any],
        *,
        namespace: str | None = None,
        resource_version: str | None = None,
    ) -> JsonObject:
        """Merge-patch the `status` subresource; only `patch["status"]` is applied.

        Raises:
            NotFoundError: no such object (or the resource has no status subresource).
            ConflictError: the object is no longer at `resource_version`.
        """
        ...

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
        """Delete an object (background propagation).

        An object with finalizers only gets `metadata.deletionTimestamp`; it disappears once
        its finalizers are removed.

        Raises:
            NotFoundError: no such object.
            ConflictError: a `uid`/`resource_version` precondition failed.
        """
        ...

    def evict(self, namespace: str, name: str, *, uid: str | None = None) -> None:
        """Evict a pod through the `policy/v1` Eviction subresource (PDB-aware).

        Raises:
            NotFoundError: no such pod.
            ConflictError: the `uid` precondition failed.
            TooManyRequestsError: a PodDisruptionBudget forbids it now; retry later.
        """
        ...

    def create_event(
        self,
        involved: Mapping[str, Any],
        *,
        reason: str,
        message: str,
        type: EventType = "Normal",  # noqa: A002 - the API's own field name
        component: str = "karpenter",
    ) -> JsonObject:
        """Record a core/v1 Event about `involved` (an object in wire shape).

        The event lives in the object's namespace (`default` for cluster-scoped objects).

        Returns:
            The created Event.
        """
        ...


def get_or_none(
    kube: KubeClient, resource: Resource, name: str, *, namespace: str | None = None
) -> JsonObject | None:
    """Read one object, or ``None`` when there is no such object."""
    try:
        return kube.get(resource, name, namespace=namespace)
    except NotFoundError:
        return None
