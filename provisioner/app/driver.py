"""The real driver: informers feed the manager, a worker pool runs the reconcilers.

What the simulation driver does in virtual time, this one does with threads, as
controller-runtime does for Karpenter:

* **Start.** ``controllers.start()`` lists every tracked resource into the cache and returns the
  initial work (retried with backoff while the API is unreachable). Then one
  :class:`~provisioner.kube.informer.Informer` per watched resource lists and watches, and every
  add, update and delete goes to ``controllers.handle``, whose work items are queued. Informers
  start after the manager's own lists, so the cache only ever moves forward.
* **The work queue** (:class:`WorkQueue`, controller-runtime's ``workqueue`` semantics): an item
  (reconciler name, request) queued while already queued runs once; an item queued while it runs
  runs again after it, never concurrently with itself. ``Result.requeue_after`` queues the item
  again that long later on the injected clock (an earlier event runs it sooner, and its own
  result then says when next). A reconciler that raises is retried after an exponential,
  per-item backoff (1 s doubling to 300 s, operatorpkg's "reasonable" rate limiter); success
  resets it. Controllers are served round robin, optionally with a concurrency cap each.
* **Workers.** ``workers`` threads take items, so at most that many reconciles run at once.
* **Discovery.** Optional CRDs (pod-group kinds, NodeOverlays) may be installed after the start:
  given ``discover``, the ``crd.discovery`` reconciler asks it every ``rediscover_every`` (on the
  injected clock, through the work queue: no timer thread) which of them the API serves now, and
  an informer is added for each new one (its initial list reaches the manager as adds).
* **Stop.** :meth:`Driver.stop` stops taking work, drops the queue and waits for the in-flight
  reconciles up to a bound; informer callbacks are ignored from then on.

Tests (and anyone who wants determinism) use the **step mode** instead of threads:
:meth:`Driver.start_sync`, :meth:`Driver.run_pending` and :meth:`Driver.advance` run everything
on the calling thread, with informers over ``InMemoryKube`` (``watch_timeout=None`` ends each
watch once caught up) and a :class:`SteppableClock`.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import threading
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Final, Protocol

from prometheus_client import CollectorRegistry
from prometheus_client import Counter as PromCounter
from prometheus_client import Histogram as PromHistogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from structlog.typing import FilteringBoundLogger

from provisioner.kube.errors import KubeApiError
from provisioner.kube.informer import (
    DEFAULT_WATCH_TIMEOUT,
    LIST_PAGE_SIZE,
    BackoffPolicy,
    ExponentialBackoff,
    Informer,
    last_state,
    strip_managed_fields,
)
from provisioner.kube.protocol import JsonObject, KubeClient, WatchEvent, WatchEventType
from provisioner.kube.resource import Resource
from provisioner.runtime.clock import Clock
from provisioner.runtime.reconciler import Reconciler, Request, Result

__all__ = [
    "DEFAULT_REDISCOVERY",
    "DEFAULT_WORKERS",
    "DISCOVERY",
    "Controllers",
    "Driver",
    "RateLimiter",
    "SteppableClock",
    "WorkKey",
    "WorkQueue",
    "format_duration",
]

DEFAULT_WORKERS: Final = 10
DEFAULT_REDISCOVERY: Final = timedelta(minutes=5)
"""How often the served optional resources are probed again."""
DISCOVERY: Final = "crd.discovery"
"""The name of the driver's own discovery reconciler."""
"""Reconciles running at once (controller-runtime's MaxConcurrentReconciles, shared)."""
MAX_WAIT_SECONDS: Final = 30.0
"""Longest an idle worker blocks before looking at the clock again."""
RATE_LIMIT_BASE: Final = timedelta(seconds=1)
RATE_LIMIT_CAP: Final = timedelta(seconds=300)

WorkKey = tuple[str, Request]
"""A queued item: the reconciler's name and the request."""
WorkItem = tuple[Reconciler, Request]
Waiter = Callable[[float, threading.Event], object]
Discover = Callable[[], Iterable[Resource]]
"""The optional resources the API serves now."""


class Controllers(Protocol):
    """A controller set as a driver runs it (``provisioner.controllers.manager.Manager``)."""

    @property
    def reconcilers(self) -> tuple[Reconciler, ...]:
        """Every reconciler (names are unique)."""
        ...

    def start(self) -> list[WorkItem]:
        """List everything into the cache; return the initial work."""
        ...

    def handle(self, resource: Resource, event: WatchEvent) -> list[WorkItem]:
        """Apply a watch event to the cache; return the work it triggers."""
        ...


