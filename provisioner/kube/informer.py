"""A level-based informer: list, then watch from the list's resourceVersion, with a cache.

`Informer.sync_once()` does one step and returns how long to wait before the next one, so a
test (or the simulator) can drive it deterministically; `Informer.run(stop)` loops over it with
an injected waiting function. The steps:

1. No valid resourceVersion: list, diff the result against the cache (adds, updates, deletes
   for objects that vanished while we were not watching), remember the list's resourceVersion.
2. Otherwise: watch from it until the stream ends, applying events and advancing the
   resourceVersion (bookmarks advance it too).
3. `GoneError` (410): relist at once. Any other API or connection error: relist after a capped
   exponential backoff; the failure count resets after a successful list.

Every object received passes once through the informer's `transform` (client-go's
`SetTransform`; e.g. :func:`strip_managed_fields`, what controller-runtime and Karpenter install)
before it is cached or delivered, so neither the cache nor a consumer holds what nobody reads.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Final, Protocol, runtime_checkable

from provisioner.kube.bulk import collector_paused, copy_json
from provisioner.kube.errors import GoneError, KubeApiError
from provisioner.kube.protocol import (
    JsonObject,
    KubeClient,
    ObjectList,
    WatchEvent,
    WatchEventType,
)
from provisioner.kube.resource import Resource

DEFAULT_WATCH_TIMEOUT: Final = 300.0
"""Seconds a watch stays open before it is renewed (client-go uses 5-10 minutes)."""

LIST_PAGE_SIZE: Final = 500
"""Objects per chunk of a relist (client-go's pager default)."""

OnAdd = Callable[[JsonObject], None]
Transform = Callable[[JsonObject], JsonObject]
OnUpdate = Callable[[JsonObject, JsonObject], None]
OnDelete = Callable[[JsonObject], None]
Waiter = Callable[[float, threading.Event], object]

_Key = tuple[str, str]


@runtime_checkable
class PagedLister(Protocol):
    """A client that can list in chunks (``RealKube``): a relist then decodes one at a time."""

    def list_pages(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        limit: int = 500,
    ) -> Iterator[ObjectList]:
        """The list, chunk by chunk; every chunk carries the list's resourceVersion."""
        ...


class BackoffPolicy(Protocol):
    """How long to wait after the n-th consecutive failure."""

    def delay(self, failures: int) -> float:
        """Seconds to wait after `failures` (>= 1) consecutive failures."""
        ...


@dataclass(frozen=True, slots=True)
class ExponentialBackoff:
    """`initial * factor ** (failures - 1)`, capped (client-go's reflector: 0.8 s to 30 s)."""

    initial: float = 0.8
    factor: float = 2.0
    cap: float = 30.0

    def delay(self, failures: int) -> float:
        """Seconds to wait after `failures` consecutive failures."""
        if failures <= 0:
            return 0.0
        return float(min(self.cap, self.initial * self.factor ** (failures - 1)))


def _wait_on_stop(delay: float, stop: threading.Event) -> object:
    return stop.wait(delay)


def strip_managed_fields(obj: JsonObject) -> JsonObject:
    """``obj`` without ``metadata.managedFields`` (controller-runtime's StripManagedFields).

    Server-side apply's field ownership is often the largest part of an object and no controller
    reads it. The object given is not changed: a stripped copy shares everything else with it.
    """
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict) or "managedFields" not in metadata:
        return obj
    return {
        **obj,
        "metadata": {k: v for k, v in metadata.items() if k != "managedFields"},
    }


def last_state(resource: Resource) -> Transform:
    """What consumers of ``resource``'s deletions read (all but the status; of a pod less).

    Of a pod: its metadata, ``spec.nodeName`` and ``status.phase``. An informer keeps this
    (``keep``) when its consumer holds its own copy of what it needs, so a cached pod costs
    little more than its metadata; a deletion found by a relist is delivered with it.
    """
    return _pod_last_state if resource.kind == "Pod" else _without_status


def _without_status(obj: JsonObject) -> JsonObject:
    return {k: v for k, v in obj.items() if k != "status"} if "status" in obj else obj


def _pod_last_state(obj: JsonObject) -> JsonObject:
    kept = {k: v for k, v in obj.items() if k not in {"spec", "status"}}
    for part, field in (("spec", "nodeName"), ("status", "phase")):
        whole = obj.get(part)
        if isinstance(whole, dict) and field in whole:
            kept[part] = {field: whole[field]}
    return kept


