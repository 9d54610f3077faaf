"""`InMemoryKube`: the Kubernetes API's semantics in memory, for simulation and tests.

What it implements, as the API server does:

- `metadata.uid`, `creationTimestamp` (from the injected clock), `resourceVersion` (one global
  counter), `generation` (1 on create, +1 when anything outside `metadata`/`status` changes);
  `generateName`; `AlreadyExists` on duplicate names.
- Status subresource isolation: for resources with `has_status`, `merge_patch` ignores
  `status` and `patch_status` applies only `status`; custom resources drop `status` on create.
- Optimistic concurrency: a `resource_version` (argument or `metadata.resourceVersion` in the
  patch) that is not current fails with `ConflictError`; no-op patches change nothing.
- Finalizers: deleting an object with finalizers sets `deletionTimestamp`; it disappears when
  its finalizers are emptied; no new finalizers may be added while it is being deleted.
- Optionally (`graceful_pod_deletion=True`), bound, non-terminal pods are deleted gracefully:
  they keep existing with `deletionTimestamp = now + grace` until deleted with grace 0 (what a
  kubelet does).
- Watches from a resourceVersion over a bounded per-resource event history (older ones raise
  `GoneError`), selector transitions (an object leaving a label selector is `DELETED` for that
  watch), `BOOKMARK` at the end of each watch.
- Evictions that consult PodDisruptionBudgets (`provisioner.kube.pdb`) and then delete the pod.
- Bindings (`bind`) that set `spec.nodeName` and the `PodScheduled` condition.

For the simulator, `subscribe` delivers every change synchronously, in order, on the thread that
made it, without threads or polling, and `view` lists without copying. For tests, `fail_next`
injects one-shot errors and `calls` records every call.

Stored objects are frozen (:class:`FrozenDict` / :class:`FrozenList`: they read as dicts and
lists and refuse every change), so the event history and `view` share them instead of copying;
`get`, `list`, `watch` and the writes return plain, mutable copies. Nothing a caller holds can
change what is stored.
"""

from __future__ import annotations

import bisect
import copy
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final, NoReturn, SupportsIndex, TypeVar, cast

from provisioner.apis.core import is_terminal
from provisioner.kube.bulk import copy_json
from provisioner.kube.errors import (
    AlreadyExistsError,
    BadRequestError,
    ConflictError,
    GoneError,
    InvalidError,
    KubeApiError,
    NotFoundError,
)
from provisioner.kube.event import format_time, record_event
from provisioner.kube.patch import apply_merge_patch
from provisioner.kube.pdb import check_eviction
from provisioner.kube.protocol import (
    EventType,
    JsonObject,
    ObjectList,
    WatchEvent,
    WatchEventType,
)
from provisioner.kube.resource import POD_DISRUPTION_BUDGETS, PODS, Resource
from provisioner.kube.selector import (
    FieldSelector,
    LabelSelector,
    parse_field_selector,
    parse_label_selector,
)

Clock = Callable[[], datetime]
Subscriber = Callable[[Resource, WatchEvent], None]

DEFAULT_HISTORY_WINDOW: Final = 1000
"""Events kept per resource for watches to resume from (the API's watch cache is similar)."""

DEFAULT_POD_GRACE_SECONDS: Final = 30
_IMMUTABLE_METADATA: Final = (
    "name",
    "namespace",
    "uid",
    "creationTimestamp",
    "generation",
    "resourceVersion",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)

_Key = tuple[str, str]
_Objects = list[JsonObject]
T = TypeVar("T")
_ATOMS: Final = frozenset({str, int, float, bool, type(None)})
_READ_ONLY: Final = "stored API objects are read-only: change a copy (thaw) instead"


class FrozenDict(dict[str, Any]):
    """A stored object's mapping: a ``dict`` for every read, refusing every change."""

    __slots__ = ()

    def _refuse(self, *args: object, **kwargs: object) -> NoReturn:  # noqa: ARG002 - any call
        raise TypeError(_READ_ONLY)

    def __setitem__(self, key: str, value: Any) -> NoReturn:
        self._refuse(key, value)

    def __delitem__(self, key: str) -> NoReturn:
        self._refuse(key)

    def __ior__(self, other: object) -> NoReturn:  # type: ignore[misc]
        self._refuse(other)

    clear = _refuse
    pop = _refuse
    popitem = _refuse
    setdefault = _refuse
    update = _refuse

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: object) -> dict[str, Any]:
        return _thaw(self)  # type: ignore[no-any-return]

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, (thaw(self),))