class SteppableClock(Clock, Protocol):
    """A clock the step mode can move (``provisioner.runtime.clock.FakeClock``)."""

    def step(self, delta: timedelta) -> object:
        """Move forward by ``delta``."""
        ...


@dataclass(frozen=True, slots=True)
class RateLimiter:
    """Per-item exponential backoff after failures: ``base * 2 ** (failures - 1)``, capped."""

    base: timedelta = RATE_LIMIT_BASE
    cap: timedelta = RATE_LIMIT_CAP

    def delay(self, failures: int) -> timedelta:
        """The wait after ``failures`` (>= 1) consecutive failures of one item."""
        if failures <= 0:
            return timedelta(0)
        seconds = self.base.total_seconds() * 2.0 ** min(failures - 1, 64)
        return timedelta(seconds=min(seconds, self.cap.total_seconds()))


def _wait_on_stop(delay: float, stop: threading.Event) -> object:
    return stop.wait(delay)


class WorkQueue:
    """A delaying, de-duplicating, rate-limited work queue (thread-safe).

    Args:
        clock: due times are read from ``clock.monotonic()``.
        limits: at most this many items of a reconciler (by name) run at once; unlisted
            reconcilers are limited only by the number of workers.
        rate_limiter: the backoff after failures.
    """

    def __init__(
        self,
        *,
        clock: Clock,
        limits: Mapping[str, int] | None = None,
        rate_limiter: RateLimiter | None = None,
    ) -> None:
        self._clock = clock
        self._limits = dict(limits or {})
        self._rate_limiter = rate_limiter or RateLimiter()
        self._cond = threading.Condition(threading.Lock())
        self._ready: dict[str, deque[Request]] = {}
        self._order: list[str] = []
        self._next = 0
        self._dirty: set[WorkKey] = set()
        self._processing: set[WorkKey] = set()
        self._running: Counter[str] = Counter()
        self._due: dict[WorkKey, float] = {}
        self._heap: list[tuple[float, int, WorkKey]] = []
        self._sequence = itertools.count()
        self._failures: dict[WorkKey, int] = {}
        self._shutdown = False
        self.adds = 0
        """Items added (immediately or when their delay ran out)."""
        self.retries = 0
        """Items re-added after a failure."""

    # -- adding ------------------------------------------------------------------------------

    def add(self, key: WorkKey) -> None:
        """Queue ``key`` now (a pending delayed add of it is dropped: its run decides anew)."""
        with self._cond:
            self._due.pop(key, None)
            self._add_locked(key)

    def add_after(self, key: WorkKey, delay: timedelta) -> None:
        """Queue ``key`` after ``delay`` (the earliest of several delays wins)."""
        if delay <= timedelta(0):
            self.add(key)
            return
        with self._cond:
            if self._shutdown or key in self._dirty:
                return  # it runs soon anyway, and that run says when it wants to run next
            due = self._clock.monotonic() + delay.total_seconds()
            current = self._due.get(key)
            if current is not None and current <= due:
                return
            self._due[key] = due
            heapq.heappush(self._heap, (due, next(self._sequence), key))
            self._cond.notify()

    def add_rate_limited(self, key: WorkKey) -> timedelta:
        """Queue ``key`` after its failure backoff; return the backoff."""
        with self._cond:
            failures = self._failures.get(key, 0) + 1
            self._failures[key] = failures
            self.retries += 1
        delay = self._rate_limiter.delay(failures)
        self.add_after(key, delay)
        return delay

    def forget(self, key: WorkKey) -> None:
        """Reset the failure count of ``key``."""
        with self._cond:
            self._failures.pop(key, None)

    def failures(self, key: WorkKey) -> int:
        """Consecutive failures of ``key``."""
        with self._cond:
            return self._failures.get(key, 0)

    # -- taking ------------------------------------------------------------------------------

    def get(self) -> WorkKey | None:
        """Block until an item may run and return it; ``None`` once shut down."""
        with self._cond:
            while not self._shutdown:
                now = self._clock.monotonic()
                self._promote_locked(now)
                key = self._pop_locked()
                if key is not None:
                    return key
                due = self._next_due_locked()
                timeout = None if due is None else min(max(due - now, 0.0), MAX_WAIT_SECONDS)
                self._cond.wait(timeout)
            return None

    def try_get(self) -> WorkKey | None:
        """Return an item that may run now, or ``None`` (never blocks)."""
        with self._cond:
            if self._shutdown:
                return None
            self._promote_locked(self._clock.monotonic())
            return self._pop_locked()

    def done(self, key: WorkKey) -> None:
        """Mark ``key`` finished; if it was queued meanwhile, it becomes ready again."""
        with self._cond:
            self._processing.discard(key)
            self._running[key[0]] -= 1
            if key in self._dirty and not self._shutdown:
                self._ready_queue(key[0]).append(key[1])
            self._cond.notify_all()

    def shutdown(self) -> None:
        """Stop handing out items; waiting workers get ``None``."""
        with self._cond:
            self._shutdown = True
            self._cond.notify_all()

    def wakeup(self) -> None:
        """Make waiting workers look at the clock again (after a fake clock moved)."""
        with self._cond:
            self._cond.notify_all()

    # -- reading -----------------------------------------------------------------------------

    def next_due(self) -> float | None:
        """The monotonic time of the earliest delayed item, or ``None``."""
        with self._cond:
            return self._next_due_locked()

    def depth(self) -> dict[str, int]:
        """Ready items per reconciler."""
        with self._cond:
            return {name: len(queue) for name, queue in self._ready.items()}

    def running(self) -> dict[str, int]:
        """Items being processed per reconciler."""
        with self._cond:
            return {name: count for name, count in self._running.items() if count}

    def __len__(self) -> int:
        with self._cond:
            return sum(len(queue) for queue in self._ready.values())

    # -- internals (the lock is held) ----------------------------------------------------------

    def _ready_queue(self, name: str) -> deque[Request]:
        queue = self._ready.get(name)
        if queue is None:
            queue = self._ready[name] = deque()
            self._order.append(name)
        return queue

    def _add_locked(self, key: WorkKey) -> None:
        if self._shutdown or key in self._dirty:
            return
        self.adds += 1
        self._dirty.add(key)
        if key in self._processing:
            return  # done() makes it ready again
        self._ready_queue(key[0]).append(key[1])
        self._cond.notify()

    def _promote_locked(self, now: float) -> None:
        while self._heap and self._heap[0][0] <= now:
            due, _, key = heapq.heappop(self._heap)
            if self._due.get(key) != due:
                continue  # superseded by an earlier delay or an immediate add
            del self._due[key]
            self._add_locked(key)

    def _next_due_locked(self) -> float | None:
        while self._heap and self._due.get(self._heap[0][2]) != self._heap[0][0]:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def _pop_locked(self) -> WorkKey | None:
        count = len(self._order)
        for offset in range(count):
            name = self._order[(self._next + offset) % count]
            queue = self._ready[name]
            if not queue or self._running[name] >= self._limits.get(name, math.inf):
                continue
            key = (name, queue.popleft())
            self._dirty.discard(key)
            self._processing.add(key)
            self._running[name] += 1
            self._next = (self._next + offset + 1) % count
            return key
        return None


