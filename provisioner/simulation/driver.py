"""The simulation driver: the production reconcilers run from the discrete-event queue.

What a real driver does with worker pools and timers, this one does in virtual time:

* **Informers.** At start the manager lists what it tracks into its cache and returns the
  initial work; objects of the other watched resources (pod-group kinds) are delivered as
  ``ADDED``. Then every change the in-memory API makes is delivered synchronously (its
  ``subscribe`` hook) to ``manager.handle``, which updates the cache and returns the work the
  event triggers.
* **Work queues.** A request is queued at the current virtual time, de-duplicated per
  controller: a request already queued runs once, at the earlier of its times.
* **Requeues.** ``Result.requeue_after`` queues the request again that many virtual seconds
  later (at least ``min_requeue``, so a reconciler asking to run again at once cannot stall
  virtual time). A reconciler that raises is retried with exponential backoff, as
  controller-runtime's rate limiter does, and the error is logged.
* **Restarts.** :meth:`ControllerDriver.stop` drops every queued request and unsubscribes, as a
  crashed process loses its queues; a new :class:`Controllers` set started afterwards rebuilds
  from the API and the cloud.

A reconciler that raises :class:`ControllerCrash` (a fault a scenario or test injects) makes the
driver stop at once and report the crash to its owner, which restarts the controllers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from provisioner.kube.errors import KubeApiError
from provisioner.kube.memory import InMemoryKube
from provisioner.kube.protocol import WatchEvent, WatchEventType
from provisioner.kube.resource import Resource
from provisioner.runtime.reconciler import Reconciler, Request
from provisioner.simulation.timeline import Timeline

__all__ = [
    "BACKOFF_BASE_SECONDS",
    "BACKOFF_MAX_SECONDS",
    "ControllerCrash",
    "ControllerDriver",
    "Controllers",
    "WorkItem",
]

BACKOFF_BASE_SECONDS: Final = 1.0
BACKOFF_MAX_SECONDS: Final = 300.0
DEFAULT_MIN_REQUEUE: Final = 0.1


class ControllerCrash(RuntimeError):  # noqa: N818 - it is a crash, not an error to handle
    """Raised (by fault injection) inside a reconcile to crash the controller process."""


WorkItem = tuple[Reconciler, Request]
"""A reconciler and one request for it."""


class Controllers(Protocol):
    """A controller set as its manager exposes it to drivers."""

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


@dataclass(slots=True)
class _Failures:
    count: dict[tuple[str, Request], int] = field(default_factory=dict)


class ControllerDriver:
    """Runs one :class:`Controllers` set on a :class:`Timeline` against an in-memory API.

    Args:
        timeline: virtual time and the action queue.
        kube: the in-memory API (its ``subscribe`` hook feeds the controllers).
        logger: receives reconcile errors (``warning``).
        min_requeue: the shortest requeue, in virtual seconds.
        min_requeue_for: a longer shortest requeue for some reconcilers, by name (a poller
            that asks to run again at once would otherwise run ten times a virtual second).
    """

    def __init__(
        self,
        timeline: Timeline,
        kube: InMemoryKube,
        *,
        logger: Any,
        min_requeue: float = DEFAULT_MIN_REQUEUE,
        min_requeue_for: Mapping[str, float] | None = None,
    ) -> None:
        self._timeline = timeline
        self._min_requeue_for = dict(min_requeue_for or {})
        self._kube = kube
        self._logger = logger
        self._min_requeue = min_requeue
        self._generation = 0
        self._controllers: Controllers | None = None
        self._ignored: frozenset[Resource] = frozenset()
        self._unsubscribe: Callable[[], None] | None = None
        self._failures = _Failures()
        self._by_name: dict[str, Reconciler] = {}
        self.reconciles = 0
        self.errors = 0
        self.on_crash: Callable[[ControllerCrash], None] | None = None

    @property
    def running(self) -> bool:
        """Whether a controller set is started."""
        return self._controllers is not None

    def start(
        self,
        controllers: Controllers,
        *,
        ignored: Iterable[Resource] = (),
        extra: Iterable[Resource] = (),
    ) -> None:
        """Start ``controllers``; follow changes of every resource but the ``ignored`` ones.

        ``extra`` resources are not listed by the controllers themselves: their objects are
        delivered as ``ADDED`` once started (an informer's initial list).
        """
        if self._controllers is not None:
            raise RuntimeError("the controllers are already running")
        self._generation += 1
        self._controllers = controllers
        self._failures = _Failures()
        self._by_name = {}
        for reconciler in controllers.reconcilers:
            if reconciler.name in self._by_name:
                raise ValueError(f"two reconcilers are named {reconciler.name!r}")
            self._by_name[reconciler.name] = reconciler
        self._ignored = frozenset(ignored)
        self._queue(controllers.start())
        for resource in extra:
            for obj in self._kube.list(resource).items:
                self._deliver(resource, WatchEvent(WatchEventType.ADDED, obj))
        self._unsubscribe = self._kube.subscribe(self._deliver)

    def stop(self) -> None:
        """Stop the controllers: unsubscribe and forget every queued request."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        generation = self._generation
        self._timeline.cancel(lambda key: _is_reconcile_of(key, generation))
        self._controllers = None
        self._by_name = {}

    def relist(self, retry: float = BACKOFF_BASE_SECONDS) -> None:
        """What informers do after a watch expired (410 Gone): list everything again.

        The controllers' cache is replaced from fresh lists and their initial work queued; a
        list the API fails is retried ``retry`` virtual seconds later (doubling, as the
        reflector backs off).
        """
        controllers = self._controllers
        if controllers is None:
            return
        generation = self._generation
        try:
            work = controllers.start()
        except KubeApiError as error:
            self._logger.warning("relist failed", error=str(error), retry_in=retry)
            delay = min(retry * 2, BACKOFF_MAX_SECONDS)
            self._timeline.after(
                retry,
                lambda: self.relist(delay) if generation == self._generation else None,
                key=("relist", generation),
            )
            return
        self._queue(work)

    def has(self, reconciler: str) -> bool:
        """Whether a reconciler of that name is running."""
        return reconciler in self._by_name

    def enqueue(self, reconciler: str, request: Request, delay: float = 0.0) -> None:
        """Queue ``request`` for the reconciler named ``reconciler`` after ``delay`` seconds."""
        if reconciler not in self._by_name:
            raise KeyError(f"no reconciler named {reconciler!r}")
        generation = self._generation
        key = ("reconcile", generation, reconciler, request)
        self._timeline.after(
            delay, lambda: self._reconcile(generation, reconciler, request), key=key
        )

    # -- internals ---------------------------------------------------------------------------

    def _queue(self, work: Iterable[WorkItem]) -> None:
        for reconciler, request in work:
            self.enqueue(reconciler.name, request)

    def _deliver(self, resource: Resource, event: WatchEvent) -> None:
        controllers = self._controllers
        if controllers is None or resource in self._ignored:
            return
        self._queue(controllers.handle(resource, event))

    def _reconcile(self, generation: int, name: str, request: Request) -> None:
        if generation != self._generation or self._controllers is None:
            return
        reconciler = self._by_name[name]
        self.reconciles += 1
        failure_key = (name, request)
        try:
            result = reconciler.reconcile(request)
        except ControllerCrash as crash:
            if self.on_crash is not None:
                self.on_crash(crash)
            return
        except Exception as error:  # noqa: BLE001 - a failed reconcile is retried, never fatal
            self.errors += 1
            failures = self._failures.count.get(failure_key, 0) + 1
            self._failures.count[failure_key] = failures
            delay = min(BACKOFF_BASE_SECONDS * 2 ** (failures - 1), BACKOFF_MAX_SECONDS)
            self._logger.warning(
                "reconciler error",
                controller=name,
                request=str(request),
                error=f"{type(error).__name__}: {error}",
                retry_in=delay,
            )
            if generation == self._generation and self._controllers is not None:
                self.enqueue(name, request, delay)
            return
        self._failures.count.pop(failure_key, None)
        if result.requeue_after is not None and generation == self._generation:
            floor = self._min_requeue_for.get(name, self._min_requeue)
            delay = max(result.requeue_after.total_seconds(), floor)
            self.enqueue(name, request, delay)


def _is_reconcile_of(key: object, generation: int) -> bool:
    return isinstance(key, tuple) and len(key) == 4 and key[:2] == ("reconcile", generation)  # noqa: PLR2004
