"""``node.termination``: the ``karpenter.sh/termination`` finalizer — taint, drain, terminate.

For a NodeClaim being deleted, in order (each step returns when it wants to run again):

1. With a ``terminationGracePeriod``, the NodeClaim is annotated
   ``karpenter.sh/nodeclaim-termination-timestamp`` (deletion + TGP; event
   ``TerminationGracePeriodExpiring``).
2. Its Node is deleted, tainted ``karpenter.sh/disrupted:NoSchedule`` and labelled
   ``node.kubernetes.io/exclude-from-external-load-balancers`` (Info ``tainted node``).
3. **Drain** (:meth:`TerminationController.drain`), skipped when the Node is NotReady and its
   instance is already gone. Pods that are terminal, mirror pods, pods tolerating the disrupted
   taint and pods stuck terminating for over a minute are left alone. The rest are evicted
   through the Eviction API in Karpenter's tiers — non-critical pods, non-critical DaemonSet pods,
   critical pods (``system-cluster-critical``/``system-node-critical``), critical DaemonSet pods —
   each tier only once the previous one is gone:

   * 200 -> ``Evicted`` (``Evicted pod: <reason>``); 404/409 -> gone; 429 (a PodDisruptionBudget)
     or 500 (several budgets) -> ``FailedDraining`` and a retry with backoff 100 ms..10 s;
   * protected pods (``karpenter.sh/do-not-disrupt``, GPU reservation pods, non-preemptible work)
     are never evicted: they stall the drain;
   * a gang is evicted as a whole: all its live members (on any node) in one go, only when none
     is protected and their budgets let all of them go;
   * at ``deadline - pod.terminationGracePeriodSeconds`` (the TGP deadline), any pod still
     there is deleted with grace ``max(remaining, 1 s)`` (event ``Disrupted``), bypassing PDBs
     and protections, as Karpenter does.

4. Volume detachment is not awaited: VolumeAttachments are not modelled in the cache (their
   wait would sit here).
5. The Node's finalizer is removed (Info ``deleted node``); the instance is terminated through
   ``CloudProvider.delete`` until the provider says it is gone (``InstanceTerminating=True``);
   the NodeClaim's finalizer is removed (Info ``deleted nodeclaim``).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from cloudprovider.errors import CloudProviderError, NodeClaimNotFoundError
from provisioner.apis import conditions as cond
from provisioner.apis import labels as wk
from provisioner.apis.core import Node, Pod, is_terminal
from provisioner.apis.nodeclaim import NodeClaim
from provisioner.controllers.disruption import events as ev
from provisioner.controllers.disruption.config import DisruptionConfig
from provisioner.controllers.disruption.facts import (
    ClusterFacts,
    is_daemon_pod,
    is_mirror_pod,
    tolerates_disrupted,
)
from provisioner.controllers.disruption.marks import taint_node
from provisioner.controllers.disruption.metrics import DisruptionMetrics
from provisioner.controllers.events import Event
from provisioner.controllers.nodeclaim.status import (
    get_claim,
    patch_claim_status,
    update_with_version,
)
from provisioner.controllers.ports import ControllerBase, Ports
from provisioner.kube.errors import (
    ConflictError,
    KubeApiError,
    NotFoundError,
    ServerError,
    TooManyRequestsError,
)
from provisioner.kube.event import format_time, parse_time
from provisioner.kube.protocol import JsonObject
from provisioner.kube.resource import NODE_CLAIMS, NODES, PODS
from provisioner.podgroups import DetectionMemo
from provisioner.runtime.reconciler import Request, Result

__all__ = ["DRAIN_POLL", "INSTANCE_POLL", "TerminationController", "drain_tier"]

NAME: Final = "node.termination"
INSTANCE_POLL: Final = timedelta(seconds=5)
"""How often to ask whether a terminating instance is gone."""
DELETE_RETRY: Final = timedelta(seconds=10)
DRAIN_POLL: Final = timedelta(seconds=1)
"""How often a draining node is looked at (Karpenter requeues drains after 1 s)."""
STUCK_TERMINATING: Final = timedelta(minutes=1)
"""A pod terminating for longer than this no longer blocks the drain."""
EVICTION_BACKOFF_MIN: Final = timedelta(milliseconds=100)
EVICTION_BACKOFF_MAX: Final = timedelta(seconds=10)
DEFAULT_POD_GRACE_SECONDS: Final = 30
CRITICAL_PRIORITY_CLASSES: Final = frozenset({"system-cluster-critical", "system-node-critical"})
LB_EXCLUSION_VALUE: Final = "karpenter"
FORCEFUL: Final = "Forceful Termination"
_VOLUNTARY: Final = frozenset(cond.DISRUPTION_REASONS)


def drain_tier(pod: Pod) -> int:
    """Karpenter's eviction tier: 0 non-critical, 1 non-critical DaemonSet, 2 critical, 3 both."""
    critical = pod.spec.priority_class_name in CRITICAL_PRIORITY_CLASSES
    return (2 if critical else 0) + (1 if is_daemon_pod(pod) else 0)