class _DriverMetrics:
    """controller-runtime's reconcile and work queue metrics, on the injected registry."""

    def __init__(self, registry: CollectorRegistry, queue: WorkQueue) -> None:
        self.reconciles = PromCounter(
            "controller_runtime_reconcile_total",
            "Total number of reconciliations per controller",
            ["controller", "result"],
            registry=registry,
        )
        self.errors = PromCounter(
            "controller_runtime_reconcile_errors_total",
            "Total number of reconciliation errors per controller",
            ["controller"],
            registry=registry,
        )
        self.duration = PromHistogram(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            ["controller"],
            registry=registry,
        )
        registry.register(_QueueCollector(queue))


class _QueueCollector:
    """``workqueue_depth`` and ``controller_runtime_active_workers``, read at scrape time."""

    def __init__(self, queue: WorkQueue) -> None:
        self._queue = queue

    def describe(self) -> Iterable[Metric]:
        return self._families({}, {})

    def collect(self) -> Iterable[Metric]:
        return self._families(self._queue.depth(), self._queue.running())

    @staticmethod
    def _families(depth: Mapping[str, int], running: Mapping[str, int]) -> list[Metric]:
        queued = GaugeMetricFamily(
            "workqueue_depth", "Current depth of workqueue", labels=["name", "controller"]
        )
        for name, value in sorted(depth.items()):
            queued.add_metric([name, name], value)
        active = GaugeMetricFamily(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            labels=["controller"],
        )
        for name, value in sorted(running.items()):
            active.add_metric([name], value)
        return [queued, active]