class FrozenList(list[Any]):
    """A stored object's list: a ``list`` for every read, refusing every change."""

    __slots__ = ()

    def _refuse(self, *args: object, **kwargs: object) -> NoReturn:  # noqa: ARG002 - any call
        raise TypeError(_READ_ONLY)

    def __setitem__(self, index: SupportsIndex | slice, value: Any) -> NoReturn:
        self._refuse(index, value)

    def __delitem__(self, index: SupportsIndex | slice) -> NoReturn:
        self._refuse(index)

    def __iadd__(self, other: object) -> NoReturn:  # type: ignore[misc]
        self._refuse(other)

    def __imul__(self, other: object) -> NoReturn:
        self._refuse(other)

    append = _refuse
    extend = _refuse
    insert = _refuse
    pop = _refuse
    remove = _refuse
    clear = _refuse
    sort = _refuse
    reverse = _refuse

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: object) -> list[Any]:
        return thaw(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (list, (thaw(self),))


def freeze(value: Any) -> Any:
    """A frozen deep copy of decoded JSON (frozen sub-trees are shared, not copied)."""
    cls = value.__class__
    if cls is dict:
        return FrozenDict({k: v if v.__class__ in _ATOMS else freeze(v) for k, v in value.items()})
    if cls is list:
        return FrozenList([v if v.__class__ in _ATOMS else freeze(v) for v in value])
    if cls in _ATOMS or cls is FrozenDict or cls is FrozenList:
        return value
    if isinstance(value, dict):
        return FrozenDict({k: freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return FrozenList([freeze(v) for v in value])
    return copy.deepcopy(value)


def thaw(value: T) -> T:
    """A plain, mutable deep copy of decoded JSON, frozen or not."""
    return cast("T", _thaw(value))


def _thaw(value: Any) -> Any:
    cls = value.__class__
    if cls is dict or cls is FrozenDict:
        return {k: v if v.__class__ in _ATOMS else _thaw(v) for k, v in value.items()}
    if cls is list or cls is FrozenList:
        return [v if v.__class__ in _ATOMS else _thaw(v) for v in value]
    if cls in _ATOMS:
        return value
    return copy_json(value)


@dataclass(frozen=True, slots=True)
class Call:
    """One recorded call: the verb, the resource, the namespace and the name (if any)."""

    verb: str
    resource: Resource
    namespace: str | None
    name: str | None


@dataclass(frozen=True, slots=True)
class _Fault:
    verb: str
    resource: Resource | None
    error: KubeApiError


@dataclass(frozen=True, slots=True)
class _Change:
    resource_version: int
    type: WatchEventType
    object: JsonObject
    previous: JsonObject | None


def _qualified(resource: Resource) -> str:
    return f"{resource.plural}.{resource.group}" if resource.group else resource.plural


def _conflict(resource: Resource, name: str) -> ConflictError:
    return ConflictError(
        f'Operation cannot be fulfilled on {_qualified(resource)} "{name}": the object has been '
        "modified; please apply your changes to the latest version and try again",
        reason="Conflict",
        details={"name": name, "kind": resource.plural},
    )


def _not_found(resource: Resource, name: str) -> NotFoundError:
    return NotFoundError(
        f'{_qualified(resource)} "{name}" not found',
        reason="NotFound",
        details={"name": name, "kind": resource.plural},
    )


def _body_without(obj: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    return {key: value for key, value in obj.items() if key not in keys}


class InMemoryKube:
    """An in-memory Kubernetes API implementing `provisioner.kube.protocol.KubeClient`.

    Thread-safe (one re-entrant lock). Returned objects are copies.

    Args:
        clock: returns the current time (aware datetime); virtual in simulations.
        history_window: events kept per resource for watches to resume from.
        graceful_pod_deletion: delete bound, running pods gracefully (needs a kubelet that
            finishes the deletion with grace 0).
    """

    def __init__(
        self,
        *,
        clock: Clock,
        history_window: int = DEFAULT_HISTORY_WINDOW,
        graceful_pod_deletion: bool = False,
    ) -> None:
        self._clock = clock
        self._window = history_window
        self._graceful_pods = graceful_pod_deletion
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._objects: dict[Resource, dict[_Key, JsonObject]] = {}
        self._sorted: dict[Resource, list[_Key]] = {}  # keys in order, until one comes or goes
        self._history: dict[Resource, deque[_Change]] = {}
        self._compacted: dict[Resource, int] = {}
        self._rv = 0
        self._uids = 0
        self._generated_names = 0
        self._subscribers: list[tuple[Subscriber, bool]] = []
        self._pending: deque[tuple[Resource, WatchEvent]] = deque()
        self._dispatching = False
        self._faults: list[_Fault] = []
        self.calls: list[Call] = []

    # -- test and simulation hooks ---------------------------------------------------------

    def subscribe(self, callback: Subscriber, *, frozen: bool = False) -> Callable[[], None]:
        """Call `callback(resource, event)` after every change, in order, on the changing thread.

        Deliveries are not re-entrant: changes made by a callback are delivered after it
        returns. Each callback gets its own copy of the object, or, with `frozen`, the stored
        snapshot itself (read-only, not copied). Returns a function that unsubscribes.
        """
        entry = (callback, frozen)
        with self._lock:
            self._subscribers.append(entry)

        def unsubscribe() -> None:
            with self._lock:
                if entry in self._subscribers:
                    self._subscribers.remove(entry)

        return unsubscribe

    def fail_next(
        self, verb: str, error: KubeApiError, *, resource: Resource | None = None
    ) -> None:
        """Make the next call of `verb`, optionally only on `resource`, raise `error`.

        Verbs: `get`, `list`, `watch`, `create`, `merge_patch`, `patch_status`, `delete`,
        `evict`, `bind`.
        """
        with self._lock:
            self._faults.append(_Fault(verb, resource, error))

    def compact(self, resource: Resource | None = None) -> None:
        """Forget the event history (of one resource or all): older watches get `GoneError`."""
        with self._lock:
            for res in [resource] if resource is not None else list(self._history):
                self._history.pop(res, None)
                self._compacted[res] = self._rv

    @property
    def resource_version(self) -> str:
        """The current global resourceVersion."""
        with self._lock:
            return str(self._rv)

    # -- reads -------------------------------------------------------------------------------

    def get(self, resource: Resource, name: str, *, namespace: str | None = None) -> JsonObject:
        """Read one object (see `KubeClient.get`)."""
        with self._lock:
            self._enter("get", resource, namespace, name)
            return thaw(self._stored(resource, namespace, name))

    def list(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> ObjectList:
        """List objects (see `KubeClient.list`); any dotted field path may be selected on."""
        labels = parse_label_selector(label_selector)
        fields = parse_field_selector(field_selector)
        with self._lock:
            self._enter("list", resource, namespace, None)
            items = [thaw(obj) for obj in self._select(resource, namespace, labels, fields)]
            return ObjectList(items=items, resource_version=str(self._rv))

    def view(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> _Objects:
        """What `list` returns, without copying: the stored objects themselves, frozen.

        For the simulation's own components that read the whole cluster often; any attempt to
        change a returned object raises `TypeError` (`thaw` gives a mutable copy).
        """
        labels = parse_label_selector(label_selector)
        fields = parse_field_selector(field_selector)
        with self._lock:
            self._enter("list", resource, namespace, None)
            return self._select(resource, namespace, labels, fields)

    def _select(
        self,
        resource: Resource,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
    ) -> _Objects:
        objects = self._objects.get(resource, {})
        keys: Sequence[_Key] | None = self._sorted.get(resource)
        if keys is None:
            keys = self._sorted[resource] = sorted(objects)
        if namespace is not None and resource.namespaced:
            # keys are sorted (namespace, name) pairs: one namespace is one run of them
            start = bisect.bisect_left(keys, (namespace, ""))
            end = bisect.bisect_left(keys, (namespace + "\x00", ""), lo=start)
            keys = keys[start:end]
        if not labels.requirements and not fields.requirements:
            return [objects[key] for key in keys]
        selected = []
        for key in keys:
            obj = objects[key]
            if labels.matches(obj["metadata"].get("labels")) and fields.matches(obj):
                selected.append(obj)
        return selected

    def watch(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        resource_version: str | None = None,
        label_selector: str | None = None,
        timeout: float | None = None,
    ) -> Iterator[WatchEvent]:
        """Stream changes after `resource_version` (see `KubeClient.watch`).

        Without `resource_version` (or with `"0"`), the stream starts with an `ADDED` event per
        existing object. The stream ends with a `BOOKMARK` once caught up, or, with `timeout`,
        once no change arrived for that many seconds of real time.

        Raises:
            GoneError: `resource_version` is older than the retained history.
        """
        selector = parse_label_selector(label_selector)
        with self._lock:
            self._enter("watch", resource, namespace, None)
            initial: list[WatchEvent] = []
            if resource_version in {None, "", "0"}:
                cursor = self._rv
                initial = [
                    WatchEvent(WatchEventType.ADDED, thaw(obj))
                    for (ns, _), obj in sorted(self._objects.get(resource, {}).items())
                    if (namespace is None or not resource.namespaced or ns == namespace)
                    and selector.matches(obj["metadata"].get("labels"))
                ]
            else:
                cursor = self._parse_rv(resource_version)
                self._check_not_gone(resource, cursor)
        return self._stream(resource, namespace, selector, cursor, initial, timeout)

    # -- writes ------------------------------------------------------------------------------

    def create(
        self, resource: Resource, body: Mapping[str, Any], *, namespace: str | None = None
    ) -> JsonObject:
        """Create an object (see `KubeClient.create`)."""
        with self._lock:
            self._enter("create", resource, namespace, body.get("metadata", {}).get("name"))
            created = self._create_locked(resource, body, namespace)
        self._dispatch()
        return created

    def merge_patch(
        self,
        resource: Resource,
        name: str,
        patch: Mapping[str, Any],
        *,
        namespace: str | None = None,
        resource_version: str | None = None,
    ) -> JsonObject:
        """Apply a JSON merge patch (see `KubeClient.merge_patch`)."""
        with self._lock:
            self._enter("merge_patch", resource, namespace, name)
            current = self._stored(resource, namespace, name)
            self._check_precondition(resource, current, patch, resource_version)
            body = _body_without(patch, "status") if resource.has_status else dict(patch)
            updated = apply_merge_patch(current, body)
            for key in _IMMUTABLE_METADATA:
                if key in current["metadata"]:
                    updated["metadata"][key] = current["metadata"][key]
                else:
                    updated["metadata"].pop(key, None)
            updated["apiVersion"], updated["kind"] = resource.api_version, resource.kind
            self._check_finalizers(resource, current, updated)
            result = self._commit(resource, current, updated)
        self._dispatch()
        return result

    def patch_status(
        self,
        resource: Resource,
        name: str,
        patch: Mapping[str, Any],
        *,
        namespace: str | None = None,
        resource_version: str | None = None,
    ) -> JsonObject:
        """Merge-patch the status subresource (see `KubeClient.patch_status`)."""
        with self._lock:
            self._enter("patch_status", resource, namespace, name)
            if not resource.has_status:
                raise _not_found(resource, f"{name}/status")
            current = self._stored(resource, namespace, name)
            self._check_precondition(resource, current, patch, resource_version)
            body = {"status": patch["status"]} if "status" in patch else {}
            result = self._commit(resource, current, apply_merge_patch(current, body))
        self._dispatch()
        return result

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
        """Delete an object (see `KubeClient.delete`)."""
        with self._lock:
            self._enter("delete", resource, namespace, name)
            current = self._stored(resource, namespace, name)
            self._delete_locked(resource, current, uid, resource_version, grace_period_seconds)
        self._dispatch()

    def evict(self, namespace: str, name: str, *, uid: str | None = None) -> None:
        """Evict a pod if its PodDisruptionBudget allows (see `KubeClient.evict`)."""
        with self._lock:
            self._enter("evict", PODS, namespace, name)
            pod = self._stored(PODS, namespace, name)
            every = (LabelSelector(), FieldSelector())
            pdbs = self._select(POD_DISRUPTION_BUDGETS, namespace, *every)

            def pods() -> Iterator[JsonObject]:  # the namespace's pods, read only if needed
                yield from self._select(PODS, namespace, *every)

            check_eviction(pod, pdbs, pods())
            self._delete_locked(PODS, pod, uid, None, None)
        self._dispatch()

    def bind(self, namespace: str, name: str, node: str) -> JsonObject:
        """Bind a pod to a node (a `Binding`): set `spec.nodeName` and `PodScheduled`.

        Raises:
            NotFoundError: no such pod.
            ConflictError: the pod is already bound.
        """
        with self._lock:
            self._enter("bind", PODS, namespace, name)
            current = self._stored(PODS, namespace, name)
            bound = current.get("spec", {}).get("nodeName")
            if bound:
                raise ConflictError(
                    f'Operation cannot be fulfilled on pods/binding "{name}": pod {name} is '
                    f'already assigned to node "{bound}"',
                    reason="Conflict",
                )
            updated = thaw(current)
            updated.setdefault("spec", {})["nodeName"] = node
            conditions = [
                c
                for c in updated.setdefault("status", {}).get("conditions") or []
                if c.get("type") != "PodScheduled"
            ]
            conditions.append(
                {
                    "type": "PodScheduled",
                    "status": "True",
                    "lastTransitionTime": format_time(self._clock()),
                }
            )
            updated["status"]["conditions"] = conditions
            result = self._commit(PODS, current, updated, bump_generation=False)
        self._dispatch()
        return result

    def create_event(
        self,
        involved: Mapping[str, Any],
        *,
        reason: str,
        message: str,
        type: EventType = "Normal",  # noqa: A002 - the API's own field name
        component: str = "karpenter",
    ) -> JsonObject:
        """Record an Event (see `KubeClient.create_event`)."""
        return record_event(
            self,
            involved,
            reason=reason,
            message=message,
            type=type,
            component=component,
            now=self._clock(),
        )

    # -- internals ---------------------------------------------------------------------------

    def _enter(
        self, verb: str, resource: Resource, namespace: str | None, name: str | None
    ) -> None:
        self.calls.append(Call(verb, resource, namespace, name))
        for fault in self._faults:
            if fault.verb == verb and fault.resource in {None, resource}:
                self._faults.remove(fault)
                raise fault.error

    def _key(self, resource: Resource, namespace: str | None, name: str) -> _Key:
        if not resource.namespaced:
            return ("", name)
        if not namespace:
            raise BadRequestError(f"a namespace is required for {_qualified(resource)}")
        return (namespace, name)

    def _stored(self, resource: Resource, namespace: str | None, name: str) -> JsonObject:
        obj = self._objects.get(resource, {}).get(self._key(resource, namespace, name))
        if obj is None:
            raise _not_found(resource, name)
        return obj

    @staticmethod
    def _parse_rv(resource_version: str | None) -> int:
        try:
            return int(resource_version or 0)
        except ValueError:
            raise BadRequestError(f"invalid resourceVersion {resource_version!r}") from None

    def _check_not_gone(self, resource: Resource, cursor: int) -> None:
        if cursor < self._compacted.get(resource, 0):
            raise make_gone(cursor)

    def _check_precondition(
        self,
        resource: Resource,
        current: JsonObject,
        patch: Mapping[str, Any],
        resource_version: str | None,
    ) -> None:
        wanted = resource_version or (patch.get("metadata") or {}).get("resourceVersion")
        if wanted and str(wanted) != current["metadata"]["resourceVersion"]:
            raise _conflict(resource, current["metadata"]["name"])

    @staticmethod
    def _check_finalizers(resource: Resource, current: JsonObject, updated: JsonObject) -> None:
        if not current["metadata"].get("deletionTimestamp"):
            return
        before = set(current["metadata"].get("finalizers") or [])
        after = set(updated["metadata"].get("finalizers") or [])
        if after - before:
            raise InvalidError(
                f'{resource.kind} "{current["metadata"]["name"]}" is invalid: metadata.finalizers:'
                " Forbidden: no new finalizers can be added if the object is being deleted",
                reason="Invalid",
            )

    def _create_locked(
        self, resource: Resource, body: Mapping[str, Any], namespace: str | None
    ) -> JsonObject:
        obj: JsonObject = copy_json(dict(body))
        metadata = obj.setdefault("metadata", {})
        if resource.namespaced:
            given = metadata.get("namespace")
            if namespace and given and namespace != given:
                raise BadRequestError(
                    "the namespace of the provided object does not match the namespace sent on"
                    " the request"
                )
            metadata["namespace"] = namespace or given
            if not metadata["namespace"]:
                raise BadRequestError(f"a namespace is required for {_qualified(resource)}")
        else:
            metadata.pop("namespace", None)
        if not metadata.get("name"):
            if not metadata.get("generateName"):
                raise InvalidError(
                    f"{resource.kind} is invalid: metadata.name: Required value: name or "
                    "generateName is required",
                    reason="Invalid",
                )
            self._generated_names += 1
            metadata["name"] = f"{metadata['generateName']}{self._generated_names:05x}"
        key = self._key(resource, metadata.get("namespace"), metadata["name"])
        if key in self._objects.get(resource, {}):
            raise AlreadyExistsError(
                f'{_qualified(resource)} "{metadata["name"]}" already exists',
                reason="AlreadyExists",
                details={"name": metadata["name"], "kind": resource.plural},
            )
        self._uids += 1
        self._rv += 1
        obj["apiVersion"], obj["kind"] = resource.api_version, resource.kind
        metadata["uid"] = str(uuid.UUID(int=self._uids, version=4))
        metadata["resourceVersion"] = str(self._rv)
        metadata["generation"] = 1
        metadata["creationTimestamp"] = format_time(self._clock())
        metadata.pop("deletionTimestamp", None)
        metadata.pop("deletionGracePeriodSeconds", None)
        if resource.is_custom and resource.has_status:
            obj.pop("status", None)
        stored = freeze(obj)
        self._objects.setdefault(resource, {})[key] = stored
        self._sorted.pop(resource, None)
        self._record(resource, WatchEventType.ADDED, stored, None)
        return obj  # a private copy of the body: nothing else holds it

    def _commit(
        self,
        resource: Resource,
        current: JsonObject,
        updated: JsonObject,
        *,
        bump_generation: bool = True,
    ) -> JsonObject:
        if updated == current:
            return thaw(current)
        metadata = updated["metadata"]
        if bump_generation and _body_without(updated, "metadata", "status") != _body_without(
            current, "metadata", "status"
        ):
            metadata["generation"] = int(current["metadata"].get("generation") or 0) + 1
        self._rv += 1
        metadata["resourceVersion"] = str(self._rv)
        key = self._key(resource, metadata.get("namespace"), metadata["name"])
        removable = (
            metadata.get("deletionTimestamp")
            and not metadata.get("finalizers")
            and not metadata.get("deletionGracePeriodSeconds")
        )
        stored = freeze(updated)
        if removable:
            del self._objects[resource][key]
            self._sorted.pop(resource, None)
            self._record(resource, WatchEventType.DELETED, stored, current)
        else:
            self._objects[resource][key] = stored
            self._record(resource, WatchEventType.MODIFIED, stored, current)
        return updated  # built for this call from copies: nothing else holds it

    def _grace_seconds(self, resource: Resource, obj: JsonObject, requested: int | None) -> int:
        if resource != PODS or not self._graceful_pods:
            return 0
        if not obj.get("spec", {}).get("nodeName"):
            return 0
        if is_terminal(obj):
            return 0
        if requested is not None:
            return max(0, requested)
        configured = obj.get("spec", {}).get("terminationGracePeriodSeconds")
        return DEFAULT_POD_GRACE_SECONDS if configured is None else int(configured)

    def _delete_locked(
        self,
        resource: Resource,
        current: JsonObject,
        uid: str | None,
        resource_version: str | None,
        grace_period_seconds: int | None,
    ) -> None:
        metadata = current["metadata"]
        if uid is not None and uid != metadata["uid"]:
            raise ConflictError(
                f"Precondition failed: UID in precondition: {uid}, UID in object meta: "
                f"{metadata['uid']}",
                reason="Conflict",
            )
        if resource_version is not None and resource_version != metadata["resourceVersion"]:
            raise ConflictError(
                f"Precondition failed: ResourceVersion in precondition: {resource_version}, "
                f"ResourceVersion in object meta: {metadata['resourceVersion']}",
                reason="Conflict",
            )
        grace = self._grace_seconds(resource, current, grace_period_seconds)
        if metadata.get("deletionTimestamp") and grace >= int(
            metadata.get("deletionGracePeriodSeconds") or 0
        ):
            return
        if not metadata.get("finalizers") and grace == 0:
            self._rv += 1
            gone = thaw(current)
            gone["metadata"]["resourceVersion"] = str(self._rv)
            del self._objects[resource][
                self._key(resource, metadata.get("namespace"), metadata["name"])
            ]
            self._sorted.pop(resource, None)
            self._record(resource, WatchEventType.DELETED, freeze(gone), current)
            return
        updated = thaw(current)
        updated["metadata"]["deletionTimestamp"] = format_time(
            self._clock() + timedelta(seconds=grace)
        )
        updated["metadata"]["deletionGracePeriodSeconds"] = grace
        self._commit(resource, current, updated, bump_generation=False)

    def _record(
        self,
        resource: Resource,
        kind: WatchEventType,
        obj: JsonObject,
        previous: JsonObject | None,
    ) -> None:
        """Keep a change (``obj`` and ``previous`` are frozen: shared, never copied)."""
        history = self._history.setdefault(resource, deque())
        snapshot = obj
        history.append(_Change(self._rv, kind, snapshot, previous))
        while len(history) > self._window:
            dropped = history.popleft()
            self._compacted[resource] = dropped.resource_version
        if self._subscribers:
            self._pending.append((resource, WatchEvent(kind, snapshot)))
        self._changed.notify_all()

    def _dispatch(self) -> None:
        with self._lock:
            if self._dispatching:
                return
            self._dispatching = True
        try:
            while True:
                with self._lock:
                    if not self._pending:
                        return
                    resource, event = self._pending.popleft()
                    subscribers = list(self._subscribers)
                for subscriber, frozen in subscribers:
                    delivered = event.object if frozen else thaw(event.object)
                    subscriber(resource, WatchEvent(event.type, delivered))
        finally:
            with self._lock:
                self._dispatching = False

    def _bookmark(self, resource: Resource) -> WatchEvent:
        return WatchEvent(
            WatchEventType.BOOKMARK,
            {
                "apiVersion": resource.api_version,
                "kind": resource.kind,
                "metadata": {"resourceVersion": str(self._rv)},
            },
        )

    def _visible(
        self,
        change: _Change,
        resource: Resource,
        namespace: str | None,
        selector: LabelSelector,
    ) -> WatchEvent | None:
        def matches(obj: JsonObject | None) -> bool:
            if obj is None:
                return False
            in_namespace = (
                namespace is None
                or not resource.namespaced
                or obj["metadata"].get("namespace") == namespace
            )
            return in_namespace and selector.matches(obj["metadata"].get("labels"))

        now_matches = matches(change.object)
        if change.type != WatchEventType.MODIFIED:
            return WatchEvent(change.type, thaw(change.object)) if now_matches else None
        before = matches(change.previous)
        if now_matches:
            kind = WatchEventType.MODIFIED if before else WatchEventType.ADDED
            return WatchEvent(kind, thaw(change.object))
        if before:
            return WatchEvent(WatchEventType.DELETED, thaw(change.object))
        return None

    def _stream(  # noqa: PLR0917 - a private generator of one call site
        self,
        resource: Resource,
        namespace: str | None,
        selector: LabelSelector,
        cursor: int,
        initial: Sequence[WatchEvent],
        timeout: float | None,
    ) -> Iterator[WatchEvent]:
        yield from initial
        deadline = None if timeout is None else time.monotonic() + timeout
        bookmark: WatchEvent | None = None
        while bookmark is None:
            with self._lock:
                self._check_not_gone(resource, cursor)
                batch: list[WatchEvent] = []
                for change in self._history.get(resource, ()):
                    if change.resource_version <= cursor:
                        continue
                    cursor = change.resource_version
                    visible = self._visible(change, resource, namespace, selector)
                    if visible is not None:
                        batch.append(visible)
                if not batch:
                    remaining = 0.0 if deadline is None else deadline - time.monotonic()
                    if remaining <= 0:
                        bookmark = self._bookmark(resource)
                    else:
                        self._changed.wait(remaining)
                    continue
            yield from batch
        yield bookmark


def make_gone(resource_version: int | str) -> GoneError:
    """The error a watch from a compacted resourceVersion gets (410 Expired)."""
    return GoneError(f"too old resource version: {resource_version}", reason="Expired")