def object_key(obj: JsonObject) -> _Key:
    """The cache key of an object: (namespace or "", name)."""
    metadata = obj.get("metadata", {})
    return (str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))


class Informer:
    """Keeps a cache of one resource in step with the API and reports changes.

    Callbacks run on the thread calling `sync_once`/`run`; they receive copies unless
    `copies` is off (for consumers that only read, such as the cluster state cache, which
    builds its own models). Updates are reported only when the resourceVersion changed (relists
    are silent for unchanged objects).

    Args:
        kube: the API.
        resource: what to watch.
        namespace: one namespace, or `None` for all.
        label_selector: the API string form, or `None`.
        on_add: called with each new object.
        on_update: called with (old, new).
        on_delete: called with the last known state.
        backoff: delay policy after errors.
        watch_timeout: seconds per watch request; `None` lets the server choose (and makes
            `InMemoryKube` end each watch once caught up, for step-wise tests).
        logger: where to report errors and relists.
        transform: applied once to every object received, before it is cached or delivered
            (it must not change the object it is given; return a new one instead).
        copies: whether callbacks get deep copies (off: the objects themselves, which the
            callbacks must not change).
        keep: what the cache keeps of each object (default: all of it; it must not change the
            object it is given). A deletion found by a relist, the old object of an update and
            `get`/`items` give what was kept; adds, updates and watched deletions give the
            objects the API sent.
        page_size: list in chunks of this many objects when the client can
            (:class:`PagedLister`), delivering each chunk before the next is read, and the
            deletions a relist finds after them (None: one list, deletions first).
    """

    def __init__(
        self,
        kube: KubeClient,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        on_add: OnAdd | None = None,
        on_update: OnUpdate | None = None,
        on_delete: OnDelete | None = None,
        backoff: BackoffPolicy | None = None,
        watch_timeout: float | None = DEFAULT_WATCH_TIMEOUT,
        logger: logging.Logger | None = None,
        transform: Transform | None = None,
        copies: bool = True,
        keep: Transform | None = None,
        page_size: int | None = None,
    ) -> None:
        self._kube = kube
        self._resource = resource
        self._namespace = namespace
        self._label_selector = label_selector
        self._on_add = on_add
        self._on_update = on_update
        self._on_delete = on_delete
        self._backoff: BackoffPolicy = backoff or ExponentialBackoff()
        self._watch_timeout = watch_timeout
        self._log = logger or logging.getLogger(__name__)
        self._transform = transform
        self._keep = keep
        self._page_size = page_size
        self._copy: Callable[[JsonObject], JsonObject] = copy_json if copies else _same
        self._lock = threading.Lock()
        self._cache: dict[_Key, JsonObject] = {}
        self._resource_version: str | None = None
        self._failures = 0
        self._synced = threading.Event()
        self.relists = 0
        """How many lists were made (the first one included)."""

    # -- reading the cache -------------------------------------------------------------------

    @property
    def resource(self) -> Resource:
        """The watched resource."""
        return self._resource

    @property
    def has_synced(self) -> bool:
        """Whether the first list completed (the cache reflects the API at some point)."""
        return self._synced.is_set()

    @property
    def resource_version(self) -> str | None:
        """The resourceVersion the next watch resumes from (`None`: a list is due)."""
        return self._resource_version

    @property
    def failures(self) -> int:
        """Consecutive failures since the last successful list."""
        return self._failures

    def wait_synced(self, timeout: float) -> bool:
        """Block up to `timeout` seconds for the first list; return whether it happened."""
        return self._synced.wait(timeout)

    def get(self, name: str, namespace: str | None = None) -> JsonObject | None:
        """A copy of the cached object, or `None`."""
        with self._lock:
            obj = self._cache.get((namespace or "", name))
            return copy_json(obj) if obj is not None else None

    def items(self) -> list[JsonObject]:
        """Copies of all cached objects, sorted by (namespace, name)."""
        with self._lock:
            return [copy_json(obj) for _, obj in sorted(self._cache.items())]

    # -- driving -----------------------------------------------------------------------------

    def sync_once(self) -> float:
        """Do one list or one watch; return the seconds to wait before the next step."""
        try:
            if self._resource_version is None:
                self._relist()
            else:
                self._watch(self._resource_version)
        except GoneError:
            self._log.info("watch expired, relisting", extra={"resource": str(self._resource)})
            self._resource_version = None
            return 0.0
        except KubeApiError as error:
            self._failures += 1
            self._resource_version = None
            delay = self._backoff.delay(self._failures)
            self._log.warning(
                "list/watch failed, relisting after backoff",
                extra={"resource": str(self._resource), "error": str(error), "delay": delay},
            )
            return delay
        return 0.0

    def run(self, stop: threading.Event, *, wait: Waiter = _wait_on_stop) -> None:
        """Call `sync_once` until `stop` is set, waiting as it asks with `wait(delay, stop)`."""
        while not stop.is_set():
            delay = self.sync_once()
            if delay > 0 and not stop.is_set():
                wait(delay, stop)

    # -- internals ---------------------------------------------------------------------------

    def _relist(self) -> None:
        with collector_paused():
            self._relist_paused()

    def _relist_paused(self) -> None:
        if self._page_size is not None and isinstance(self._kube, PagedLister):
            self._relist_pages(self._kube, self._page_size)
            return
        listed = self._kube.list(
            self._resource, namespace=self._namespace, label_selector=self._label_selector
        )
        self.relists += 1
        transform = self._transform
        items = listed.items if transform is None else [transform(obj) for obj in listed.items]
        fresh = {object_key(obj): obj for obj in items}
        keep = self._keep
        kept = dict(fresh) if keep is None else {k: keep(obj) for k, obj in fresh.items()}
        with self._lock:
            old = self._cache
            self._cache = kept
        for key, obj in old.items():
            if key not in fresh:
                self._emit_delete(obj)
        for key, obj in fresh.items():
            previous = old.get(key)
            if previous is None:
                self._emit_add(obj)
            elif _rv(previous) != _rv(obj):
                self._emit_update(previous, obj)
        self._resource_version = listed.resource_version
        self._failures = 0
        self._synced.set()

    def _relist_pages(self, kube: PagedLister, limit: int) -> None:
        """Relist chunk by chunk: only one chunk of whole objects is alive at a time."""
        pages = kube.list_pages(
            self._resource,
            namespace=self._namespace,
            label_selector=self._label_selector,
            limit=limit,
        )
        self.relists += 1
        seen: set[_Key] = set()
        resource_version = ""
        for page in pages:
            for received in page.items:
                obj = received if self._transform is None else self._transform(received)
                key = object_key(obj)
                seen.add(key)
                with self._lock:
                    previous = self._cache.get(key)
                    self._cache[key] = obj if self._keep is None else self._keep(obj)
                if previous is None:
                    self._emit_add(obj)
                elif _rv(previous) != _rv(obj):
                    self._emit_update(previous, obj)
            resource_version = page.resource_version
        with self._lock:
            gone = [(key, obj) for key, obj in self._cache.items() if key not in seen]
            for key, _ in gone:
                del self._cache[key]
        for _, obj in gone:
            self._emit_delete(obj)
        self._resource_version = resource_version
        self._failures = 0
        self._synced.set()

    def _watch(self, resource_version: str) -> None:
        stream = self._kube.watch(
            self._resource,
            namespace=self._namespace,
            resource_version=resource_version,
            label_selector=self._label_selector,
            timeout=self._watch_timeout,
        )
        for event in stream:
            self._apply(event)

    def _apply(self, event: WatchEvent) -> None:
        if event.resource_version:
            self._resource_version = event.resource_version
        if event.type == WatchEventType.BOOKMARK:
            return
        if self._transform is not None:
            event = WatchEvent(event.type, self._transform(event.object))
        key = object_key(event.object)
        with self._lock:
            previous = self._cache.get(key)
            if event.type == WatchEventType.DELETED:
                self._cache.pop(key, None)
            else:
                self._cache[key] = event.object if self._keep is None else self._keep(event.object)
        if event.type == WatchEventType.DELETED:
            self._emit_delete(event.object)
        elif previous is None:
            self._emit_add(event.object)
        elif _rv(previous) != _rv(event.object):
            self._emit_update(previous, event.object)

    def _emit_add(self, obj: JsonObject) -> None:
        if self._on_add is not None:
            self._on_add(self._copy(obj))

    def _emit_update(self, old: JsonObject, new: JsonObject) -> None:
        if self._on_update is not None:
            self._on_update(self._copy(old), self._copy(new))

    def _emit_delete(self, obj: JsonObject) -> None:
        if self._on_delete is not None:
            self._on_delete(self._copy(obj))


def _same(obj: JsonObject) -> JsonObject:
    return obj


def _rv(obj: JsonObject) -> str:
    return str(obj.get("metadata", {}).get("resourceVersion") or "")