class Driver:
    """Runs a controller set on informers and a worker pool.

    Args:
        controllers: the controller set (the manager, possibly with extra reconcilers).
        kube: the API the informers list and watch.
        clock: the injected clock (requeue and backoff times).
        resources: the resources to inform on (each change goes to ``controllers.handle``).
        logger: where reconcile errors and the start are logged.
        workers: how many reconciles may run at once.
        limits: per-reconciler concurrency caps, by name.
        rate_limiter: backoff of failing items.
        watch_timeout: seconds per watch request (``None``: until caught up, for step mode).
        informer_backoff: the informers' relist backoff (also used while the start fails).
        informer_logger: the informers' (stdlib) logger.
        registry: where the driver's own metrics go (none if ``None``).
        wait: how background threads wait, ``wait(seconds, stop)``.
        discover: which optional resources the API serves now; each new one gets an informer.
        rediscover_every: how often ``discover`` is asked again.
    """

    def __init__(
        self,
        controllers: Controllers,
        kube: KubeClient,
        *,
        clock: Clock,
        resources: Sequence[Resource],
        logger: FilteringBoundLogger,
        workers: int = DEFAULT_WORKERS,
        limits: Mapping[str, int] | None = None,
        rate_limiter: RateLimiter | None = None,
        watch_timeout: float | None = DEFAULT_WATCH_TIMEOUT,
        informer_backoff: BackoffPolicy | None = None,
        informer_logger: logging.Logger | None = None,
        registry: CollectorRegistry | None = None,
        wait: Waiter = _wait_on_stop,
        discover: Discover | None = None,
        rediscover_every: timedelta = DEFAULT_REDISCOVERY,
    ) -> None:
        if workers < 1:
            raise ValueError("a driver needs at least one worker")
        self._controllers = controllers
        self._clock = clock
        self._log = logger
        self._workers_wanted = workers
        self._wait = wait
        self._backoff: BackoffPolicy = informer_backoff or ExponentialBackoff()
        self._by_name: dict[str, Reconciler] = {}
        for reconciler in controllers.reconcilers:
            if reconciler.name in self._by_name:
                raise ValueError(f"two reconcilers are named {reconciler.name!r}")
            self._by_name[reconciler.name] = reconciler
        self._discovery: _Discovery | None = None
        if discover is not None:
            if DISCOVERY in self._by_name:
                raise ValueError(f"two reconcilers are named {DISCOVERY!r}")
            self._discovery = _Discovery(self, discover, rediscover_every)
            self._by_name[DISCOVERY] = self._discovery
        self.queue = WorkQueue(clock=clock, limits=limits, rate_limiter=rate_limiter)
        self._kube = kube
        self._watch_timeout = watch_timeout
        self._informer_logger = informer_logger
        self._informers_lock = threading.Lock()
        self._informers = [self._informer(resource) for resource in dict.fromkeys(resources)]
        self._metrics = _DriverMetrics(registry, self.queue) if registry is not None else None
        self._stop = threading.Event()
        self._started = threading.Event()
        self._threads: list[threading.Thread] = []
        self._workers: list[threading.Thread] = []
        self._boot: threading.Thread | None = None
        self._counts = threading.Lock()
        self.reconciles = 0
        """Reconciles run (successful or not)."""
        self.errors = 0
        """Reconciles that raised."""

    def _informer(self, resource: Resource) -> Informer:
        return Informer(
            self._kube,
            resource,
            on_add=self._on_add(resource),
            on_update=self._on_update(resource),
            on_delete=self._on_delete(resource),
            backoff=self._backoff,
            watch_timeout=self._watch_timeout,
            logger=self._informer_logger,
            # the cache builds its own models from what it is given and changes nothing;
            # the informer keeps only what a deletion's consumers read
            transform=strip_managed_fields,
            copies=False,
            keep=last_state(resource),
            page_size=LIST_PAGE_SIZE,
        )

    # -- state -------------------------------------------------------------------------------

    @property
    def informers(self) -> tuple[Informer, ...]:
        """The informers, one per resource."""
        with self._informers_lock:
            return tuple(self._informers)

    @property
    def resources(self) -> tuple[Resource, ...]:
        """The resources informed on."""
        return tuple(informer.resource for informer in self.informers)

    def watch(self, resource: Resource) -> bool:
        """Inform on ``resource`` from now on (its first list delivers every object as an add).

        In threaded mode a started driver runs the new informer at once; in step mode the next
        :meth:`pump` lists it.

        Returns:
            Whether it was new.
        """
        with self._informers_lock:
            if any(informer.resource == resource for informer in self._informers):
                return False
            informer = self._informer(resource)
            self._informers.append(informer)
            threaded = self._boot is not None and self._started.is_set()
        self._log.info("watching resource", resource=str(resource))
        if threaded and not self._stop.is_set():
            self._spawn(f"informer-{resource}", self._run_informer(informer))
        return True

    @property
    def started(self) -> bool:
        """Whether the controllers' start (initial lists) succeeded."""
        return self._started.is_set()

    @property
    def synced(self) -> bool:
        """Whether the controllers started and every informer finished its first list."""
        return self.started and all(informer.has_synced for informer in self.informers)

    @property
    def stopping(self) -> bool:
        """Whether :meth:`stop` was called."""
        return self._stop.is_set()

    # -- threaded mode -----------------------------------------------------------------------

    def start(self) -> None:
        """Start in the background: the manager's lists, then informers and workers.

        Returns at once; the start is retried with backoff while the API fails.
        """
        if self._boot is not None:
            raise RuntimeError("the driver was started already")
        self._boot = threading.Thread(target=self._run_boot, name="driver-start", daemon=True)
        self._boot.start()

    def stop(self, timeout: timedelta) -> bool:
        """Stop taking work and wait up to ``timeout`` for in-flight reconciles.

        Returns:
            Whether every in-flight reconcile finished in time.
        """
        # the queue refuses work before anyone sees the driver stopping
        self.queue.shutdown()
        self._stop.set()
        deadline = self._clock.monotonic() + timeout.total_seconds()
        threads = [self._boot] if self._boot is not None else []
        for thread in [*threads, *self._workers]:
            thread.join(max(0.0, deadline - self._clock.monotonic()))
        busy = self.queue.running()
        if busy:
            self._log.warning(
                "in-flight reconciles did not finish before the shutdown deadline",
                controllers=sorted(busy),
                timeout=format_duration(timeout),
            )
        return not busy

    def _run_boot(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                work = self._controllers.start()
            except Exception as error:  # noqa: BLE001 - the start is retried until it works
                failures += 1
                delay = self._backoff.delay(failures)
                self._log.error(
                    "failed listing cluster state",
                    error=_describe(error),
                    **{"retry-after": format_duration(timedelta(seconds=delay))},
                )
                self._wait(delay, self._stop)
                continue
            self._queue_start(work)
            break
        if self._stop.is_set():
            return
        with self._informers_lock:
            self._started.set()
            informers = list(self._informers)
        for informer in informers:
            self._spawn(f"informer-{informer.resource}", self._run_informer(informer))
        self._log.info("starting workers", **{"worker count": self._workers_wanted})
        for index in range(self._workers_wanted):
            self._workers.append(self._spawn(f"worker-{index}", self._run_worker))

    def _spawn(self, name: str, target: Callable[[], None]) -> threading.Thread:
        thread = threading.Thread(target=target, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()
        return thread

    def _run_informer(self, informer: Informer) -> Callable[[], None]:
        def run() -> None:
            informer.run(self._stop, wait=self._wait)

        return run

    def _run_worker(self) -> None:
        while (key := self.queue.get()) is not None:
            self._process(key)

    # -- step mode ---------------------------------------------------------------------------

    def start_sync(self) -> None:
        """Step mode: the manager's lists and each informer's first list, on this thread."""
        self._queue_start(self._controllers.start())
        self._started.set()
        self.pump()

    def pump(self) -> None:
        """Step mode: one list or watch round per informer (delivers what changed)."""
        for informer in self.informers:
            informer.sync_once()

    def run_pending(self, *, max_items: int = 10_000) -> int:
        """Step mode: run every item due now, pumping informers in between, until none is left.

        Returns:
            How many reconciles ran.

        Raises:
            RuntimeError: more than ``max_items`` reconciles ran (the controllers do not settle).
        """
        count = 0
        while True:
            self.pump()
            key = self.queue.try_get()
            if key is None:
                return count
            self._process(key)
            count += 1
            if count > max_items:
                raise RuntimeError(f"the controllers did not settle within {max_items} reconciles")

    def advance(self, clock: SteppableClock, delta: timedelta) -> int:
        """Step mode: move ``clock`` forward by ``delta``, running every item as it falls due.

        Returns:
            How many reconciles ran.
        """
        target = clock.monotonic() + delta.total_seconds()
        count = self.run_pending()
        while (due := self.queue.next_due()) is not None and due <= target:
            _step_to(clock, due)
            count += self.run_pending()
        _step_to(clock, target)
        return count + self.run_pending()

    # -- shared ------------------------------------------------------------------------------

    def _queue_start(self, work: Iterable[WorkItem]) -> None:
        self._queue_work(work)
        if self._discovery is not None:
            self.queue.add((DISCOVERY, Request()))

    def _queue_work(self, work: Iterable[WorkItem]) -> None:
        for reconciler, request in work:
            self.queue.add((reconciler.name, request))

    def _deliver(self, resource: Resource, event: WatchEvent) -> None:
        if self._stop.is_set():
            return
        if "apiVersion" not in event.object:
            # list responses leave each item's apiVersion/kind out; the cache keys on them
            stamped = {"apiVersion": resource.api_version, "kind": resource.kind, **event.object}
            event = WatchEvent(event.type, stamped)
        try:
            work = self._controllers.handle(resource, event)
        except Exception as error:  # noqa: BLE001 - one bad event must not stop the informer
            self._log.error(
                "failed handling watch event",
                resource=str(resource),
                type=str(event.type),
                error=_describe(error),
                exc_info=error,
            )
            return
        self._queue_work(work)

    def _on_add(self, resource: Resource) -> Callable[[JsonObject], None]:
        return lambda obj: self._deliver(resource, WatchEvent(WatchEventType.ADDED, obj))

    def _on_update(self, resource: Resource) -> Callable[[JsonObject, JsonObject], None]:
        return lambda _old, new: self._deliver(resource, WatchEvent(WatchEventType.MODIFIED, new))

    def _on_delete(self, resource: Resource) -> Callable[[JsonObject], None]:
        return lambda obj: self._deliver(resource, WatchEvent(WatchEventType.DELETED, obj))

    def _process(self, key: WorkKey) -> None:
        name, request = key
        reconciler = self._by_name[name]
        began = self._clock.monotonic()
        try:
            result = reconciler.reconcile(request)
        except Exception as error:  # noqa: BLE001 - a failed reconcile is retried, never fatal
            self._failed(key, error)
        else:
            self._succeeded(key, result)
        finally:
            with self._counts:
                self.reconciles += 1
            if self._metrics is not None:
                self._metrics.duration.labels(controller=name).observe(
                    max(0.0, self._clock.monotonic() - began)
                )
            self.queue.done(key)

    def _succeeded(self, key: WorkKey, result: Result) -> None:
        self.queue.forget(key)
        requeue = result.requeue_after
        if requeue is not None:
            self.queue.add_after(key, requeue)
        if self._metrics is not None:
            outcome = "success" if requeue is None else "requeue_after"
            self._metrics.reconciles.labels(controller=key[0], result=outcome).inc()

    def _failed(self, key: WorkKey, error: Exception) -> None:
        with self._counts:
            self.errors += 1
        delay = self.queue.add_rate_limited(key)
        name, request = key
        fields: dict[str, object] = {"controller": name}
        if request.namespace:
            fields["namespace"] = request.namespace
        if request.name:
            fields["name"] = request.name
        if not isinstance(error, KubeApiError):
            fields["exc_info"] = error  # not an API answer: likely a bug, keep the traceback
        self._log.error(
            "Reconciler error",
            error=_describe(error),
            **{"retry-after": format_duration(delay)},
            **fields,
        )
        if self._metrics is not None:
            self._metrics.errors.labels(controller=name).inc()
            self._metrics.reconciles.labels(controller=name, result="error").inc()


class _Discovery:
    """The ``crd.discovery`` reconciler: asks what is served and watches what is new."""

    def __init__(self, driver: Driver, discover: Discover, every: timedelta) -> None:
        self._driver = driver
        self._discover = discover
        self._every = every

    @property
    def name(self) -> str:
        return DISCOVERY

    def reconcile(self, request: Request) -> Result:
        del request
        for resource in self._discover():
            self._driver.watch(resource)
        return Result.after(self._every)


def format_duration(duration: timedelta) -> str:
    """A duration as Karpenter's logs print one: ``1.5s``, ``300s``."""
    return f"{duration.total_seconds():g}s"


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


def _step_to(clock: SteppableClock, when: float) -> None:
    remaining = when - clock.monotonic()
    if remaining > 0:
        clock.step(timedelta(microseconds=math.ceil(remaining * 1e6)))
