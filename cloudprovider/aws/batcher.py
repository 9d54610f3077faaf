"""Batching of identical concurrent requests (Karpenter's ``pkg/batcher``), deterministic.

:class:`Batcher` groups submitted items into buckets by a hash; a bucket is executed once it has
been idle for :data:`CREATE_FLEET_IDLE` (no new item), is :data:`CREATE_FLEET_MAX_WINDOW` old, or
holds ``max_items``. Nothing here sleeps: ``flush`` executes the due buckets at the injected
clock's time, ``next_due`` says when the next one is due. :class:`BatcherThread` is the only
thread (the real driver): it waits on an event until the next deadline and flushes. Tests call
``flush`` with a fake clock.

:class:`FleetBatcher` merges identical CreateFleet requests (same overrides, capacity type,
launch templates and NodePool tags, differing only in the NodeClaim) into one call with
``TotalTargetCapacity = N``; each instance goes to one waiter and is then tagged with its
NodeClaim's name; surplus waiters get an error outcome; API errors go to every waiter. With a
zero window (:meth:`FleetBatcher.inline`, what ``jointer simulate`` uses) a request is executed on
the submitting thread at once: the simulation runs one reconcile at a time, so no two launches
are ever in flight together and a window could only block the only thread.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Final, Generic, TypeVar

from cloudprovider.aws.cache import Timer
from cloudprovider.aws.instance import FleetError, FleetOutcome, FleetRequest, InstanceProvider
from cloudprovider.aws.tags import TAG_NAME, TAG_NODECLAIM

__all__ = [
    "CREATE_FLEET_IDLE",
    "CREATE_FLEET_MAX_ITEMS",
    "CREATE_FLEET_MAX_WINDOW",
    "Batcher",
    "BatcherThread",
    "FleetBatcher",
]

# Karpenter's CreateFleet batcher windows: long enough to catch a provisioning burst, short
# enough not to delay a single launch noticeably.
CREATE_FLEET_IDLE: Final = timedelta(milliseconds=35)
CREATE_FLEET_MAX_WINDOW: Final = timedelta(seconds=1)
CREATE_FLEET_MAX_ITEMS: Final = 1000

In = TypeVar("In")
Out = TypeVar("Out")


@dataclass(slots=True)
class _Bucket(Generic[In, Out]):
    opened: float
    last_added: float
    items: list[In] = field(default_factory=list)
    futures: list[Future[Out]] = field(default_factory=list)


@dataclass(slots=True, kw_only=True)
class Batcher(Generic[In, Out]):
    """Buckets items by ``hasher`` and runs ``executor`` once per due bucket.

    Attributes:
        executor: runs one bucket; returns one result per item, in order.
        hasher: the bucket key of an item.
        clock: monotonic seconds.
        idle: a bucket is due this long after its last item.
        max_window: a bucket is due this long after its first item.
        max_items: a bucket is due when it holds this many items.
    """

    executor: Callable[[list[In]], Sequence[Out]]
    hasher: Callable[[In], Hashable]
    clock: Timer = time.monotonic
    idle: timedelta = CREATE_FLEET_IDLE
    max_window: timedelta = CREATE_FLEET_MAX_WINDOW
    max_items: int = CREATE_FLEET_MAX_ITEMS
    on_submit: Callable[[], None] = lambda: None
    _buckets: dict[Hashable, _Bucket[In, Out]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def submit(self, item: In) -> Future[Out]:
        """Queue ``item``; its result arrives on the returned future after a flush."""
        future: Future[Out] = Future()
        now = self.clock()
        with self._lock:
            key = self.hasher(item)
            bucket = self._buckets.setdefault(key, _Bucket(opened=now, last_added=now))
            bucket.items.append(item)
            bucket.futures.append(future)
            bucket.last_added = now
        self.on_submit()
        return future

    def _deadline(self, bucket: _Bucket[In, Out]) -> float:
        if len(bucket.items) >= self.max_items:
            return bucket.last_added
        return min(
            bucket.last_added + self.idle.total_seconds(),
            bucket.opened + self.max_window.total_seconds(),
        )

    def next_due(self) -> float | None:
        """Seconds until the next bucket is due (0 when one is due now), None when idle."""
        now = self.clock()
        with self._lock:
            deadlines = [self._deadline(b) for b in self._buckets.values()]
        return max(0.0, min(deadlines) - now) if deadlines else None

    def flush(self, *, force: bool = False) -> int:
        """Execute every due bucket (every bucket when ``force``); return how many ran."""
        now = self.clock()
        with self._lock:
            due = [
                key
                for key, bucket in self._buckets.items()
                if force or self._deadline(bucket) <= now
            ]
            buckets = [self._buckets.pop(key) for key in due]
        for bucket in buckets:
            try:
                results = self.executor(bucket.items)
            except Exception as error:  # noqa: BLE001 -- handed to every waiter, not swallowed
                for future in bucket.futures:
                    future.set_exception(error)
                continue
            for future, result in zip(bucket.futures, results, strict=True):
                future.set_result(result)
        return len(buckets)


@dataclass(slots=True)
class BatcherThread:
    """Drives a Batcher in the background: wait until the next deadline, flush, repeat."""

    batcher: Batcher[FleetRequest, FleetOutcome]
    _wake: threading.Event = field(default_factory=threading.Event)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the driver thread."""
        self.batcher.on_submit = self._wake.set
        self._thread = threading.Thread(target=self._run, name="createfleet-batcher", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Flush what is queued and stop."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
        self.batcher.flush(force=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.batcher.next_due())
            self._wake.clear()
            self.batcher.flush()


def _bucket_key(request: FleetRequest) -> str:
    shared = {
        "capacity_type": request.capacity_type,
        "context": request.context,
        "overrides": [
            (o.instance_type, o.zone, o.subnet_id, o.image_id, o.launch_template, o.price)
            for o in request.overrides
        ],
        "tags": {k: v for k, v in request.tags.items() if k not in (TAG_NODECLAIM, TAG_NAME)},
    }
    return hashlib.sha256(json.dumps(shared, sort_keys=True).encode()).hexdigest()


@dataclass(slots=True, kw_only=True)
class FleetBatcher:
    """Merges identical CreateFleet requests into one call (see the module docstring).

    Attributes:
        instances: launches (and tags) instances.
        clock: monotonic seconds.
        idle: a batch is launched this long after its last request.
        max_window: a batch is launched at the latest this long after its first request.
    """

    instances: InstanceProvider
    clock: Timer = time.monotonic
    idle: timedelta = CREATE_FLEET_IDLE
    max_window: timedelta = CREATE_FLEET_MAX_WINDOW
    batcher: Batcher[FleetRequest, FleetOutcome] = field(init=False)

    def __post_init__(self) -> None:
        self.batcher = Batcher(
            executor=self._execute,
            hasher=_bucket_key,
            clock=self.clock,
            idle=self.idle,
            max_window=self.max_window,
        )

    @classmethod
    def inline(cls, instances: InstanceProvider, clock: Timer = time.monotonic) -> FleetBatcher:
        """A zero window: each request launches on the submitting thread (no driver thread)."""
        return cls(instances=instances, clock=clock, idle=timedelta(0), max_window=timedelta(0))

    @property
    def is_inline(self) -> bool:
        """Whether requests launch at once, on the submitting thread."""
        return self.idle <= timedelta(0) and self.max_window <= timedelta(0)

    def submit(self, request: FleetRequest) -> Future[FleetOutcome]:
        """Queue one NodeClaim's request (launched before returning when inline)."""
        future = self.batcher.submit(request)
        if self.is_inline:
            self.batcher.flush()
        return future

    def _execute(self, requests: list[FleetRequest]) -> list[FleetOutcome]:
        if len(requests) == 1:
            return [self.instances.launch(requests[0])]
        first = requests[0]
        shared_tags = {k: v for k, v in first.tags.items() if k not in (TAG_NODECLAIM, TAG_NAME)}
        merged = replace(
            first,
            nodeclaim=",".join(r.nodeclaim for r in requests)[:200],
            nodeclaim_uid=hashlib.sha256(
                "/".join(r.nodeclaim_uid for r in requests).encode()
            ).hexdigest(),
            tags=shared_tags,
        )
        outcome = self.instances.launch(merged, count=len(requests))
        results: list[FleetOutcome] = []
        instances = list(outcome.instances)
        for request in requests:
            if not instances:
                results.append(
                    FleetOutcome(
                        errors=outcome.errors
                        or (
                            FleetError(
                                code="",
                                message="too few instances returned",
                                capacity_type=request.capacity_type,
                            ),
                        )
                    )
                )
                continue
            instance = instances.pop(0)
            claim_tags = {TAG_NODECLAIM: request.nodeclaim, TAG_NAME: request.nodeclaim}
            self.instances.tag(instance.id, claim_tags)
            results.append(
                FleetOutcome(
                    instances=(replace(instance, tags={**instance.tags, **claim_tags}),),
                    errors=outcome.errors,
                )
            )
        return results