def _without_finalizer(obj: JsonObject) -> dict[str, Any] | None:
    finalizers = list(obj.get("metadata", {}).get("finalizers") or [])
    if wk.FINALIZER_TERMINATION not in finalizers:
        return None
    finalizers.remove(wk.FINALIZER_TERMINATION)
    return {"metadata": {"finalizers": finalizers or None}}


@dataclass(slots=True)
class _Backoff:
    failures: int
    until: datetime


class TerminationController(ControllerBase):
    """Finishes the deletion of NodeClaims (and their Nodes) that carry the finalizer.

    Args:
        ports: what the controller acts through (cache, API, cloud, clock, logs, metrics,
            events).
        disruption_metrics: drain counters; not recorded without them.
        config: protections (operator-listed non-preemptible PriorityClasses).
    """

    name: Final = NAME

    def __init__(
        self,
        *,
        ports: Ports,
        disruption_metrics: DisruptionMetrics | None = None,
        config: DisruptionConfig | None = None,
    ) -> None:
        super().__init__(ports, NAME)
        self._dmetrics = disruption_metrics
        self._config = config or DisruptionConfig()
        self._backoff: dict[str, _Backoff] = {}
        self._lock = threading.Lock()
        # drains read the same pods poll after poll: each pod object's group is detected once
        self._groups = DetectionMemo()

    def reconcile(self, request: Request) -> Result:
        """Advance the termination of the NodeClaim ``request.name``."""
        claim = get_claim(self._kube, request.name)
        if claim is None:
            return Result.done()
        node = self._node_of(claim)
        if claim.metadata.deletion_timestamp is None:
            if node is not None and node.metadata.deletion_timestamp is not None:
                self._delete_claim(claim)
            return Result.done()
        if wk.FINALIZER_TERMINATION not in claim.metadata.finalizers:
            return Result.done()
        deadline = self._termination_deadline(claim, node)
        if node is not None:
            waiting = self._terminate_node(node, claim, deadline)
            if waiting is not None:
                return waiting
        waiting = self._terminate_instance(claim)
        if waiting is not None:
            return waiting
        if update_with_version(self._kube, NODE_CLAIMS, claim.name, _without_finalizer):
            self._log.info("deleted nodeclaim", NodeClaim={"name": claim.name})
            self._record_terminated(claim)
        return Result.done()

    # -- drain --------------------------------------------------------------------------------

    def drain(
        self, node: Node, claim: NodeClaim | None = None, deadline: datetime | None = None
    ) -> Result | None:
        """Evict the Node's pods; None once drained, else when to look again.

        Args:
            node: the Node being drained.
            claim: its NodeClaim (the disruption reason for events; ``Drained`` condition).
            deadline: the terminationGracePeriod deadline, if any.
        """
        now = self._clock.now()
        pods = self._pods_on(node.metadata.name, now)
        if not pods:
            return None
        if deadline is not None:
            self._force_delete(node, pods, deadline, now)
        present = [p for p in pods if p.metadata.deletion_timestamp is None]
        tier = min(drain_tier(p) for p in pods)
        current = [p for p in present if drain_tier(p) == tier]
        if not current:
            return Result.after(DRAIN_POLL)
        reason = self._reason(claim)
        snapshot = self._state.snapshot(now)
        self._groups.bound(len(snapshot.pods))
        facts = ClusterFacts.build(
            snapshot, now, self._config.non_preemptible_priority_classes, detector=self._groups
        )
        waits: list[timedelta] = [DRAIN_POLL]
        done: set[str] = set()
        for pod in current:
            if pod.key in done:
                continue
            wait = self._evict_unit(node, pod=pod, facts=facts, reason=reason, now=now, done=done)
            if wait is not None:
                waits.append(wait)
        if claim is not None:
            self._mark_draining(claim, now)
        return Result.after(min(waits))

    def _pods_on(self, node: str, now: datetime) -> list[Pod]:
        return [
            p
            for p in self._state.pods()
            if p.spec.node_name == node
            and not is_terminal(p)
            and not is_mirror_pod(p)
            and not tolerates_disrupted(p)
            and not (
                p.metadata.deletion_timestamp is not None
                and p.metadata.deletion_timestamp + STUCK_TERMINATING < now
            )
        ]

    def _evict_unit(
        self,
        node: Node,
        *,
        pod: Pod,
        facts: ClusterFacts,
        reason: str,
        now: datetime,
        done: set[str],
    ) -> timedelta | None:
        """Evict ``pod`` (with its whole gang); the wait before the next try, if any."""
        gang = facts.gang_of(pod)
        unit = [pod]
        if gang is not None:
            unit = [
                m
                for m in facts.gang_members(gang)
                if m.spec.node_name and not is_terminal(m) and m.metadata.deletion_timestamp is None
            ] or [pod]
        done.update(m.key for m in unit)
        for member in unit:
            protection = facts.protection(member)
            if protection is not None:
                self._publish([ev.failed_draining(node, f"pod is protected: {protection}")])
                return None
        blocked = self._backing_off(unit, now)
        if blocked is not None:
            return blocked
        if len(unit) > 1:
            blocker = facts.pdb_blocker(unit)
            if blocker is not None:
                return self._failed(
                    node, unit, f"evicting pod group violates a PDB: {blocker}", now
                )
        for member in unit:
            wait = self._evict(node, member, reason, now)
            if wait is not None:
                return wait
        return None

    def _evict(self, node: Node, pod: Pod, reason: str, now: datetime) -> timedelta | None:
        namespace = pod.metadata.namespace or "default"
        try:
            self._kube.evict(namespace, pod.metadata.name, uid=pod.metadata.uid or None)
        except NotFoundError:
            self._count_eviction("404")
            return None
        except ConflictError:
            self._count_eviction("409")
            return None
        except TooManyRequestsError:
            self._count_eviction("429")
            return self._failed(node, [pod], f"evicting pod violates a PDB (Pod={pod.key})", now)
        except ServerError as error:
            self._count_eviction(str(error.code or 500))
            return self._failed(node, [pod], f"evicting pod {pod.key}: {error}", now)
        except KubeApiError as error:
            return self._failed(node, [pod], f"evicting pod {pod.key}: {error}", now)
        self._count_eviction("200")
        with self._lock:
            self._backoff.pop(pod.metadata.uid or pod.key, None)
        self._publish([ev.evicted(pod, reason)])
        if self._dmetrics is not None:
            self._dmetrics.pods_drained.labels(reason=reason).inc()
        return None

    def _count_eviction(self, code: str) -> None:
        self._metrics.pods_evictions.labels(code=code).inc()

    def _backing_off(self, unit: Sequence[Pod], now: datetime) -> timedelta | None:
        with self._lock:
            untils = [b.until for p in unit if (b := self._backoff.get(p.metadata.uid or p.key))]
        later = [u for u in untils if u > now]
        return max(later) - now if later else None

    def _failed(self, node: Node, unit: Sequence[Pod], message: str, now: datetime) -> timedelta:
        delay = EVICTION_BACKOFF_MIN
        with self._lock:
            for pod in unit:
                key = pod.metadata.uid or pod.key
                previous = self._backoff.get(key)
                failures = (previous.failures if previous else 0) + 1
                delay = max(
                    delay, min(EVICTION_BACKOFF_MIN * 2 ** (failures - 1), EVICTION_BACKOFF_MAX)
                )
                self._backoff[key] = _Backoff(failures, now + delay)
        self._publish([ev.failed_draining(node, message)])
        return delay

    def _force_delete(
        self, node: Node, pods: Sequence[Pod], deadline: datetime, now: datetime
    ) -> None:
        """Delete the pods whose own grace would outlast `deadline`; failures are surfaced.

        A pod already gone (404) or replaced (409 on its uid) needs nothing; any other error
        (a 403 from missing RBAC, a 5xx) is logged and evented (`FailedDraining`) on the Node,
        and the delete is tried again on the next reconcile.
        """
        for pod in pods:
            if pod.metadata.deletion_timestamp is not None:
                continue
            own = pod.spec.termination_grace_period_seconds
            seconds = DEFAULT_POD_GRACE_SECONDS if own is None else own
            if now < deadline - timedelta(seconds=seconds):
                continue
            grace = max(int((deadline - now).total_seconds()), 1)
            try:
                self._kube.delete(
                    PODS,
                    pod.metadata.name,
                    namespace=pod.metadata.namespace or "default",
                    uid=pod.metadata.uid or None,
                    grace_period_seconds=grace,
                )
            except (NotFoundError, ConflictError):
                continue
            except KubeApiError as error:
                self._log.error(
                    "failed deleting pod for termination grace period",
                    Pod={"name": pod.metadata.name, "namespace": pod.metadata.namespace},
                    Node={"name": node.metadata.name},
                    error=str(error),
                )
                self._publish([ev.failed_draining(node, f"deleting pod {pod.key}, {error}")])
                continue
            self._publish([ev.pod_deleted_for_grace_period(pod, grace, format_time(deadline))])

    @staticmethod
    def _reason(claim: NodeClaim | None) -> str:
        if claim is None or claim.status is None:
            return FORCEFUL
        found = cond.get_condition(
            claim.status.conditions, cond.NODECLAIM_CONDITION_DISRUPTION_REASON
        )
        if found is not None and found.status == cond.STATUS_TRUE and found.reason in _VOLUNTARY:
            return found.reason
        return FORCEFUL

    def _mark_draining(self, claim: NodeClaim, now: datetime) -> None:
        conditions = claim.status.conditions if claim.status else ()
        if cond.get_condition(conditions, cond.NODECLAIM_CONDITION_DRAINED) is not None:
            return
        patch_claim_status(
            self._kube,
            claim.name,
            lambda c: {
                "conditions": cond.set_unknown(
                    c.status.conditions if c.status else (),
                    cond.NODECLAIM_CONDITION_DRAINED,
                    now=now,
                    reason=cond.REASON_DRAINING,
                    message=cond.REASON_DRAINING,
                )
            },
            now=now,
        )

    def _mark_drained(self, claim: NodeClaim, node: Node, now: datetime) -> None:
        conditions = claim.status.conditions if claim.status else ()
        if cond.is_true(conditions, cond.NODECLAIM_CONDITION_DRAINED):
            return
        patch_claim_status(
            self._kube,
            claim.name,
            lambda c: {
                "conditions": cond.set_true(
                    c.status.conditions if c.status else (),
                    cond.NODECLAIM_CONDITION_DRAINED,
                    now=now,
                )
            },
            now=now,
        )
        if self._dmetrics is not None:
            self._dmetrics.nodes_drained.labels(
                nodepool=node.metadata.labels.get(wk.LABEL_NODEPOOL, "")
            ).inc()

    def _publish(self, events: Sequence[Event]) -> None:
        for event in events:
            self._events.publish(event)

    # -- the finalizer's steps ----------------------------------------------------------------

    def _termination_deadline(self, claim: NodeClaim, node: Node | None) -> datetime | None:
        grace = claim.termination_grace_period
        deleted = claim.metadata.deletion_timestamp
        if grace is None or deleted is None:
            return None
        stored = claim.metadata.annotations.get(wk.ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP)
        if stored:
            try:
                return parse_time(stored)
            except ValueError:
                pass
        deadline = deleted + grace
        text = format_time(deadline)
        try:
            self._kube.merge_patch(
                NODE_CLAIMS,
                claim.name,
                {
                    "metadata": {
                        "annotations": {wk.ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP: text}
                    }
                },
            )
        except KubeApiError:
            return deadline
        self._log.info(
            "annotated nodeclaim",
            NodeClaim={"name": claim.name},
            **{wk.ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP: text},
        )
        self._publish(ev.termination_grace_period_expiring(node, claim, text))
        return deadline

    def _node_of(self, claim: NodeClaim) -> Node | None:
        name = claim.status.node_name if claim.status else None
        node = self._state.node(name) if name else None
        if node is None and claim.provider_id:
            node = self._state.node_for_provider_id(claim.provider_id)
        return node

    def _delete_claim(self, claim: NodeClaim) -> None:
        try:
            self._kube.delete(NODE_CLAIMS, claim.name, uid=claim.metadata.uid or None)
        except KubeApiError:
            return

    def _terminate_node(
        self, node: Node, claim: NodeClaim, deadline: datetime | None
    ) -> Result | None:
        name = node.metadata.name
        if node.metadata.deletion_timestamp is None:
            try:
                self._kube.delete(NODES, name)
            except NotFoundError:
                return None
            except KubeApiError:
                return Result.after(DELETE_RETRY)
        if not self._instance_gone(node):
            tainted = any(t.key == wk.TAINT_DISRUPTED for t in node.spec.taints)
            labels = {wk.LABEL_EXCLUDE_FROM_EXTERNAL_LOAD_BALANCERS: LB_EXCLUSION_VALUE}
            if not taint_node(self._kube, name, labels=labels):
                return None
            if not tainted:
                self._log.info(
                    "tainted node",
                    Node={"name": name},
                    taint=f"{wk.TAINT_DISRUPTED}:{wk.TAINT_EFFECT_NO_SCHEDULE}",
                )
            drained = self.drain(node, claim, deadline)
            if drained is not None:
                return drained
            self._mark_drained(claim, node, self._clock.now())
        if update_with_version(self._kube, NODES, name, _without_finalizer) is not None:
            self._log.info("deleted node", Node={"name": name})
            self._metrics.nodes_terminated.labels(
                nodepool=node.metadata.labels.get(wk.LABEL_NODEPOOL, ""),
                zone=node.metadata.labels.get(wk.LABEL_ZONE, ""),
            ).inc()
        return None

    def _instance_gone(self, node: Node) -> bool:
        """A NotReady node whose instance no longer exists is not drained (Karpenter)."""
        ready = any(c.type == "Ready" and c.status == "True" for c in node.status.conditions)
        if ready or not node.spec.provider_id:
            return False
        try:
            self._cloud.get(node.spec.provider_id)
        except NodeClaimNotFoundError:
            return True
        except CloudProviderError:
            return False
        return False

    def _terminate_instance(self, claim: NodeClaim) -> Result | None:
        provider_id = claim.provider_id
        if not provider_id:
            return None
        try:
            self._cloud.delete(provider_id)
        except NodeClaimNotFoundError:
            return None
        except CloudProviderError as error:
            self._log.error(
                "terminating instance", NodeClaim={"name": claim.name}, error=str(error)
            )
            return Result.after(DELETE_RETRY)
        self._mark_instance_terminating(claim)
        try:
            self._cloud.get(provider_id)
        except NodeClaimNotFoundError:
            return None
        except CloudProviderError:
            return Result.after(INSTANCE_POLL)
        return Result.after(INSTANCE_POLL)

    def _mark_instance_terminating(self, claim: NodeClaim) -> None:
        conditions = claim.status.conditions if claim.status else ()
        if cond.is_true(conditions, cond.NODECLAIM_CONDITION_INSTANCE_TERMINATING):
            return
        now = self._clock.now()
        patch_claim_status(
            self._kube,
            claim.name,
            lambda c: {
                "conditions": cond.set_true(
                    c.status.conditions if c.status else (),
                    cond.NODECLAIM_CONDITION_INSTANCE_TERMINATING,
                    now=now,
                )
            },
            now=now,
        )

    def _record_terminated(self, claim: NodeClaim) -> None:
        labels = claim.metadata.labels
        self._metrics.nodeclaims_terminated.labels(
            nodepool=labels.get(wk.LABEL_NODEPOOL, ""),
            capacity_type=labels.get(wk.LABEL_CAPACITY_TYPE, ""),
            zone=labels.get(wk.LABEL_ZONE, ""),
        ).inc()
        deleted = claim.metadata.deletion_timestamp
        if deleted is not None:
            self._metrics.nodeclaim_termination_duration.labels(
                nodepool=labels.get(wk.LABEL_NODEPOOL, "")
            ).observe(max((self._clock.now() - deleted).total_seconds(), 0.0))
