"""Leader election on a `coordination.k8s.io/v1` Lease, over any `KubeClient`.

The algorithm of client-go's `leaderelection` (what controller-runtime uses), with its
defaults: lease duration 15 s, renew deadline 10 s, retry period 2 s.

- A candidate reads the Lease. It takes it if it does not exist (create), if it holds it
  already (renew), or if the holder has not renewed for `lease_duration` *as observed locally*
  (the record has not changed since we first saw it that long ago; remote clocks are not
  trusted). Writes carry the resourceVersion read, so two candidates cannot both win.
- A leader that cannot renew within `renew_deadline` of its last renewal gives up.
- `release()` empties the holder so another candidate takes over without waiting.

`LeaderElector.step()` does one attempt and returns the delay before the next one; `run()`
loops with an injected waiting function. The clock is injected.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from provisioner.kube.errors import (
    AlreadyExistsError,
    ConflictError,
    KubeApiError,
    NotFoundError,
)
from provisioner.kube.event import format_micro_time
from provisioner.kube.protocol import JsonObject, KubeClient
from provisioner.kube.resource import LEASES

Clock = Callable[[], datetime]
Waiter = Callable[[float, threading.Event], object]

LEASE_DURATION: Final = timedelta(seconds=15)
RENEW_DEADLINE: Final = timedelta(seconds=10)
RETRY_PERIOD: Final = timedelta(seconds=2)


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderElectionConfig:
    """Where the Lease lives, who we are and the timings.

    Attributes:
        name: the Lease's name (Karpenter: `karpenter-leader-election`).
        namespace: the Lease's namespace.
        identity: this candidate's unique id (usually the pod name plus a random suffix).
        lease_duration: how long a silent holder keeps the lease.
        renew_deadline: how long a leader keeps trying to renew before giving up.
        retry_period: the time between attempts.
    """

    name: str
    namespace: str
    identity: str
    lease_duration: timedelta = LEASE_DURATION
    renew_deadline: timedelta = RENEW_DEADLINE
    retry_period: timedelta = RETRY_PERIOD


class LeaderElector:
    """One candidate for the leadership of a Lease.

    Args:
        kube: the API.
        config: the Lease and timings.
        clock: the current time.
        on_started_leading: called once when this candidate becomes leader.
        on_stopped_leading: called once when it stops being leader (lost or released).
        logger: where to report transitions.
    """

    def __init__(
        self,
        kube: KubeClient,
        config: LeaderElectionConfig,
        *,
        clock: Clock,
        on_started_leading: Callable[[], None] | None = None,
        on_stopped_leading: Callable[[], None] | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        self._kube = kube
        self._config = config
        self._clock = clock
        self._on_started = on_started_leading
        self._on_stopped = on_stopped_leading
        self._log = logger or logging.getLogger(__name__)
        self._is_leader = False
        self._last_renew: datetime | None = None
        self._observed_spec: dict[str, Any] | None = None
        self._observed_at: datetime | None = None

    @property
    def is_leader(self) -> bool:
        """Whether this candidate currently holds the lease (as of its last step)."""
        return self._is_leader

    @property
    def holder(self) -> str | None:
        """The holder seen in the last Lease read (`None` if none or not read yet)."""
        if self._observed_spec is None:
            return None
        return self._observed_spec.get("holderIdentity") or None

    def try_acquire_or_renew(self) -> bool:
        """Make one attempt to take or keep the lease; return whether we hold it now."""
        now = self._clock()
        try:
            lease = self._kube.get(LEASES, self._config.name, namespace=self._config.namespace)
        except NotFoundError:
            return self._create(now)
        spec: dict[str, Any] = dict(lease.get("spec") or {})
        if spec != self._observed_spec:
            self._observed_spec, self._observed_at = spec, now
        holder = spec.get("holderIdentity") or ""
        if holder and holder != self._config.identity and not self._expired(spec, now):
            return False
        transitions = int(spec.get("leaseTransitions") or 0)
        patch: JsonObject = {
            "spec": {
                "holderIdentity": self._config.identity,
                "leaseDurationSeconds": int(self._config.lease_duration.total_seconds()),
                "renewTime": format_micro_time(now),
            }
        }
        if holder != self._config.identity:
            patch["spec"]["acquireTime"] = format_micro_time(now)
            patch["spec"]["leaseTransitions"] = transitions + (1 if holder else 0)
        try:
            updated = self._kube.merge_patch(
                LEASES,
                self._config.name,
                patch,
                namespace=self._config.namespace,
                resource_version=lease["metadata"]["resourceVersion"],
            )
        except ConflictError:
            return False
        self._observed_spec, self._observed_at = dict(updated.get("spec") or {}), now
        return True

    def step(self) -> float:
        """One election round: try, update leadership, fire callbacks; return seconds to wait."""
        now = self._clock()
        try:
            held = self.try_acquire_or_renew()
        except KubeApiError as error:
            self._log.warning("lease update failed", extra={"error": str(error)})
            held = False
        if held:
            self._last_renew = now
            if not self._is_leader:
                self._is_leader = True
                self._log.info("successfully acquired lease", extra=self._fields())
                if self._on_started is not None:
                    self._on_started()
        elif self._is_leader and (
            self._last_renew is None or now - self._last_renew >= self._config.renew_deadline
        ):
            self._lose("failed to renew lease")
        return self._config.retry_period.total_seconds()

    def release(self) -> None:
        """Give the lease up if we hold it, so another candidate need not wait for expiry."""
        if not self._is_leader:
            return
        try:
            lease = self._kube.get(LEASES, self._config.name, namespace=self._config.namespace)
            if (lease.get("spec") or {}).get("holderIdentity") == self._config.identity:
                self._kube.merge_patch(
                    LEASES,
                    self._config.name,
                    {
                        "spec": {
                            "holderIdentity": None,
                            "leaseDurationSeconds": 1,
                            "renewTime": format_micro_time(self._clock()),
                        }
                    },
                    namespace=self._config.namespace,
                    resource_version=lease["metadata"]["resourceVersion"],
                )
        except KubeApiError as error:
            self._log.warning("failed to release lease", extra={"error": str(error)})
        self._lose("released lease")

    def run(self, stop: threading.Event, *, wait: Waiter) -> None:
        """Step until `stop` is set, then release the lease."""
        while not stop.is_set():
            delay = self.step()
            if not stop.is_set():
                wait(delay, stop)
        self.release()

    def _create(self, now: datetime) -> bool:
        body: JsonObject = {
            "apiVersion": LEASES.api_version,
            "kind": LEASES.kind,
            "metadata": {"name": self._config.name, "namespace": self._config.namespace},
            "spec": {
                "holderIdentity": self._config.identity,
                "leaseDurationSeconds": int(self._config.lease_duration.total_seconds()),
                "acquireTime": format_micro_time(now),
                "renewTime": format_micro_time(now),
                "leaseTransitions": 0,
            },
        }
        try:
            created = self._kube.create(LEASES, body, namespace=self._config.namespace)
        except AlreadyExistsError:
            return False
        self._observed_spec, self._observed_at = dict(created.get("spec") or {}), now
        return True

    def _expired(self, spec: dict[str, Any], now: datetime) -> bool:
        seconds = spec.get("leaseDurationSeconds")
        duration = (
            timedelta(seconds=int(seconds)) if seconds is not None else self._config.lease_duration
        )
        observed_at = self._observed_at or now
        return observed_at + duration <= now

    def _lose(self, why: str) -> None:
        was_leader, self._is_leader = self._is_leader, False
        self._last_renew = None
        if was_leader:
            self._log.info(why, extra=self._fields())
            if self._on_stopped is not None:
                self._on_stopped()

    def _fields(self) -> dict[str, str]:
        return {
            "identity": self._config.identity,
            "lease": f"{self._config.namespace}/{self._config.name}",
        }
