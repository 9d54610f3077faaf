"""An in-memory CloudProvider for the core's tests: real semantics, scriptable failures.

:class:`FakeCloudProvider` keeps "instances" in a dictionary and follows the CloudProvider
contract (idempotent create per NodeClaim, cheapest compatible available offering, typed errors,
``NodeClaimNotFoundError`` on get/delete of a gone instance). Tests steer it with one-shot
error knobs (``next_create_error`` ...), with ``mark_unavailable`` for capacity outages and with
``drifted``; every call is recorded (``create_calls`` ...). It is thread-safe.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from cloudprovider.errors import (
    InsufficientCapacityError,
    NodeClaimNotFoundError,
    NodeClassNotReadyError,
)
from cloudprovider.instancetype import InstanceType
from cloudprovider.protocol import CloudNodeClaim, LaunchRequest, NodePoolRef
from cloudprovider.selection import compatible_candidates, offering_labels
from provisioner.apis.labels import LABEL_NODEPOOL

__all__ = ["FAKE_PROVIDER_PREFIX", "FakeCloudProvider"]

FAKE_PROVIDER_PREFIX = "fake://"


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(slots=True)
class FakeCloudProvider:
    """A CloudProvider that launches into a dictionary.

    Attributes:
        instance_types: what ``get_instance_types`` returns and ``create`` chooses from.
        node_classes: NodeClass names that exist and are Ready; None means "every name".
        clock: the time stamped on launches.
        next_create_error / next_delete_error / next_get_error / next_list_error: raised once
            by the next call of that method, then cleared.
        before_create: called with each launch request before it is served (tests set
            ``next_create_error`` or mark offerings unavailable from it).
        drifted: what ``is_drifted`` answers (None: not drifted).
        create_calls / delete_calls / get_calls / list_calls / instance_types_calls /
            drift_calls: the recorded arguments of every call.
        created: live instances by provider id.
    """

    instance_types: list[InstanceType] = field(default_factory=list)
    node_classes: set[str] | None = None
    clock: Callable[[], datetime] = _utcnow
    next_create_error: Exception | None = None
    before_create: Callable[[LaunchRequest], None] | None = None
    next_delete_error: Exception | None = None
    next_get_error: Exception | None = None
    next_list_error: Exception | None = None
    drifted: str | None = None
    create_calls: list[LaunchRequest] = field(default_factory=list)
    delete_calls: list[str] = field(default_factory=list)
    get_calls: list[str] = field(default_factory=list)
    list_calls: int = 0
    instance_types_calls: list[NodePoolRef] = field(default_factory=list)
    drift_calls: list[CloudNodeClaim] = field(default_factory=list)
    created: dict[str, CloudNodeClaim] = field(default_factory=dict)
    _unavailable: set[tuple[str, str, str]] = field(default_factory=set)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _lock: threading.RLock = field(default_factory=threading.RLock)

    @property
    def name(self) -> str:
        """``fake``."""
        return "fake"

    def reset(self) -> None:
        """Forget instances, recorded calls, knobs and unavailable offerings."""
        with self._lock:
            self.next_create_error = self.next_delete_error = None
            self.before_create = None
            self.next_get_error = self.next_list_error = None
            self.drifted = None
            self.create_calls.clear()
            self.delete_calls.clear()
            self.get_calls.clear()
            self.list_calls = 0
            self.instance_types_calls.clear()
            self.drift_calls.clear()
            self.created.clear()
            self._unavailable.clear()

    def mark_unavailable(self, capacity_type: str, instance_type: str, zone: str) -> None:
        """Simulate insufficient capacity for one offering until :meth:`reset`."""
        with self._lock:
            self._unavailable.add((capacity_type, instance_type, zone))

    def mark_all_unavailable(self) -> None:
        """Simulate insufficient capacity everywhere."""
        with self._lock:
            for instance_type in self.instance_types:
                for offering in instance_type.offerings:
                    self._unavailable.add(
                        (offering.capacity_type, instance_type.name, offering.zone)
                    )

    def _current_types(self) -> list[InstanceType]:
        return [
            replace(
                instance_type,
                offerings=tuple(
                    offering.with_available(
                        offering.available
                        and (offering.capacity_type, instance_type.name, offering.zone)
                        not in self._unavailable
                    )
                    for offering in instance_type.offerings
                ),
            )
            for instance_type in self.instance_types
        ]

    def _check_node_class(self, name: str) -> None:
        if self.node_classes is not None and name not in self.node_classes:
            raise NodeClassNotReadyError(f'NodeClass "{name}" not found')

    def create(self, request: LaunchRequest) -> CloudNodeClaim:
        """Launch into memory; see :meth:`CloudProvider.create`."""
        with self._lock:
            self.create_calls.append(request)
            if self.before_create is not None:
                self.before_create(request)
            if (error := self.next_create_error) is not None:
                self.next_create_error = None
                raise error
            self._check_node_class(request.node_class.name)
            for claim in self.created.values():
                if claim.name == request.name:
                    return claim
            candidates = compatible_candidates(
                self._current_types(), request.requirements, request.requests
            )
            if not candidates:
                raise InsufficientCapacityError(
                    f"launching nodeclaim {request.name}, all requested instance types were "
                    "unavailable during launch"
                )
            chosen = candidates[0]
            instance_id = f"i-fake{next(self._ids):012d}"
            provider_id = f"{FAKE_PROVIDER_PREFIX}{chosen.offering.zone}/{instance_id}"
            labels = offering_labels(chosen.instance_type, chosen.offering)
            labels[LABEL_NODEPOOL] = request.nodepool
            claim = CloudNodeClaim(
                provider_id=provider_id,
                instance_id=instance_id,
                name=request.name,
                nodepool=request.nodepool,
                node_class=request.node_class.name,
                instance_type=chosen.instance_type.name,
                zone=chosen.offering.zone,
                capacity_type=chosen.offering.capacity_type,
                image_id="ami-fake",
                labels=labels,
                capacity=chosen.instance_type.capacity,
                allocatable=chosen.instance_type.allocatable,
                created_at=self.clock(),
            )
            self.created[provider_id] = claim
            return claim

    def delete(self, provider_id: str) -> None:
        """Forget the instance; see :meth:`CloudProvider.delete`."""
        with self._lock:
            self.delete_calls.append(provider_id)
            if (error := self.next_delete_error) is not None:
                self.next_delete_error = None
                raise error
            if self.created.pop(provider_id, None) is None:
                raise NodeClaimNotFoundError(f"deleting instance {provider_id}, not found")

    def get(self, provider_id: str) -> CloudNodeClaim:
        """The live instance; see :meth:`CloudProvider.get`."""
        with self._lock:
            self.get_calls.append(provider_id)
            if (error := self.next_get_error) is not None:
                self.next_get_error = None
                raise error
            claim = self.created.get(provider_id)
            if claim is None:
                raise NodeClaimNotFoundError(f"getting instance {provider_id}, not found")
            return claim

    def list_claims(self) -> list[CloudNodeClaim]:
        """Every live instance."""
        with self._lock:
            self.list_calls += 1
            if (error := self.next_list_error) is not None:
                self.next_list_error = None
                raise error
            return list(self.created.values())

    def get_instance_types(self, nodepool: NodePoolRef) -> Sequence[InstanceType]:
        """Every configured type, unavailable offerings marked ``available=False``."""
        with self._lock:
            self.instance_types_calls.append(nodepool)
            self._check_node_class(nodepool.node_class.name)
            return self._current_types()

    def restamp(self, claim: CloudNodeClaim, *, drifted: bool) -> Mapping[str, str]:
        """Nothing: the fake provider stamps no hash."""
        del claim, drifted
        return {}

    def is_drifted(self, claim: CloudNodeClaim) -> str | None:
        """``drifted``."""
        with self._lock:
            self.drift_calls.append(claim)
            return self.drifted
